// The data directory's own records, read before the command line's member list is judged (drills7
// L3): a joined node restarted by hand with the founders' --members (which lack its id) was refused
// with only "node id 4 is not among the members", while the same list with its id got the helpful
// message about its JOIN record. Every wrong restart form of a directory gets the directory's word
// first: IDENTITY (another node's or another cluster's directory), then JOIN (a joined node starts
// from its record, with --members naming itself alone).
#pragma once

#include <string>

#include "server/node_config.h"

namespace raftlog::raftlogd {

// "" when the directory has nothing to say against `config`'s id, cluster id and member list (no
// directory, no IDENTITY or JOIN, or both agree), else why it cannot start so (exit 2). `joining`:
// --join was given (a restart of a joined node takes its record; --members must still name itself
// alone; a directory with a node's state and no JOIN record was not created by --join). Read only, before the directory's lock: raftlogd checks the same records again under the
// lock (check_data_dir_identity, apply_recorded_join), so a record that changes in between is
// caught there.
std::string data_dir_restart_form_problem(const server::NodeConfig& config, bool joining);

}  // namespace raftlog::raftlogd

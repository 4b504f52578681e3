// The golden tests' interpreter: production replicas (tests/raft/test_cluster.h: replica::Replica
// over simulated disks) driven one command at a time, every Ready they hand out and every delivered
// message printed (describe.h). Nothing runs between commands: an input (tick, message, proposal)
// goes to the replica without processing it, so the core's outputs wait in its Ready until
// `process-ready` or `stabilize` has the replica handle them, and sent messages wait in the network
// until `deliver-msgs` or `stabilize`.
//
// Handling a Ready is the replica's own driver (replica_ready.cpp): term and vote are written
// durably first, `messages` leave at once, entries are written, and `messages_after_persist` are
// held until the log is durable. `process-ready` then runs the node's flush cycles until its log is
// durable, so the held messages leave (and the durability report's own Ready batches follow) within
// the same command. So what a node holds after `process-ready` also survives `crash-restart`; what a
// crash loses is whatever the core had not yet handed out.
//
// Commands (ids are node ids 1..N; "[...]" optional):
//   add-nodes N [pre-vote=B] [check-quorum=B] [election-ticks=T] [heartbeat-ticks=H] [max-entries=K]
//             [max-inflight=M]
//       creates voters 1..N (each seeded with its id). Input lines "ID [log=T,T,...] [term=T] [vote=V]
//       [commit=C]" restore a node from that log (entry i has term T_i) and hard state, written to its
//       disk before its replica opens.
//   campaign ID                 ticks ID (not a leader, no pending Ready) until its election timeout
//                               fires: it pre-campaigns, or campaigns without pre-vote
//   tick ID [N]                 ticks ID N times (default 1)
//   propose ID PAYLOAD...       one client append (no deduplication) of one entry per payload
//   read-index ID               starts a linearizable read (the replica numbers it: see read-state)
//   transfer-leadership FROM TO
//   process-ready [ID...]       has these nodes' replicas (default all) handle every pending Ready
//   deliver-msgs [ID...] [type=T] [count=N]   delivers queued messages to these nodes (default all),
//                               oldest first, only of type T (e.g. Append), at most N per node
//   drop-msgs [ID...] [type=T] [count=N]      the same, but the messages are lost
//   stabilize                   process-ready and deliver-msgs for all nodes until nothing is left
//   isolate ID...               messages from or to these nodes are lost when delivered
//   heal                        ends every isolation
//   crash-restart ID            power cut: the node's unsynced bytes are lost and its replica reopens
//   status [ID...]              role, term, vote, leader, commit and log (index/term) of each node
//   log ID                      every entry of the node's log
//
// The replica's answers to the client requests (append acknowledged or refused, read released or
// aborted, transfer done) are printed as they come, after the command's other output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "describe.h"
#include "raft/raft.h"
#include "test_cluster.h"

namespace raftlog::raft::golden {

// A malformed command or one the cluster's state cannot carry out (a bug in the script).
class ScriptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandLine {
  std::string name;
  std::vector<std::string> args;               // positional words
  std::map<std::string, std::string> options;  // key=value words
};

CommandLine parse_command_line(const std::string& line);

class Interaction {
 public:
  Interaction();
  ~Interaction();
  Interaction(const Interaction&) = delete;
  Interaction& operator=(const Interaction&) = delete;

  // Runs one command; returns what happened. Throws ScriptError.
  Lines run(const std::string& command_line, const std::vector<std::string>& input);

 private:
  struct MessageFilter {
    std::set<NodeId> recipients;  // empty: every node
    std::optional<MessageType> type;
    std::size_t per_node = SIZE_MAX;
  };
  // A client request whose answer is printed once the replica gives it.
  struct PendingAnswer {
    std::string what;                                    // "n1 append 2..3", ...
    std::function<std::optional<std::string>()> answer;  // the answer's text once answered
  };

  void add_nodes(const CommandLine& command, const std::vector<std::string>& input, Lines& out);
  void campaign(const CommandLine& command, Lines& out);
  void tick(const CommandLine& command, Lines& out);
  void propose(const CommandLine& command, Lines& out);
  void read_index(const CommandLine& command, Lines& out);
  void transfer_leadership(const CommandLine& command, Lines& out);
  void stabilize(Lines& out);
  void crash_restart(const CommandLine& command, Lines& out);
  void print_status(const std::vector<NodeId>& ids, Lines& out) const;
  void print_log(NodeId id, Lines& out) const;
  // Readies the replicas handled since the last call (inside an input, a replica may handle its
  // core's pending output first: an append right after an election does).
  bool print_new_readies(Lines& out);
  void print_answers(Lines& out);

  // The driver: true when something was done.
  bool process_ready(NodeId id, Lines& out);
  bool move_messages(const MessageFilter& filter, bool deliver, Lines& out);

  testing::TestCluster& cluster() const;
  const Raft& core(NodeId id) const;
  NodeId node_id(const std::string& word) const;
  std::vector<NodeId> node_ids(const std::vector<std::string>& words, std::size_t from) const;
  std::vector<NodeId> all_ids() const;
  MessageFilter message_filter(const CommandLine& command) const;

  std::unique_ptr<testing::TestCluster> cluster_;
  std::map<NodeId, std::size_t> readies_printed_;  // per node: how many of its readies were printed
  std::vector<PendingAnswer> pending_answers_;     // bounded by the script's requests
  std::set<NodeId> isolated_;
};

}  // namespace raftlog::raft::golden

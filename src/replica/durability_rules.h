// The durability rules of the Ready driver that the simulator's self-test deliberately breaks.
//
// A LINK-TIME seam like the Raft core's (src/raft/rules.h): production targets (raftlog_replica,
// raftlog_replica_unbound) link durability_rules_{ack,held,install,install_sync,retention}.cpp,
// one rule a file; the test-only targets
// raftlog_replica_broken_{ack,held,install,install_sync,retention} link the same replica
// objects with one of those files replaced by src/replica/testing/broken_*_rules.cpp, which
// defines only its broken rule. No production code path can select a broken rule.
#pragma once

#include <cstdint>

namespace raftlog::replica::rules {

// The index up to which the core may count this node's own log as persisted (on a leader: toward the
// quorum that commits, and so acknowledges, an append). Sync flush mode: only what a flush covers.
// Async flush mode: what is written to the mapping (docs/durability.md).
std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async);

// Whether acknowledgements and votes that vouch for the log up to `required_index` may leave now
// that the log is durable through `durable_index`.
bool may_release_held(std::uint64_t required_index, std::uint64_t durable_index);

// Whether a snapshot install rewrites CONFSTATE with the snapshot's configuration (step 4 of the
// install, replica_snapshot.cpp, and its completion by the next open). Without it a restart after
// the install rolls the node's configuration back to the one it had before the snapshot.
bool install_rewrites_conf_state();

// Whether the preparation of a received snapshot syncs SNAPSHOT.install before the install renames
// it into place (replica_snapshot_receive.cpp). Without it a power cut after the install can leave
// SNAPSHOT.next or SNAPSHOT named but without its bytes, under a log that starts after it.
bool install_syncs_prepared_snapshot();

// The trim limit a follower applies: its own (`own_limit`, the first index it must keep), lowered to
// the retention hold its current leader sent (`leader_hold`, 0: none valid; retention_hold.h). A
// hold only restricts. Without it a follower that becomes leader may have trimmed what a lagging
// node still needs, and must send it a snapshot the old leader did not need.
std::uint64_t follower_trim_limit(std::uint64_t own_limit, std::uint64_t leader_hold);

}  // namespace raftlog::replica::rules

// Messages a test forges from a leader or a candidate to an unvouched node, and the replica's
// durable record of the state (tests/raft/unvouched_test.cpp, vouch_rule_test.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "replica/unvouched_marker.h"
#include "test_cluster.h"

namespace raftlog::raft::testing::unvouched {

inline Entry entry_at(Index index, Term term) {
  Entry e;
  e.index = index;
  e.term = term;
  e.type = EntryType::kNormal;
  return e;
}

// An append of `leader` in `term` after (index, log_term) carrying `entries` and naming `commit`.
inline Message append_from(NodeId leader, NodeId to, Term term, Index index, Term log_term,
                           Index commit, std::vector<Entry> entries) {
  Message m;
  m.type = MessageType::kAppend;
  m.from = leader;
  m.to = to;
  m.term = term;
  m.index = index;
  m.log_term = log_term;
  m.commit = commit;
  m.entries = std::move(entries);
  return m;
}

inline Message heartbeat_from(NodeId leader, NodeId to, Term term, Index commit) {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.from = leader;
  m.to = to;
  m.term = term;
  m.leader_commit = commit;
  return m;
}

inline Message vote_request(NodeId candidate, NodeId to, Term term, Index last_index,
                            Term last_term, bool pre_vote) {
  Message m;
  m.type = pre_vote ? MessageType::kPreVote : MessageType::kVote;
  m.from = candidate;
  m.to = to;
  m.term = term;
  m.index = last_index;
  m.log_term = last_term;
  return m;
}

// DATA_DIR/UNVOUCHED (src/replica/unvouched_marker.h) exists on `id`'s disk.
inline bool marker_exists(TestCluster& c, NodeId id) {
  return c.node(id).env->exists(c.node(id).config.data_dir + "/" +
                                replica::UnvouchedMarker::kFileName);
}

}  // namespace raftlog::raft::testing::unvouched

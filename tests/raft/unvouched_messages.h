// Messages a test forges from a leader or a candidate to an unvouched node, and the replica's
// durable record of the state, and the answer to a vote request (tests/raft/unvouched_test.cpp,
// vouch_rule_test.cpp, not_founder_test.cpp, unvouched_may_elect_test.cpp).
#pragma once

#include <cstddef>
#include <optional>
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

// Steps `request` (a (pre-)vote request) into its receiver; whether the answer it produced grants
// it (nullopt: none).
inline std::optional<bool> answer_to(TestCluster& c, const Message& request) {
  const std::size_t mark = c.node(request.to).readies.size();
  c.step(request.to, request);
  const std::vector<Ready>& readies = c.node(request.to).readies;
  for (std::size_t i = mark; i < readies.size(); ++i) {
    for (const std::vector<Message>* queue :
         {&readies[i].messages, &readies[i].messages_after_persist}) {
      for (const Message& m : *queue) {
        if (m.to == request.from && (m.type == MessageType::kVoteResponse ||
                                     m.type == MessageType::kPreVoteResponse)) {
          return !m.reject;
        }
      }
    }
  }
  return std::nullopt;
}

// DATA_DIR/UNVOUCHED (src/replica/unvouched_marker.h) exists on `id`'s disk.
inline bool marker_exists(TestCluster& c, NodeId id) {
  return c.node(id).env->exists(c.node(id).config.data_dir + "/" +
                                replica::UnvouchedMarker::kFileName);
}

}  // namespace raftlog::raft::testing::unvouched

// BareNode: one bare Raft core over a MemoryLog, for tests that pin what the core asks for and
// answers (docs/raft.md) without a replica: its driver applies each Ready to the MemoryLog at once,
// reports it durable, and keeps every message the core sent until the test takes it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "raft/memory_log.h"
#include "raft/raft.h"

namespace raftlog::raft::testing {

struct BareNode {
  BareNode(const Config& config, std::vector<Entry> entries, Index trim_before, HardState hard) {
    log.append(entries);
    if (trim_before > 1) log.truncate_prefix(trim_before);
    raft = std::make_unique<Raft>(config, log, hard);
  }
  void drain() {
    while (raft->has_ready()) {
      Ready rd = raft->ready();
      log.apply(rd);
      if (rd.snapshot) snapshots.push_back(*rd.snapshot);
      if (rd.hard_state) hard_states.push_back(*rd.hard_state);
      const Index last = log.last_index();
      raft->on_persisted(last, *log.term_at(last));
      for (Message& m : rd.messages) sent.push_back(std::move(m));
      for (Message& m : rd.messages_after_persist) sent.push_back(std::move(m));
    }
  }
  std::vector<Message> take(MessageType type, NodeId to) {
    std::vector<Message> out;
    for (auto it = sent.begin(); it != sent.end();) {
      if (it->type == type && it->to == to) {
        out.push_back(std::move(*it));
        it = sent.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  // Every message sent to `to`, in the order sent.
  std::vector<Message> take_all_to(NodeId to) {
    std::vector<Message> out;
    for (auto it = sent.begin(); it != sent.end();) {
      if (it->to == to) {
        out.push_back(std::move(*it));
        it = sent.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  MemoryLog log;
  std::unique_ptr<Raft> raft;
  std::vector<Message> sent;
  std::vector<Snapshot> snapshots;
  std::vector<HardState> hard_states;
};

// A message of `type` from `from` to `to` in `term`, every other field empty.
inline Message response(MessageType type, NodeId from, NodeId to, Term term) {
  Message m;
  m.type = type;
  m.from = from;
  m.to = to;
  m.term = term;
  return m;
}

}  // namespace raftlog::raft::testing

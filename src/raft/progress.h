// A leader's replication state for one follower, with its bounded window of in-flight appends.
//
// Probe: the match point is unknown; at most one append is outstanding (`probe_sent`) until the follower
// answers (or a heartbeat response shows it is alive). Replicate: the match point is known; appends are
// pipelined optimistically (`next` runs ahead of `match`) up to max_inflight_messages outstanding
// and, in entry bytes, up to max_inflight_bytes (one append may pass that: see Inflights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "raft/types.h"

namespace raftlog::raft {

// The appends in flight to one follower (last index and entry bytes of each), oldest first. Full at
// `capacity` appends or once their entries reach `max_bytes` bytes (Entry::byte_size), whichever
// comes first. The byte bound is what keeps a follower far behind from costing the leader hundreds
// of MiB of log reads and queued messages at once (max_inflight_messages full appends): the leader
// reads no more than the room left (Raft::Impl::append_byte_budget, at least one entry), so the
// window holds at most max_bytes plus one entry, and since a round's acknowledgements free only
// appends sent before that round, it reads and sends about that much per follower per round.
class Inflights {
 public:
  Inflights(std::size_t capacity, std::size_t max_bytes);
  bool full() const { return appends_.size() >= capacity_ || bytes_ >= max_bytes_; }
  std::size_t count() const { return appends_.size(); }
  std::size_t bytes() const { return bytes_; }
  // Records an append whose last entry is `last_index` (increasing; asserted), carrying `bytes` of
  // entries. Precondition: !full().
  void add(Index last_index, std::size_t bytes);
  // Forgets every append acknowledged by an ack of `index` (those ending at or below it).
  void free_up_to(Index index);
  // Forgets the oldest append. A heartbeat response frees one slot of a full window whose appends
  // went unanswered for an election timeout (Progress::ticks_since_append_response), so that a window
  // whose acknowledgements were all lost cannot stall replication: the next append then exposes the gap
  // and the follower's rejection moves the peer back to probe.
  void free_first();
  void reset();

 private:
  struct InflightAppend {
    Index last_index = 0;
    std::size_t bytes = 0;
  };
  std::size_t capacity_;
  std::size_t max_bytes_;
  std::deque<InflightAppend> appends_;
  std::size_t bytes_ = 0;  // of appends_
};

// kSnapshot: the follower needs entries the leader trimmed; one snapshot is in flight to it
// (`pending_snapshot`) and nothing else is sent until it is acknowledged or `snapshot_ticks` reach
// Config::snapshot_retry_ticks (then it goes back to probe, which sends a new one).
enum class ReplicationState : std::uint8_t { kProbe, kReplicate, kSnapshot };

struct Progress {
  Progress(std::size_t max_inflight_messages, std::size_t max_inflight_bytes)
      : inflights(max_inflight_messages, max_inflight_bytes) {}

  Index match = 0;  // highest index the follower acknowledged as durable
  Index next = 1;   // next index to send
  ReplicationState state = ReplicationState::kProbe;
  bool probe_sent = false;  // probe state: an append is outstanding, send no more until an answer
  Index pending_snapshot = 0;        // snapshot state: the index of the snapshot in flight
  std::uint64_t snapshot_ticks = 0;  // snapshot state: ticks since it was sent
  Inflights inflights;
  bool catching_up = false;      // its last ack carried kCatchingUpContext: not counted for commit
  // Its latest accepted append response of this term was unmarked (not catching up): only then does
  // it count toward a membership change's reachable quorum. Heartbeat answers and rejections say
  // nothing about whether it lost its log (review amnesia3 H1).
  bool counts_for_changes = false;
  bool recent_active = false;    // heard from since the last check-quorum round
  bool heard_this_term = false;  // answered this leader at least once (membership quorum check)
  // Its own answer to an append (an acknowledgement of an index above 0, a rejection, or a
  // heartbeat answer saying its log lost entries) told this leader where its log ends or matches.
  // Until then `match` (0) and `next` (a guess) say nothing about it: only such an answer may show
  // that it needs entries this leader trimmed (Raft::Impl::send_append, PeerProgress).
  bool answered_append = false;
  std::uint64_t ticks_since_contact = 0;  // observability
  // Ticks since its last append response: a heartbeat answer frees a slot of a full window only
  // once appends have gone unanswered this long (Raft::Impl::handle_heartbeat_response).
  std::uint64_t ticks_since_append_response = 0;
  bool disk_over_watermark = false;       // as its last response said

  void become_probe();
  void become_replicate();
  // A snapshot replacing the log up to `index` was sent: pause until it is acknowledged.
  void become_snapshot(Index index);
  // No append may be sent now (probe outstanding, or the in-flight window is full).
  bool is_paused() const;
  // A successful append response acknowledging `index`. Returns true when match advanced.
  bool on_ack(Index index);
  // An append carrying `bytes` of entries up to `last_sent_index` was sent.
  void on_entries_sent(Index last_sent_index, std::size_t bytes);
  // A rejection of the append whose previous index was `rejected_index`; `match_hint` is the leader's
  // estimate (from the follower's conflict hint) of the highest index that may match. Returns false for
  // stale rejections (answers to appends the leader has already moved past).
  bool on_reject(Index rejected_index, Index match_hint);
};

}  // namespace raftlog::raft

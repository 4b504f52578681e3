// DedupTable: remembers where each client's recent appends landed in the log, so that a retried
// Append with the same (client_id, sequence) is answered with the original indexes instead of being
// written twice.
//
// It mirrors the node's LOG, not only its committed prefix: every batch written to the store (a
// leader's proposals and a follower's replicated entries alike) is recorded, and a suffix truncation
// forgets what it removed. A leader truncates its own log only as it becomes leader, before its first
// proposal (an unfinished proposal at its log's end: docs/durability.md, "Atomic appends"), and the
// replica hands that truncation out before it looks up any retry; so everything a leader's table holds
// will commit under it: a retry that finds its range here only waits for that range to commit. One
// exception: a proposal is recorded before its entries reach the store, and a leader that loses
// leadership before writing them has them replaced without a store truncation; the replica
// therefore answers a committed range only when the log holds the record's term there
// (Replica::answer_from_dedup).
//
// Idempotency is exact: a retry must carry the same entries as the append it repeats. Each remembered
// append keeps its entry count (the length of its range) and a digest of its payloads (append_digest
// below), computed the same way from a proposal's payloads and from entries read back from the log
// or replicated to a follower, however many batches they arrive in. A retry whose count or digest
// differs is kReused, never an answer with the old range: its data would be silently dropped. The
// comparison is against this node's log as it stands, committed or not; a range that holds only the
// first entries of an append (a follower that became leader before the rest reached it) is
// therefore not an exact match either.
//
// Bounds: at most `max_clients` clients (least recently used evicted) and per client the
// `sequences_per_client` most recent sequences. A sequence below the lowest one still remembered for
// that client is reported as too old (the caller refuses it rather than risk a duplicate). A client
// evicted as a whole is forgotten entirely: docs/durability.md states the window. Memory: 40 bytes
// per remembered append (sequence, first, last, term: 32; the digest: 4, padded to 8) plus the
// deque's and the client's bookkeeping, so the digest costs 8 bytes per remembered append.
//
// Not thread-safe: owned by the node's Raft loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace raftlog::replica {

// The digest of an append's payloads: CRC32C (src/util/crc32c.h) chained over every payload in
// index order, each preceded by its length as 8 little-endian bytes (so ["ab", "c"] and ["a", "bc"]
// differ). Chaining lets a follower extend it entry by entry, across replication batches. Two
// different appends with the same entry count collide with probability about 2^-32.
// An entry with an envelope (`has_envelope`: topic, keys, timestamp, topic offset,
// src/derived/envelope.h) is digested by its identity only (derived::envelope_identity: topic,
// keys and user bytes, without the version, the timestamp and the topic offset, which the leader
// stamps when it proposes: a retry carries the same topic, keys and bytes but cannot know them).
// Its length word (the identity's length) has bit 63 set, so an envelope entry never matches a
// plain entry of the same bytes. Plain entries digest as they always did. The digests live in
// memory only (rebuilt from the log at open), so changing what they cover needs no migration.
std::uint32_t extend_append_digest(std::uint32_t digest, std::string_view payload,
                                   bool has_envelope = false);
std::uint32_t append_digest(std::span<const std::string> payloads, bool has_envelope = false);

class DedupTable {
 public:
  struct Range {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t term = 0;  // term of the entries (all entries of one append share it)
    friend bool operator==(const Range&, const Range&) = default;
  };

  // kFound: the retry carries exactly the remembered entries. kReused: the (client_id, sequence) is
  // remembered for other entries (another count or digest). kTooOld: older than what is remembered
  // for the client, or a mismatch against an append that may have begun before the table's view
  // (see set_view_start). kUnknown: never seen (or forgotten with its whole client).
  enum class Lookup { kUnknown, kFound, kReused, kTooOld };

  // One remembered append and one client's whole state, as a snapshot carries them
  // (snapshot_data.h): what the table answers a retry from.
  struct RememberedAppend {
    std::uint64_t sequence = 0;
    Range range;
    std::uint32_t digest = 0;  // append_digest() of the range's payloads
    friend bool operator==(const RememberedAppend&, const RememberedAppend&) = default;
  };
  struct ClientState {
    std::uint64_t client_id = 0;
    std::uint64_t forgotten_below = 0;       // sequences below it are too old to answer
    std::vector<RememberedAppend> appends;  // in the order the table remembered them
    friend bool operator==(const ClientState&, const ClientState&) = default;
  };

  DedupTable(std::size_t max_clients, std::size_t sequences_per_client);

  // Records that the log entry at `index` (of `term`, carrying `payload`) belongs to append
  // (client_id, sequence). Entries of one append are contiguous and recorded in index order; a new
  // sequence starts a new range. client_id 0 is ignored (not an idempotent append). An entry that a
  // remembered append of the same sequence and term already covers (one a snapshot carried whole)
  // changes nothing.
  void record_entry(std::uint64_t client_id, std::uint64_t sequence, std::uint64_t index,
                    std::uint64_t term, std::string_view payload, bool has_envelope = false);

  // Records a whole append at once (the leader's own proposal): `digest` is append_digest() of its
  // payloads, so this remembers exactly what record_entry() over each of its entries would.
  void record_append(std::uint64_t client_id, std::uint64_t sequence, const Range& range,
                     std::uint32_t digest);

  // Looks up a retry carrying `payloads` (with envelopes when `has_envelope`). kFound and kReused
  // fill `range` with the remembered one.
  Lookup find(std::uint64_t client_id, std::uint64_t sequence,
              std::span<const std::string> payloads, Range* range, bool has_envelope = false);

  // The table was (re)built from the log starting at `index`: a range that starts there may be the
  // tail of an append whose first entries lie below, so a retry that does not match it exactly is
  // kTooOld (the window cannot tell) rather than kReused. 0 or 1: the table saw the whole log.
  void set_view_start(std::uint64_t index) { view_start_ = index; }

  // Forgets every append whose range reaches `from_index` or beyond (the log was cut there).
  void truncate_from(std::uint64_t from_index);

  std::size_t clients() const { return clients_.size(); }

  // Visits every client, most recently used first, with the appends whose range starts at or below
  // `through` (a snapshot's index: what the entries after it do not carry whole) and ends at or
  // below `committed` (an append that straddles the snapshot is kept whole when its end is
  // committed: its later entries then reach the receiver unchanged); a client left with no append
  // and nothing forgotten is skipped. Stops when `visit` returns false.
  void for_each_client_through(std::uint64_t through, std::uint64_t committed,
                               const std::function<bool(const ClientState&)>& visit) const;
  // The clients' ids, most recently used first, and one client's state as for_each_client_through
  // visits it (false: the table does not hold the client, or it would be skipped): a leader gathers
  // a large table in slices across loop rounds (replica_snapshot_send.cpp), by id, since the order
  // changes between them.
  std::vector<std::uint64_t> client_ids() const;
  // Walks of the whole table so far: calls of for_each_client_through and client_ids (a leader's
  // snapshot gather, a trim's SNAPSHOT file), so that a test can tell a send that walked the table
  // from one that did not.
  std::uint64_t walks() const { return walks_; }
  bool client_through(std::uint64_t client_id, std::uint64_t through, std::uint64_t committed,
                      ClientState* out) const;
  // Replaces the whole table by `clients` (a snapshot's; validated by the caller), within this
  // table's sequences_per_client (each client's lowest sequences beyond it are evicted as usual),
  // but all its clients, even above max_clients (a snapshot a new leader continued holds one
  // leader's clients <= X and another's > X: each within its bound, not their union; bounded by
  // the snapshot data's 64 MiB); the clients recorded afterwards bring the table back to its
  // bound, each new client evicting one of the excess beside the one it takes the room of. Their recency is the table's own, not the sender's order (which depends on the
  // sender's history): the client whose newest range ends last is the most recent, ties by lower
  // client id, so the clients whose appends are oldest in the log are evicted first. The log now starts at
  // `log_start` (a snapshot's index + 1) and the snapshot's senders saw their logs from
  // `sender_view_start` and each of `other_sender_view_starts` (the earlier leaders of a continued
  // transfer: snapshot_frames.h): a range starting at any of them may be the tail of an append
  // whose first entries this table never saw (see set_view_start), so all are kept.
  void replace(std::uint64_t log_start, std::uint64_t sender_view_start,
               const std::vector<ClientState>& clients,
               const std::vector<std::uint64_t>& other_sender_view_starts = {});
  std::uint64_t view_start() const { return view_start_; }

 private:
  struct Remembered {
    std::uint64_t sequence;
    Range range;
    std::uint32_t digest;  // append_digest() of the range's payloads
  };
  struct Client {
    std::uint64_t client_id;
    std::deque<Remembered> recent;      // oldest first; at most sequences_per_client_
    std::uint64_t forgotten_below = 0;  // sequences below this were evicted: too old to answer
  };
  using ClientList = std::list<Client>;  // most recently used first

  Client& touch(std::uint64_t client_id);
  static bool export_through(const Client& client, std::uint64_t through, std::uint64_t committed,
                             ClientState* out);
  void remember(Client& client, const Remembered& append);

  std::size_t max_clients_;
  std::size_t sequences_per_client_;
  std::uint64_t view_start_ = 0;
  // replace(): the snapshot senders' view starts (at most kMaxSnapshotSenders, snapshot_frames.h).
  std::vector<std::uint64_t> sender_view_starts_;
  ClientList lru_;
  std::unordered_map<std::uint64_t, ClientList::iterator> clients_;
  mutable std::uint64_t walks_ = 0;  // walks(): counted by the const walks themselves
};

}  // namespace raftlog::replica

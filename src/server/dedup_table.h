// DedupTable: remembers where each client's recent appends landed in the log, so that a retried
// Append with the same (client_id, sequence) is answered with the original indexes instead of being
// written twice.
//
// It mirrors the node's LOG, not only its committed prefix: every batch written to the store (a
// leader's proposals and a follower's replicated entries alike) is recorded, and a suffix truncation
// forgets what it removed. A leader never truncates its own log, so everything a new leader's table
// holds will commit under it: a retry that finds its range here only waits for that range to commit.
//
// Bounds: at most `max_clients` clients (least recently used evicted) and per client the
// `sequences_per_client` most recent sequences. A sequence below the lowest one still remembered for
// that client is reported as too old (the caller refuses it rather than risk a duplicate). A client
// evicted as a whole is forgotten entirely: docs/durability.md states the window.
//
// Not thread-safe: owned by the node's Raft loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <unordered_map>

namespace raftlog::server {

class DedupTable {
 public:
  struct Range {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t term = 0;  // term of the entries (all entries of one append share it)
    friend bool operator==(const Range&, const Range&) = default;
  };

  enum class Lookup { kUnknown, kFound, kTooOld };

  DedupTable(std::size_t max_clients, std::size_t sequences_per_client);

  // Records that the log entry at `index` (of `term`) belongs to append (client_id, sequence).
  // Entries of one append are contiguous and recorded in index order; a new sequence starts a new
  // range. client_id 0 is ignored (not an idempotent append).
  void record_entry(std::uint64_t client_id, std::uint64_t sequence, std::uint64_t index,
                    std::uint64_t term);

  // kFound fills `range`; kTooOld when the sequence is older than what is remembered for the client.
  Lookup find(std::uint64_t client_id, std::uint64_t sequence, Range* range);

  // Forgets every append whose range reaches `from_index` or beyond (the log was cut there).
  void truncate_from(std::uint64_t from_index);

  std::size_t clients() const { return clients_.size(); }

 private:
  struct Remembered {
    std::uint64_t sequence;
    Range range;
  };
  struct Client {
    std::uint64_t client_id;
    std::deque<Remembered> recent;        // oldest first; at most sequences_per_client_
    std::uint64_t forgotten_below = 0;    // sequences below this were evicted: too old to answer
  };
  using ClientList = std::list<Client>;  // most recently used first

  Client& touch(std::uint64_t client_id);

  std::size_t max_clients_;
  std::size_t sequences_per_client_;
  ClientList lru_;
  std::unordered_map<std::uint64_t, ClientList::iterator> clients_;
};

}  // namespace raftlog::server

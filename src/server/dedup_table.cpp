#include "server/dedup_table.h"

#include <algorithm>
#include <cassert>

namespace raftlog::server {

DedupTable::DedupTable(std::size_t max_clients, std::size_t sequences_per_client)
    : max_clients_(max_clients), sequences_per_client_(sequences_per_client) {
  assert(max_clients_ > 0);
  assert(sequences_per_client_ > 0);
}

DedupTable::Client& DedupTable::touch(std::uint64_t client_id) {
  auto it = clients_.find(client_id);
  if (it != clients_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return lru_.front();
  }
  if (clients_.size() == max_clients_) {
    clients_.erase(lru_.back().client_id);
    lru_.pop_back();
  }
  lru_.push_front(Client{client_id, {}, 0});
  clients_.emplace(client_id, lru_.begin());
  return lru_.front();
}

void DedupTable::record_entry(std::uint64_t client_id, std::uint64_t sequence, std::uint64_t index,
                              std::uint64_t term) {
  if (client_id == 0) return;
  Client& client = touch(client_id);
  if (!client.recent.empty()) {
    Remembered& newest = client.recent.back();
    if (newest.sequence == sequence && newest.range.last + 1 == index && newest.range.term == term) {
      newest.range.last = index;  // the next entry of the same append
      return;
    }
  }
  client.recent.push_back(Remembered{sequence, Range{index, index, term}});
  if (client.recent.size() > sequences_per_client_) {
    // Evict the lowest sequence remembered (appends of one client may land out of sequence order
    // when the client pipelines), and refuse anything at or below it from now on.
    auto lowest = std::min_element(client.recent.begin(), client.recent.end(),
                                   [](const Remembered& a, const Remembered& b) {
                                     return a.sequence < b.sequence;
                                   });
    client.forgotten_below = std::max(client.forgotten_below, lowest->sequence + 1);
    client.recent.erase(lowest);
  }
}

DedupTable::Lookup DedupTable::find(std::uint64_t client_id, std::uint64_t sequence, Range* range) {
  auto it = clients_.find(client_id);
  if (it == clients_.end()) return Lookup::kUnknown;
  Client& client = touch(client_id);
  // Newest first: a sequence recorded twice (after a truncation re-proposal) answers with the latest.
  for (auto r = client.recent.rbegin(); r != client.recent.rend(); ++r) {
    if (r->sequence == sequence) {
      *range = r->range;
      return Lookup::kFound;
    }
  }
  if (sequence < client.forgotten_below) return Lookup::kTooOld;
  return Lookup::kUnknown;
}

void DedupTable::truncate_from(std::uint64_t from_index) {
  // Truncations are rare (a leader change with an uncommitted tail), so a full pass is acceptable.
  for (Client& client : lru_) {
    std::erase_if(client.recent, [&](const Remembered& r) { return r.range.last >= from_index; });
  }
}

}  // namespace raftlog::server

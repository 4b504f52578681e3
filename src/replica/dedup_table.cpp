#include "replica/dedup_table.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "derived/envelope.h"
#include "util/crc32c.h"

namespace raftlog::replica {

std::uint32_t extend_append_digest(std::uint32_t digest, std::string_view payload,
                                   bool has_envelope) {
  // An envelope is digested by its identity only (topic, keys, user bytes): the leader stamps the
  // timestamp and the topic offset, which a retry cannot know.
  const std::string_view digested = has_envelope ? derived::envelope_identity(payload) : payload;
  std::array<unsigned char, 8> length{};
  std::uint64_t size = digested.size();
  if (has_envelope) size |= std::uint64_t{1} << 63;
  for (unsigned char& byte : length) {
    byte = static_cast<unsigned char>(size & 0xFFU);
    size >>= 8;
  }
  digest = util::crc32c::extend(digest, length.data(), length.size());
  return util::crc32c::extend(digest, digested.data(), digested.size());
}

std::uint32_t append_digest(std::span<const std::string> payloads, bool has_envelope) {
  std::uint32_t digest = 0;
  for (const std::string& payload : payloads) {
    digest = extend_append_digest(digest, payload, has_envelope);
  }
  return digest;
}

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
  // At its bound the least recent client makes room for the new one. Above it (an install kept a
  // continued transfer's union of two leaders' clients: replace) one more goes each time, so the
  // table comes back to its bound one client per new client: the first new client does not forget
  // the whole excess at once (thousands of clients whose retries the install kept them for, and
  // as many erasures in one call on the loop; review H1).
  for (int evict = 0; evict < 2 && !lru_.empty() && clients_.size() >= max_clients_; ++evict) {
    clients_.erase(lru_.back().client_id);
    lru_.pop_back();
  }
  lru_.push_front(Client{client_id, {}, 0});
  clients_.emplace(client_id, lru_.begin());
  return lru_.front();
}

void DedupTable::remember(Client& client, const Remembered& append) {
  client.recent.push_back(append);
  if (client.recent.size() > sequences_per_client_) {
    // Evict the lowest sequence remembered (appends of one client may land out of sequence order
    // when the client pipelines), and refuse anything at or below it from now on.
    auto lowest = std::min_element(
        client.recent.begin(), client.recent.end(),
        [](const Remembered& a, const Remembered& b) { return a.sequence < b.sequence; });
    client.forgotten_below = std::max(client.forgotten_below, lowest->sequence + 1);
    client.recent.erase(lowest);
  }
}

void DedupTable::record_entry(std::uint64_t client_id, std::uint64_t sequence, std::uint64_t index,
                              std::uint64_t term, std::string_view payload, bool has_envelope) {
  if (client_id == 0) return;
  Client& client = touch(client_id);
  for (const Remembered& r : client.recent) {
    if (r.sequence == sequence && r.range.term == term && r.range.first <= index &&
        index <= r.range.last) {
      return;  // a term has one leader: the same append, already remembered whole
    }
  }
  if (!client.recent.empty()) {
    Remembered& newest = client.recent.back();
    if (newest.sequence == sequence && newest.range.last + 1 == index &&
        newest.range.term == term) {
      newest.range.last = index;  // the next entry of the same append
      newest.digest = extend_append_digest(newest.digest, payload, has_envelope);
      return;
    }
  }
  remember(client,
           Remembered{sequence, Range{index, index, term},
                      extend_append_digest(0, payload, has_envelope)});
}

void DedupTable::record_append(std::uint64_t client_id, std::uint64_t sequence, const Range& range,
                               std::uint32_t digest) {
  if (client_id == 0) return;
  remember(touch(client_id), Remembered{sequence, range, digest});
}

DedupTable::Lookup DedupTable::find(std::uint64_t client_id, std::uint64_t sequence,
                                    std::span<const std::string> payloads, Range* range,
                                    bool has_envelope) {
  auto it = clients_.find(client_id);
  if (it == clients_.end()) return Lookup::kUnknown;
  Client& client = touch(client_id);
  // Newest first: a sequence recorded twice (after a truncation re-proposal) answers with the latest.
  for (auto r = client.recent.rbegin(); r != client.recent.rend(); ++r) {
    if (r->sequence != sequence) continue;
    *range = r->range;
    const std::uint64_t count = r->range.last - r->range.first + 1;
    if (count == payloads.size() && r->digest == append_digest(payloads, has_envelope)) return Lookup::kFound;
    // The remembered range may lack the first entries of its append: it cannot prove a reuse.
    if (view_start_ > 1 && r->range.first == view_start_) return Lookup::kTooOld;
    for (std::uint64_t sender_view_start : sender_view_starts_) {
      if (sender_view_start > 1 && r->range.first == sender_view_start) return Lookup::kTooOld;
    }
    return Lookup::kReused;
  }
  if (sequence < client.forgotten_below) return Lookup::kTooOld;
  return Lookup::kUnknown;
}

void DedupTable::truncate_from(std::uint64_t from_index) {
  // Truncations are rare (a leader change with an uncommitted tail), so a full pass is acceptable.
  for (Client& client : lru_) {
    std::erase_if(client.recent, [&](const Remembered& r) { return r.range.last >= from_index; });
  }
  // Entries recorded at or above the cut from now on are seen from their first one.
  if (view_start_ >= from_index) view_start_ = 0;
  std::erase_if(sender_view_starts_, [&](std::uint64_t start) { return start >= from_index; });
}

bool DedupTable::export_through(const Client& client, std::uint64_t through,
                                std::uint64_t committed, ClientState* out) {
  out->client_id = client.client_id;
  out->forgotten_below = client.forgotten_below;
  out->appends.clear();
  for (const Remembered& r : client.recent) {
    if (r.range.first <= through && r.range.last <= std::max(through, committed)) {
      out->appends.push_back({r.sequence, r.range, r.digest});
    }
  }
  return !out->appends.empty() || out->forgotten_below != 0;
}

void DedupTable::for_each_client_through(
    std::uint64_t through, std::uint64_t committed,
    const std::function<bool(const ClientState&)>& visit) const {
  ++walks_;
  ClientState state;
  for (const Client& client : lru_) {
    if (!export_through(client, through, committed, &state)) continue;
    if (!visit(state)) return;
  }
}

std::vector<std::uint64_t> DedupTable::client_ids() const {
  ++walks_;
  std::vector<std::uint64_t> ids;
  ids.reserve(clients_.size());
  for (const Client& client : lru_) ids.push_back(client.client_id);
  return ids;
}

bool DedupTable::client_through(std::uint64_t client_id, std::uint64_t through,
                                std::uint64_t committed, ClientState* out) const {
  const auto found = clients_.find(client_id);
  return found != clients_.end() && export_through(*found->second, through, committed, out);
}

void DedupTable::replace(std::uint64_t log_start, std::uint64_t sender_view_start,
                         const std::vector<ClientState>& clients,
                         const std::vector<std::uint64_t>& other_sender_view_starts) {
  lru_.clear();
  clients_.clear();
  // Recency from the facts (the newest range's end), least recent first, so that each touch()
  // leaves the most recent at the front and the eviction beyond max_clients_ drops the least.
  const auto newest_end = [](const ClientState& client) {
    std::uint64_t last = 0;
    for (const RememberedAppend& append : client.appends) last = std::max(last, append.range.last);
    return last;
  };
  std::vector<std::pair<std::uint64_t, const ClientState*>> order;
  order.reserve(clients.size());
  for (const ClientState& client : clients) order.emplace_back(newest_end(client), &client);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second->client_id > b.second->client_id;
  });
  // The whole snapshot is taken, above max_clients_ if it holds more (bounded by the data's 64 MiB):
  // a continued transfer holds one leader's clients <= X and another's > X, each within its own
  // bound but not their union, and evicting here would forget a client its sender would have
  // answered from (a retry appended twice). New clients bring the table back to its bound (touch).
  const std::size_t bound = max_clients_;
  max_clients_ = std::max(max_clients_, clients.size());
  for (const auto& [newest, state] : order) {
    if (state->client_id == 0) continue;
    Client& client = touch(state->client_id);
    client.forgotten_below = std::max(client.forgotten_below, state->forgotten_below);
    for (const RememberedAppend& append : state->appends) {
      remember(client, Remembered{append.sequence, append.range, append.digest});
    }
  }
  max_clients_ = bound;
  view_start_ = log_start;
  sender_view_starts_.assign(1, sender_view_start);
  sender_view_starts_.insert(sender_view_starts_.end(), other_sender_view_starts.begin(),
                             other_sender_view_starts.end());
}

}  // namespace raftlog::replica

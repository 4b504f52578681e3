#include "server/snapshot_chunks.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "util/crc32c.h"

namespace raftlog::server {

namespace {

SnapshotIdentity identity_of(const raft::Message& message, const SnapshotChunkPlace& place) {
  return SnapshotIdentity{message.snapshot->index, message.snapshot->term, place.total_bytes,
                          place.data_crc32c, place.data_digest};
}

// The same snapshot point: what a continuation may be spliced onto.
bool same_point(const raft::Message& partial, const raft::Message& chunk) {
  return partial.snapshot->index == chunk.snapshot->index &&
         partial.snapshot->term == chunk.snapshot->term && partial.snapshot->conf == chunk.snapshot->conf;
}

}  // namespace

std::string SnapshotReassembler::mismatch(const Partial& partial, const SnapshotChunk& chunk) {
  const raft::Snapshot& have = *partial.message.snapshot;
  const raft::Snapshot& got = *chunk.message.snapshot;
  if (got.index != have.index || got.term != have.term) {
    return "snapshot " + std::to_string(got.index) + "/t" + std::to_string(got.term) +
           ", the partial one is " + std::to_string(have.index) + "/t" + std::to_string(have.term);
  }
  if (chunk.place.total_bytes != partial.place.total_bytes ||
      chunk.place.data_crc32c != partial.place.data_crc32c) {
    return "a different total size or checksum than the partial snapshot's";
  }
  // The same size and whole CRC but another digest: another encoding of the same layout, whose
  // bytes must not continue these (or one side from before digests, which proves nothing).
  if (chunk.place.data_digest != partial.place.data_digest) {
    return "a different data digest than the partial snapshot's (another encoding)";
  }
  if (!(got.conf == have.conf)) return "a different configuration than the partial snapshot's";
  return {};
}

std::string SnapshotReassembler::other_encoding(const Partial& partial,
                                                const SnapshotChunk& chunk) {
  // A stale chunk of the sender's (a lower term) is continue_partial's to refuse, the partial kept.
  if (chunk.message.term < partial.message.term) return {};
  // Without a digest (a sender from before digests) the identity does not tell two encodings of
  // one layout apart (review resume5 M1): a later term's chunk may be of data the sender encoded
  // again after it led anew, so it starts a new transfer.
  if (!chunk.place.data_digest && chunk.message.term > partial.message.term) {
    return "a chunk without a digest at a later term than the partial's (it may be encoded anew)";
  }
  // Bytes it repeats must be the held ones (a sender that started again at 0, or resumed from an
  // older receipt): at most one chunk compared, only on that path.
  const std::uint64_t held = partial.data.size();
  if (chunk.place.offset < held) {
    const std::size_t overlap = static_cast<std::size_t>(
        std::min<std::uint64_t>(held - chunk.place.offset, chunk.data.size()));
    const auto at = static_cast<std::size_t>(chunk.place.offset);
    if (std::string_view(chunk.data).substr(0, overlap) !=
        std::string_view(partial.data).substr(at, overlap)) {
      return "bytes that differ from the partial's at offset " + std::to_string(chunk.place.offset);
    }
  }
  return {};
}

void SnapshotReassembler::drop_or_continue_lower_terms(const SnapshotChunk& chunk) {
  const raft::NodeId from = chunk.message.from;
  std::optional<Partial> continued;
  for (auto it = partials_.begin(); it != partials_.end();) {
    if (it->first == from || it->second.message.term >= chunk.message.term) {
      ++it;
      continue;
    }
    // A deposed leader's partial: the new sender continues it only when it sends the same data
    // (its digest says so: without one, the old and the new sender's encodings may be two of one
    // layout), or a continuation of the same point (splice_partial checks it), and holds no
    // partial of its own here.
    if (!continued && !partials_.contains(from) &&
        ((mismatch(it->second, chunk).empty() && chunk.place.data_digest) ||
         (chunk.splice && same_point(it->second.message, chunk.message)))) {
      continued = std::move(it->second);
      ++counters_.partials_continued;
    } else {
      ++counters_.partials_replaced;
    }
    it = partials_.erase(it);
  }
  if (continued) partials_.emplace(from, std::move(*continued));
}

std::optional<raft::Message> SnapshotReassembler::add(SnapshotChunk chunk, Clock::time_point now,
                                                      std::string* problem) {
  problem->clear();
  ++counters_.chunks_received;
  expire(now);
  const raft::NodeId from = chunk.message.from;
  const raft::Term term = chunk.message.term;

  // More than this node's replica decodes: refused before a byte of it is kept.
  if (chunk.place.total_bytes > max_total_bytes_) {
    ++counters_.chunks_refused;
    partials_.erase(from);
    *problem = "a snapshot chunk from node " + std::to_string(from) + " announces " +
               std::to_string(chunk.place.total_bytes) + " bytes, more than the " +
               std::to_string(max_total_bytes_) + " this node accepts";
    return std::nullopt;
  }

  // A leader of a higher term was heard: this chunk is a deposed leader's, even when nothing of
  // the new leader's snapshot is held here (it may send none, or have sent it whole). Its partial
  // stays: the new leader may continue it (identical data, or a continuation after its splice
  // point), and a deposed leader that is still alive keeps sending the chunks it had queued.
  if (term < leader_term_) {
    ++counters_.chunks_refused;
    *problem = "a snapshot chunk from node " + std::to_string(from) + " at term " +
               std::to_string(term) + " is stale: term " + std::to_string(leader_term_) +
               " was heard or reached";
    return std::nullopt;
  }
  // Another peer's partial of a higher term: this chunk is a deposed leader's.
  for (const auto& [peer, partial] : partials_) {
    if (peer != from && partial.message.term > term) {
      ++counters_.chunks_refused;  // its partial stays, as above
      *problem = "a snapshot chunk from node " + std::to_string(from) + " at term " +
                 std::to_string(term) + " is stale: node " + std::to_string(peer) +
                 " sends one at term " + std::to_string(partial.message.term);
      return std::nullopt;
    }
  }
  drop_or_continue_lower_terms(chunk);

  const auto found = partials_.find(from);
  std::string wrong = found == partials_.end() ? "no snapshot in progress from this node"
                                               : mismatch(found->second, chunk);
  if (wrong.empty()) wrong = other_encoding(found->second, chunk);
  if (wrong.empty()) return continue_partial(found->second, std::move(chunk), now, problem);
  if (chunk.splice && found != partials_.end()) {
    return splice_partial(found, std::move(chunk), now, problem);
  }
  if (chunk.place.offset != 0) {
    ++counters_.chunks_refused;
    if (found != partials_.end()) partials_.erase(found);
    *problem = "snapshot chunk from node " + std::to_string(from) + " at offset " +
               std::to_string(chunk.place.offset) + " refused: " + wrong;
    return std::nullopt;
  }
  // Offset 0 of another snapshot: a new transfer.
  if (found != partials_.end()) {
    ++counters_.partials_replaced;
    partials_.erase(found);
  }
  Partial& partial = partials_[from];
  partial.message = std::move(chunk.message);
  partial.message.snapshot->data = raft::Payload();
  partial.place = chunk.place;
  partial.data = std::move(chunk.data);
  partial.last_chunk_at = now;
  partial.generation = next_generation_++;
  partial.frames.advance(partial.data);
  if (partial.data.size() < partial.place.total_bytes) return std::nullopt;
  return complete(from, now, problem);
}

std::optional<raft::Message> SnapshotReassembler::continue_partial(Partial& partial,
                                                                   SnapshotChunk chunk,
                                                                   Clock::time_point now,
                                                                   std::string* problem) {
  const raft::NodeId from = chunk.message.from;
  if (chunk.message.term < partial.message.term) {
    // The same sender at an older term (a chunk that waited on an old stream): the partial stays.
    ++counters_.chunks_refused;
    *problem = "snapshot chunk from node " + std::to_string(from) + " at term " +
               std::to_string(chunk.message.term) + " is older than its partial's term " +
               std::to_string(partial.message.term);
    return std::nullopt;
  }
  const std::uint64_t held = partial.data.size();
  if (chunk.place.offset > held) {
    // A gap: the partial stays, and the receipt tells the sender where to resume. Its sender is
    // alive and sends this data (a lane that did not see the loss sends the rest first, which on a
    // slow link takes longer than the idle timeout): the partial is not idle.
    partial.last_chunk_at = now;
    partial.idle_clock_started = true;
    ++counters_.chunks_refused;
    *problem = "snapshot chunk from node " + std::to_string(from) + " at offset " +
               std::to_string(chunk.place.offset) + " refused: " + std::to_string(held) +
               " bytes held, the partial is kept";
    return std::nullopt;
  }
  partial.last_chunk_at = now;
  partial.idle_clock_started = true;
  const std::uint64_t end = chunk.place.offset + chunk.data.size();  // <= total (codec)
  // The latest sender's header (its term, commit): the whole message goes to the core from it, and
  // a deposed leader's chunks are stale against it.
  partial.message = std::move(chunk.message);
  partial.message.snapshot->data = raft::Payload();
  if (end <= held) {
    ++counters_.chunks_duplicate;
    return std::nullopt;
  }
  partial.data.append(chunk.data, static_cast<std::size_t>(held - chunk.place.offset),
                      std::string::npos);
  partial.frames.advance(partial.data);
  if (partial.data.size() < partial.place.total_bytes) return std::nullopt;
  return complete(from, now, problem);
}

std::optional<raft::Message> SnapshotReassembler::splice_partial(
    std::map<raft::NodeId, Partial>::iterator found, SnapshotChunk chunk, Clock::time_point now,
    std::string* problem) {
  Partial& partial = found->second;
  const replica::FramedSplicePoint& point = *chunk.splice;
  // A chunk of a lower term, or not the continuation's first (that one was lost): refused, the
  // partial kept (its bytes through the point are still good; the next receipt names it again).
  if (chunk.message.term < partial.message.term || chunk.place.offset != point.kept_bytes) {
    ++counters_.chunks_refused;
    *problem = "snapshot continuation chunk from node " + std::to_string(chunk.message.from) +
               " at offset " + std::to_string(chunk.place.offset) + " (term " +
               std::to_string(chunk.message.term) +
               ") refused: a lower term than the partial's, or it does not start at the point (" +
               std::to_string(point.kept_bytes) + "); the partial is kept";
    return std::nullopt;
  }
  std::string wrong;
  if (!same_point(partial.message, chunk.message)) {
    wrong = "another snapshot point than the partial's";
  } else {
    wrong = replica::check_splice_point(partial.data, point);
  }
  if (!wrong.empty()) {
    ++counters_.chunks_refused;
    ++counters_.splices_refused;
    *problem = "snapshot continuation from node " + std::to_string(chunk.message.from) +
               " after byte " + std::to_string(point.kept_bytes) + " (client " +
               std::to_string(point.last_client_id) + ") refused: " + wrong +
               "; the partial is dropped";
    partials_.erase(found);
    return std::nullopt;
  }
  // The bytes through the point stay (each frame checked against its CRC by the walk, their
  // CRC-32C the point's, which the continuation's whole-data CRC extends); the rest is replaced.
  partial.data.resize(static_cast<std::size_t>(point.kept_bytes));
  partial.place = SnapshotChunkPlace{0, chunk.place.total_bytes, chunk.place.data_crc32c,
                                     chunk.place.data_digest};
  partial.frames = replica::FramedFrameWalk();
  partial.frames.advance(partial.data);
  // Another data from here on: the file that keeps it starts again (snapshot_partial_file.h).
  partial.generation = next_generation_++;
  ++counters_.partials_spliced;
  counters_.splice_kept_bytes += point.kept_bytes;
  return continue_partial(partial, std::move(chunk), now, problem);
}

std::optional<raft::Message> SnapshotReassembler::complete(raft::NodeId from, Clock::time_point now,
                                                           std::string* problem) {
  auto node = partials_.extract(from);
  Partial& partial = node.mapped();
  const std::uint32_t crc = util::crc32c::value(partial.data);
  // The digest, when the chunks named one: the bytes are the data the identity said (the frames'
  // CRCs it is made of are checked against their frames by the decoder).
  const bool crc_matches = crc == partial.place.data_crc32c;
  const bool digest_matches =
      !partial.place.data_digest ||
      replica::snapshot_data_digest(partial.data, crc) == *partial.place.data_digest;
  if (!crc_matches || !digest_matches) {
    ++counters_.checksum_mismatches;
    *problem = "snapshot " + std::to_string(partial.message.snapshot->index) + " from node " +
               std::to_string(from) + ": the reassembled " + std::to_string(partial.data.size()) +
               " bytes do not match their " + (crc_matches ? "digest" : "CRC-32C") + "; dropped";
    return std::nullopt;
  }
  raft::Message message = std::move(partial.message);
  message.snapshot->data = raft::Payload(std::move(partial.data));
  record_delivered(message, now);
  return message;
}

void SnapshotReassembler::record_delivered(const raft::Message& snapshot, Clock::time_point now) {
  ++counters_.snapshots_delivered;
  last_delivered_ = SnapshotDelivery{snapshot.from, snapshot.term, snapshot.snapshot->index,
                                     snapshot.snapshot->data.size(), now};
}

void SnapshotReassembler::expire(Clock::time_point now) {
  for (auto it = partials_.begin(); it != partials_.end();) {
    if (it->second.idle_clock_started && now - it->second.last_chunk_at > idle_timeout_) {
      ++counters_.partials_expired;
      it = partials_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t SnapshotReassembler::drop_through(raft::Index index) {
  const std::size_t dropped = std::erase_if(
      partials_, [&](const auto& entry) { return entry.second.message.snapshot->index <= index; });
  counters_.partials_replaced += dropped;
  return dropped;
}

std::optional<SnapshotReceipt> SnapshotReassembler::receipt(Clock::time_point* valid_until) const {
  const Partial* best = nullptr;
  for (const auto& [from, partial] : partials_) {
    if (best == nullptr || partial.message.term > best->message.term ||
        (partial.message.term == best->message.term && partial.data.size() > best->data.size())) {
      best = &partial;
    }
  }
  if (best == nullptr) return std::nullopt;
  if (valid_until != nullptr) {
    *valid_until =
        best->idle_clock_started ? best->last_chunk_at + idle_timeout_ : Clock::time_point::max();
  }
  std::optional<replica::FramedSplicePoint> splice = best->frames.splice_point();
  // A partial whose chunks named no digest (a sender from before digests) names none of its kept
  // frames either: a receipt names both or none (the codec refuses half of it).
  if (splice && !best->place.data_digest) splice->kept_digest.reset();
  return SnapshotReceipt{identity_of(best->message, best->place), best->data.size(), splice};
}

SnapshotReassembler::PartialView SnapshotReassembler::view_of(raft::NodeId from,
                                                               const Partial& partial) {
  return PartialView{from, partial.generation, &partial.message, partial.place, partial.data};
}

std::optional<SnapshotReassembler::PartialView> SnapshotReassembler::partial_of_generation(
    std::uint64_t generation) const {
  for (const auto& [from, partial] : partials_) {
    if (partial.generation == generation) return view_of(from, partial);
  }
  return std::nullopt;
}

std::optional<SnapshotReassembler::PartialView> SnapshotReassembler::partial_from(
    raft::NodeId from) const {
  const auto found = partials_.find(from);
  if (found == partials_.end()) return std::nullopt;
  return view_of(from, found->second);
}

std::string SnapshotReassembler::restore(raft::Message header, SnapshotChunkPlace place,
                                         std::string data, Clock::time_point now) {
  if (header.type != raft::MessageType::kSnapshot || !header.snapshot) return "not a snapshot";
  if (header.from == raft::kNoNode) return "no sender";
  if (place.total_bytes > max_total_bytes_) {
    return "a total of " + std::to_string(place.total_bytes) + " bytes, more than the " +
           std::to_string(max_total_bytes_) + " this node accepts";
  }
  if (data.empty() || data.size() >= place.total_bytes) {
    return std::to_string(data.size()) + " bytes held of " + std::to_string(place.total_bytes);
  }
  if (partials_.contains(header.from)) return "a partial from that sender exists already";
  Partial& partial = partials_[header.from];
  partial.message = std::move(header);
  partial.message.snapshot->data = raft::Payload();
  partial.place = SnapshotChunkPlace{0, place.total_bytes, place.data_crc32c, place.data_digest};
  partial.data = std::move(data);
  partial.last_chunk_at = now;
  partial.idle_clock_started = false;  // start_idle_clocks(): once a leader is heard
  partial.generation = next_generation_++;
  partial.frames.advance(partial.data);
  ++counters_.partials_restored;
  counters_.bytes_restored += partial.data.size();
  return {};
}

bool SnapshotReassembler::start_idle_clocks(Clock::time_point now) {
  bool waited = false;
  for (auto& [from, partial] : partials_) {
    if (partial.idle_clock_started) continue;
    partial.idle_clock_started = true;
    partial.last_chunk_at = now;
    waited = true;
  }
  return waited;
}

SnapshotReceiveStatus SnapshotReassembler::status() const {
  SnapshotReceiveStatus status;
  for (const auto& [from, partial] : partials_) {
    status.partials.push_back(
        SnapshotReceiveProgress{from, partial.message.term, partial.message.snapshot->index,
                                partial.data.size(), partial.place.total_bytes});
  }
  status.last_delivered = last_delivered_;
  status.counters = counters_;
  return status;
}

void SnapshotReceipts::set_own(std::optional<SnapshotReceipt> receipt,
                               std::chrono::steady_clock::time_point valid_until) {
  std::lock_guard lock(mu_);
  own_ = receipt;
  own_valid_until_ = valid_until;
}

std::optional<SnapshotReceipt> SnapshotReceipts::own(
    std::chrono::steady_clock::time_point now) const {
  std::lock_guard lock(mu_);
  if (now >= own_valid_until_) return std::nullopt;
  return own_;
}

void SnapshotReceipts::record(raft::NodeId peer, const std::optional<SnapshotReceipt>& receipt) {
  std::lock_guard lock(mu_);
  if (!receipt) {
    peers_.erase(peer);
    return;
  }
  if (peers_.size() >= kMaxPeersTracked && !peers_.contains(peer)) return;
  peers_[peer] = *receipt;
}

std::optional<SnapshotReceipt> SnapshotReceipts::from_peer(raft::NodeId peer) const {
  std::lock_guard lock(mu_);
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return std::nullopt;
  return found->second;
}

void SnapshotReceipts::record_formats(raft::NodeId peer, std::uint32_t formats) {
  std::lock_guard lock(mu_);
  if (formats_.size() >= kMaxPeersTracked && !formats_.contains(peer)) return;
  formats_[peer] = formats;
}

std::uint32_t SnapshotReceipts::formats_of(raft::NodeId peer) const {
  std::lock_guard lock(mu_);
  const auto found = formats_.find(peer);
  return found == formats_.end() ? 0 : found->second;
}

}  // namespace raftlog::server

#include "derived/derived_indexes.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "derived/envelope.h"

namespace raftlog::derived {

using store::Status;

const char* to_string(OpenMode mode) {
  switch (mode) {
    case OpenMode::kFresh:
      return "fresh";
    case OpenMode::kResumed:
      return "resumed";
    case OpenMode::kRolledBack:
      return "rolled back";
    case OpenMode::kRebuilt:
      return "rebuilt";
  }
  return "unknown";
}

std::uint64_t key_hash(std::string_view key) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (char c : key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

DerivedIndexes::DerivedIndexes(store::Env* env, std::string dir, LogIdentity identity,
                               std::uint64_t records_per_segment)
    : env_(env),
      dir_(std::move(dir)),
      identity_(std::move(identity)),
      records_per_segment_(records_per_segment) {
  keys_ = std::make_unique<RecordLog>(env_, store::join_path(dir_, "keys"), RecordKind::kKey,
                                      records_per_segment_);
  time_ = std::make_unique<RecordLog>(env_, store::join_path(dir_, "time"), RecordKind::kTime,
                                      records_per_segment_);
}

std::unique_ptr<DerivedIndexes> DerivedIndexes::open(store::Env* env, std::string dir,
                                                     LogIdentity identity, const LogView& log,
                                                     OpenReport* report, Status* error,
                                                     std::uint64_t records_per_segment) {
  std::unique_ptr<DerivedIndexes> indexes(
      new DerivedIndexes(env, dir, std::move(identity), records_per_segment));
  *report = OpenReport{};
  if (Status made = env->create_dir(dir); !made.ok()) {
    *error = made;
    return nullptr;
  }
  std::string problem;
  std::optional<Cursor> cursor = read_cursor(env, dir, &problem);
  bool usable = cursor.has_value();
  if (usable && (cursor->cluster_id != indexes->identity_.cluster_id ||
                 cursor->node_id != indexes->identity_.node_id)) {
    problem = "the cursor belongs to another log (cluster " + cursor->cluster_id + ", node " +
              std::to_string(cursor->node_id) + ")";
    usable = false;
  }
  if (usable) usable = indexes->load(*cursor, &problem);
  if (!usable) {
    report->mode = problem == "missing" ? OpenMode::kFresh : OpenMode::kRebuilt;
    report->reason = problem == "missing" ? "no derived indexes yet" : problem;
    if (Status rebuilt = indexes->rebuild(log); !rebuilt.ok()) {
      *error = rebuilt;
      return nullptr;
    }
    report->boundary = indexes->boundary_;
    return indexes;
  }
  report->mode = OpenMode::kResumed;
  // Ahead of the log, or a boundary entry the log now holds with another term: the log's tail was
  // cut under the indexes (a torn tail lost to recovery, or a follower's uncommitted suffix).
  const std::uint64_t last_covered = indexes->boundary_ - 1;
  const bool ahead = last_covered > log.last_index();
  bool term_differs = false;
  if (!ahead && last_covered >= log.first_index() && last_covered >= 1) {
    term_differs = log.term_at(last_covered) != indexes->boundary_term_;
  }
  if (ahead || term_differs) {
    const std::uint64_t before = indexes->boundary_;
    std::uint64_t cut = 0;
    const std::uint64_t resume = indexes->roll_back(log, before);
    for (auto& [topic, queue] : indexes->queues_) {
      const std::uint64_t end = queue->end_number();
      std::uint64_t keep = queue->first_number();
      for (std::uint64_t n = queue->first_number(); n < end; ++n) {
        if (queue->records()[n - queue->first_number()].index < resume) keep = n + 1;
      }
      cut += end - keep;
      if (Status s = queue->truncate_to(keep); !s.ok()) *error = s;
    }
    for (RecordLog* other : {indexes->keys_.get(), indexes->time_.get()}) {
      std::uint64_t keep = other->first_number();
      for (std::uint64_t n = other->first_number(); n < other->end_number(); ++n) {
        if (other->records()[n - other->first_number()].index < resume) keep = n + 1;
      }
      cut += other->end_number() - keep;
      if (Status s = other->truncate_to(keep); !s.ok()) *error = s;
    }
    std::erase_if(indexes->key_map_, [&](const auto& kv) { return kv.second >= resume; });
    // The floor for later timestamps is what the kept records hold (a rebuild from scratch would
    // not know the cut ones either).
    indexes->last_timestamp_ms_ = indexes->kept_timestamp_floor();
    indexes->boundary_ = resume;
    indexes->boundary_term_ = resume > 1 ? log.term_at(resume - 1).value_or(0) : 0;
    report->mode = OpenMode::kRolledBack;
    report->cut_records = cut;
    report->reason = ahead ? "the cursor (" + std::to_string(before) +
                                 ") is ahead of the log's last index " +
                                 std::to_string(log.last_index())
                           : "entry " + std::to_string(last_covered) +
                                 " has another term in the log than the indexes saw";
    if (Status persisted = indexes->persist(); !persisted.ok()) *error = persisted;
  } else if (indexes->boundary_ < log.first_index()) {
    // Retention removed entries the indexes never saw: they cannot be replayed. Dispatch goes on
    // from the log's first index (the next entry of each topic carries its offset: its queue
    // continues there, as on every other node).
    report->reason = "the log was trimmed past the cursor";
    indexes->boundary_ = log.first_index();
    indexes->boundary_term_ = 0;
  }
  report->boundary = indexes->boundary_;
  return indexes;
}

bool DerivedIndexes::load(const Cursor& cursor, std::string* problem) {
  boundary_ = cursor.boundary;
  boundary_term_ = cursor.boundary_term;
  last_timestamp_ms_ = cursor.last_timestamp_ms;
  bool keys_seen = false;
  bool time_seen = false;
  for (const CursorLog& entry : cursor.logs) {
    RecordLog* log = nullptr;
    if (entry.kind == RecordKind::kQueue) {
      if (!topic_problem(entry.name).empty() || queues_.count(entry.name) != 0) {
        *problem = "the cursor names an invalid or repeated topic";
        return false;
      }
      log = &queue_for(entry.name);
    } else if (entry.kind == RecordKind::kKey && !keys_seen) {
      log = keys_.get();
      keys_seen = true;
    } else if (entry.kind == RecordKind::kTime && !time_seen) {
      log = time_.get();
      time_seen = true;
    } else {
      *problem = "the cursor names a record log twice";
      return false;
    }
    if (!log->load(entry.first_number, entry.end_number, problem)) return false;
    if (!log->records().empty() && log->records().back().index >= boundary_) {
      *problem = "a record vouched for by the cursor points past it";
      return false;
    }
  }
  for (const Record& record : keys_->records()) key_map_.emplace(record.value, record.index);
  // Topic directories the cursor does not name hold only records written after it: removed.
  const std::string topics_dir = store::join_path(dir_, "topics");
  if (env_->exists(topics_dir)) {
    auto names = env_->list_dir(topics_dir);
    if (names.ok()) {
      for (const std::string& name : *names) {
        if (queues_.count(name) != 0) continue;
        RecordLog stray(env_, store::join_path(topics_dir, name), RecordKind::kQueue);
        // Best effort: a leftover directory only costs space, and the next rebuild removes it.
        if (stray.clear().ok()) (void)env_->remove_dir(store::join_path(topics_dir, name));
      }
    }
  }
  return true;
}

std::uint64_t DerivedIndexes::kept_timestamp_floor() const {
  std::uint64_t floor = time_->records().empty() ? 0 : time_->records().back().value;
  for (const auto& [topic, queue] : queues_) {
    if (!queue->records().empty()) floor = std::max(floor, queue->records().back().value);
  }
  return floor;
}

Status DerivedIndexes::rebuild(const LogView& log) {
  for (auto& [topic, queue] : queues_) {
    if (Status s = queue->clear(); !s.ok()) return s;
  }
  queues_.clear();
  key_map_.clear();
  seeded_next_.clear();
  const std::string topics_dir = store::join_path(dir_, "topics");
  if (env_->exists(topics_dir)) {
    auto names = env_->list_dir(topics_dir);
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      RecordLog stray(env_, store::join_path(topics_dir, name), RecordKind::kQueue);
      if (Status s = stray.clear(); !s.ok()) return s;
      if (Status s = env_->remove_dir(store::join_path(topics_dir, name)); !s.ok()) return s;
    }
  }
  if (Status s = keys_->clear(); !s.ok()) return s;
  if (Status s = time_->clear(); !s.ok()) return s;
  boundary_ = std::max<std::uint64_t>(log.first_index(), 1);
  boundary_term_ = 0;
  last_timestamp_ms_ = 0;
  seeded_stamp_ms_ = 0;
  unqueued_entries_ = 0;
  return persist();
}

// The highest record (of any index) whose entry the log still holds with the same term proves the
// log unchanged up to it (Raft's log matching): dispatch resumes right after it. Without one, at
// the log's first index.
std::uint64_t DerivedIndexes::roll_back(const LogView& log, std::uint64_t boundary) {
  std::uint64_t proven = 0;
  auto consider = [&](const RecordLog& records) {
    for (auto it = records.records().rbegin(); it != records.records().rend(); ++it) {
      if (it->index <= proven) return;
      if (it->index >= boundary || it->index < log.first_index() || it->index > log.last_index())
        continue;
      if (log.term_at(it->index) == it->term) {
        proven = it->index;
        return;
      }
    }
  };
  for (const auto& [topic, queue] : queues_) consider(*queue);
  consider(*keys_);
  consider(*time_);
  return proven != 0 ? proven + 1 : std::max<std::uint64_t>(log.first_index(), 1);
}

RecordLog& DerivedIndexes::queue_for(const std::string& topic) {
  auto found = queues_.find(topic);
  if (found != queues_.end()) return *found->second;
  auto queue = std::make_unique<RecordLog>(
      env_, store::join_path(store::join_path(dir_, "topics"), topic), RecordKind::kQueue,
      records_per_segment_);
  return *queues_.emplace(topic, std::move(queue)).first->second;
}

std::uint64_t DerivedIndexes::boundary() const { return boundary_.load(); }

void DerivedIndexes::index_entry(const SourceEntry& entry) {
  if (!entry.has_envelope) return;
  DecodedEnvelope envelope;
  if (decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk) {
    ++bad_envelopes_;  // only a forged peer or a bug writes one: nothing to index
    return;
  }
  // Timestamps are monotonic per log by construction; the index does not rely on it.
  const std::uint64_t timestamp = std::max(envelope.timestamp_ms, last_timestamp_ms_);
  if (!envelope.topic.empty()) {
    const std::string topic(envelope.topic);
    if (queues_.count(topic) == 0 && queues_.size() >= kMaxTopics) {
      ++unqueued_entries_;
    } else {
      // The offset is the one the leader wrote into the envelope (version 2), so that every node
      // numbers the topic alike whatever it rebuilt or skipped; a version-1 entry is the next one.
      const bool new_queue = queues_.count(topic) == 0;
      RecordLog& queue = queue_for(topic);
      if (new_queue && !seeded_next_.empty()) {
        // Its numbering as of the log's start (seed_topic_offsets), for a version-1 entry.
        if (auto seeded = seeded_next_.find(topic); seeded != seeded_next_.end()) {
          queue.continue_at(seeded->second);
          seeded_next_.erase(seeded);
        }
      }
      const std::uint64_t offset =
          envelope.has_topic_offset ? envelope.topic_offset : queue.end_number();
      // Not the next record: the first entry of the topic since a rebuild after retention or a
      // skip (the records before it point below the log's first index), or the first version-2
      // entry after version-1 entries this node counted differently from the leader.
      if (offset != queue.end_number()) {
        ++renumbered_entries_;
        queue.continue_at(offset);
      }
      queue.append(Record{entry.index, entry.term, timestamp});
    }
  }
  for (std::string_view key : envelope.keys) {
    const std::uint64_t hash = key_hash(key);
    keys_->append(Record{entry.index, entry.term, hash});
    key_map_.emplace(hash, entry.index);
  }
  // A record when the running max rises: every value a lookup can ask for then has one at the first
  // entry that reached it, and the last record below any index is the running max there
  // (find_by_time).
  if (time_->records().empty() || timestamp > time_->records().back().value) {
    time_->append(Record{entry.index, entry.term, timestamp});
  }
  last_timestamp_ms_ = timestamp;
}

bool DerivedIndexes::apply(const std::vector<SourceEntry>& entries) {
  std::lock_guard writer(write_mu_);
  std::unique_lock lock(mu_);
  if (!entries.empty() && entries.front().index != boundary_) return false;
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].index != entries[i - 1].index + 1) return false;
  }
  for (const SourceEntry& entry : entries) {
    index_entry(entry);
    boundary_ = entry.index + 1;
    boundary_term_ = entry.term;
  }
  return true;
}

void DerivedIndexes::skip_to(std::uint64_t index) {
  std::lock_guard writer(write_mu_);
  std::unique_lock lock(mu_);
  if (index <= boundary_) return;
  boundary_ = index;
  boundary_term_ = 0;  // unknown: open() then checks nothing at this boundary
}

bool DerivedIndexes::seed_topic_offsets(std::uint64_t first_log_index,
                                        const std::vector<TopicNextOffset>& table,
                                        std::uint64_t stamp_before_ms) {
  std::lock_guard writer(write_mu_);
  std::unique_lock lock(mu_);
  if (boundary_ < first_log_index) return false;
  const bool at_start = boundary_ == first_log_index;
  bool moved = false;
  // The running max as of the start: time lookups whose time it reaches answer the start itself
  // (find_by_time), and the entries indexed from the start on carry it as a node that indexed the
  // trimmed entries does, stamps that stepped back included.
  seeded_stamp_ms_ = std::max(seeded_stamp_ms_, stamp_before_ms);
  if (at_start && stamp_before_ms > last_timestamp_ms_) {
    last_timestamp_ms_ = stamp_before_ms;
    moved = true;  // the cursor holds it
  }
  for (const TopicNextOffset& row : table) {
    if (auto queue = queues_.find(row.topic); queue != queues_.end()) {
      if (at_start && queue->second->end_number() != row.next_offset) {
        queue->second->continue_at(row.next_offset);
        moved = true;
      }
    } else if (queues_.size() < kMaxTopics) {
      // An empty queue at the table's offset: the topic is known as it is on a node that indexed
      // its entries before they were trimmed (listed with no retained offset, a read below it is
      // trimmed, a group commit of it is admitted), not unknown here only. Its next entry, of
      // either envelope version, continues at that offset.
      queue_for(row.topic).continue_at(row.next_offset);
      seeded_next_.erase(row.topic);
      moved = true;
    } else if (seeded_next_.size() < kMaxSeededTopics || seeded_next_.count(row.topic) != 0) {
      seeded_next_[row.topic] = row.next_offset;
    }
  }
  return moved;
}

Cursor DerivedIndexes::cursor_locked() const {
  Cursor cursor;
  cursor.node_id = identity_.node_id;
  cursor.cluster_id = identity_.cluster_id;
  cursor.boundary = boundary_;
  cursor.boundary_term = boundary_term_;
  cursor.last_timestamp_ms = last_timestamp_ms_;
  for (const auto& [topic, queue] : queues_) {
    cursor.logs.push_back(
        CursorLog{RecordKind::kQueue, topic, queue->first_number(), queue->end_number()});
  }
  cursor.logs.push_back(
      CursorLog{RecordKind::kKey, "keys", keys_->first_number(), keys_->end_number()});
  cursor.logs.push_back(
      CursorLog{RecordKind::kTime, "time", time_->first_number(), time_->end_number()});
  return cursor;
}

Status DerivedIndexes::persist(const std::function<bool()>& keep_going, bool* finished) {
  std::lock_guard writer(write_mu_);  // queries go on: the steps take mu_ shared where they read
  return persist_locked(keep_going, finished);
}

Status DerivedIndexes::begin_persist() {
  std::lock_guard writer(write_mu_);
  return begin_persist_locked();
}

Status DerivedIndexes::continue_persist(const std::function<bool()>& keep_going, bool* finished) {
  std::lock_guard writer(write_mu_);  // the syncs and the cursor's write read no record
  return continue_persist_locked(keep_going, finished);
}

bool DerivedIndexes::persist_pending() const {
  std::lock_guard writer(write_mu_);
  return persist_pending_;
}

Status DerivedIndexes::fail_for_good(Status error) {
  // Like the store on its first sync error: the bytes a failed write or sync covered may be gone
  // from the page cache (Linux drops dirty pages after a writeback error and a second fdatasync
  // reports success), and write positions already moved past them, so no later step may sync again
  // or write a cursor. The files keep the last cursor; a restart replays the rest from the log.
  broken_ = Status::io("the derived indexes failed for good at a persist error (" +
                       error.to_string() + "); a restart replays them from the last cursor");
  persist_pending_ = false;
  pending_steps_.clear();
  next_step_ = 0;
  pending_writes_.clear();
  next_write_ = 0;
  next_chunk_ = 0;
  return error;
}

Status DerivedIndexes::persist_locked(const std::function<bool()>& keep_going, bool* finished) {
  bool done = false;
  if (finished != nullptr) *finished = false;
  if (persist_pending_) {
    // Begun by begin_persist(): finished first (its cursor is older than what is applied now).
    if (Status s = continue_persist_locked(keep_going, &done); !s.ok() || !done) return s;
  }
  if (Status s = begin_persist_locked(); !s.ok()) return s;
  if (Status s = continue_persist_locked(keep_going, &done); !s.ok() || !done) return s;
  if (finished != nullptr) *finished = true;
  return Status();
}

Status DerivedIndexes::begin_persist_locked() {
  if (!broken_.ok()) return broken_;
  if (persist_pending_) return Status();
  pending_steps_.clear();
  next_step_ = 0;
  pending_writes_.clear();
  next_write_ = 0;
  next_chunk_ = 0;
  pending_new_queue_dir_ = false;
  {
    // Memory only: every record applied so far is encoded for its file (32 bytes each); the files
    // are written by continue_persist, in slices (a begin that wrote them all at once took seconds
    // with thousands of new topics, and nothing was indexed meanwhile, nor did a stop's bound hold).
    std::shared_lock lock(mu_);  // the records are read; queries go on
    auto capture = [&](RecordLog& log) {
      PendingWrite write;
      write.log = &log;
      log.capture_pending(&write.captured);
      if (!write.captured.chunks.empty()) pending_writes_.push_back(std::move(write));
    };
    for (auto& [topic, queue] : queues_) capture(*queue);
    capture(*keys_);
    capture(*time_);
  }
  if (retained_segment_due_locked()) {
    // Retention (retain_from): whole segments below the log's first index go from memory now,
    // every record being captured; this persist's cursor names the new first records, and their
    // files are unlinked once it is durable (continue_persist_locked).
    std::unique_lock lock(mu_);  // records go
    forget_retained_locked();
  }
  pending_cursor_ = cursor_locked();  // the writer's own state: write_mu_ is enough to read it
  persist_pending_ = true;
  return Status();
}

Status DerivedIndexes::write_captured_locked(const std::function<bool()>& keep_going) {
  const std::string topics_dir = store::join_path(dir_, "topics");
  if (next_write_ == 0 && next_chunk_ == 0 && !pending_writes_.empty() &&
      !env_->exists(topics_dir)) {
    // A step of its own (once per data directory): sliced and counted like the others (review of
    // dispatch3, L4).
    if (keep_going && !keep_going()) return Status();
    const auto started = std::chrono::steady_clock::now();
    Status made = env_->create_dir(topics_dir);
    if (made.ok()) made = env_->sync_dir(dir_);
    persist_write_ns_.fetch_add(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - started)
                                       .count()));
    if (!made.ok()) return made;
    persist_syncs_.fetch_add(1);
  }
  // One segment file per step (a new topic's first: its directory and file created, grown and
  // written), so a step is bounded by one file's write whatever a record log captured.
  for (; next_write_ < pending_writes_.size(); ++next_write_, next_chunk_ = 0) {
    PendingWrite& write = pending_writes_[next_write_];
    if (next_chunk_ == 0) write.had_dir = write.log->has_dir();
    for (; next_chunk_ < write.captured.chunks.size(); ++next_chunk_) {
      if (keep_going && !keep_going()) return Status();
      const auto started = std::chrono::steady_clock::now();
      Status wrote = write.log->write_chunk(write.captured.chunks[next_chunk_], &pending_steps_);
      persist_write_ns_.fetch_add(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                               started)
              .count()));
      if (!wrote.ok()) return wrote;
      write.captured.chunks[next_chunk_].bytes = std::string();  // written: its memory goes now
    }
    write.log->finish_chunks(&pending_steps_);
    const bool is_queue = write.log != keys_.get() && write.log != time_.get();
    pending_new_queue_dir_ = pending_new_queue_dir_ || (is_queue && !write.had_dir && write.log->has_dir());
  }
  if (pending_new_queue_dir_) {
    pending_steps_.push_back(SyncStep{nullptr, topics_dir});
    pending_new_queue_dir_ = false;
  }
  return Status();
}

bool DerivedIndexes::retained_segment_due_locked() const {
  for (const auto& [topic, queue] : queues_) {
    if (queue->first_segment_below(retain_from_)) return true;
  }
  return keys_->first_segment_below(retain_from_) ||
         time_->first_segment_below(retain_from_, /*covers_until_next=*/true);
}

void DerivedIndexes::forget_retained_locked() {
  for (auto& [topic, queue] : queues_) queue->forget_below(retain_from_);
  if (keys_->forget_below(retain_from_)) {
    key_map_.clear();
    for (const Record& record : keys_->records()) key_map_.emplace(record.value, record.index);
  }
  time_->forget_below(retain_from_, /*covers_until_next=*/true);
}

Status DerivedIndexes::continue_persist_locked(const std::function<bool()>& keep_going,
                                               bool* finished) {
  *finished = false;
  if (!broken_.ok()) return broken_;
  if (!persist_pending_) return Status();
  // The captured records first, then their syncs. Stopping between two writes or two syncs is
  // safe (persist()'s comment): the cursor is never written then.
  if (next_write_ < pending_writes_.size()) {
    if (Status s = write_captured_locked(keep_going); !s.ok()) return fail_for_good(s);
    if (next_write_ < pending_writes_.size()) return Status();
  }
  std::uint64_t ran = 0;
  const Status synced = run_sync_steps(env_, pending_steps_, &next_step_, keep_going, &ran);
  persist_syncs_.fetch_add(ran);
  if (!synced.ok()) return fail_for_good(synced);
  if (next_step_ < pending_steps_.size()) return Status();
  if (keep_going && !keep_going()) return Status();
  if (Status s = write_cursor(env_, dir_, pending_cursor_); !s.ok()) return fail_for_good(s);
  persist_pending_ = false;
  pending_steps_.clear();
  next_step_ = 0;
  pending_writes_.clear();
  next_write_ = 0;
  next_chunk_ = 0;
  *finished = true;
  // The cursor naming the logs' new first records is durable: the segments its begin forgot (and
  // only those: nothing is forgotten between a begin and its cursor) may go. A crash before this
  // leaves files below the cursor's first records, which load() sweeps.
  for (auto& [topic, queue] : queues_) {
    if (Status s = queue->remove_dropped(); !s.ok()) return fail_for_good(s);
  }
  if (Status s = keys_->remove_dropped(); !s.ok()) return fail_for_good(s);
  if (Status s = time_->remove_dropped(); !s.ok()) return fail_for_good(s);
  return Status();
}

bool DerivedIndexes::retain_from(std::uint64_t first_log_index) {
  std::lock_guard writer(write_mu_);
  retain_from_ = std::max(retain_from_, first_log_index);
  return retained_segment_due_locked();
}

Status DerivedIndexes::trim_below(std::uint64_t first_log_index) {
  if (!retain_from(first_log_index)) {
    std::lock_guard writer(write_mu_);
    return broken_;
  }
  return persist();
}

namespace {

// The first record number of `log` whose entry is at or above `index`.
std::uint64_t first_at_or_above(const RecordLog& log, std::uint64_t index) {
  const auto& records = log.records();
  auto it = std::lower_bound(records.begin(), records.end(), index,
                             [](const Record& r, std::uint64_t i) { return r.index < i; });
  return log.first_number() + static_cast<std::uint64_t>(it - records.begin());
}

}  // namespace

std::vector<TopicInfo> DerivedIndexes::list_topics(std::uint64_t visible,
                                                   std::uint64_t first_log_index) const {
  std::shared_lock lock(mu_);
  std::vector<TopicInfo> out;
  for (const auto& [topic, queue] : queues_) {
    out.push_back(TopicInfo{topic, first_at_or_above(*queue, first_log_index),
                            first_at_or_above(*queue, visible + 1)});
  }
  return out;
}

TopicRead DerivedIndexes::read_topic(const std::string& topic, std::uint64_t from_offset,
                                     std::size_t max, std::uint64_t visible,
                                     std::uint64_t first_log_index) const {
  std::shared_lock lock(mu_);
  TopicRead out;
  auto found = queues_.find(topic);
  if (found == queues_.end()) {
    out.status = TopicReadStatus::kUnknownTopic;
    return out;
  }
  const RecordLog& queue = *found->second;
  out.first_offset = first_at_or_above(queue, first_log_index);
  out.end_offset = first_at_or_above(queue, visible + 1);
  if (from_offset < out.first_offset) {
    out.status = TopicReadStatus::kTrimmed;
    return out;
  }
  for (std::uint64_t n = from_offset; n < out.end_offset && out.records.size() < max; ++n) {
    const Record& record = queue.records()[n - queue.first_number()];
    out.records.push_back(QueueRecord{n, record.index, record.value});
  }
  return out;
}

std::vector<std::uint64_t> DerivedIndexes::lookup_key(std::string_view key, std::size_t max,
                                                      std::uint64_t visible,
                                                      std::uint64_t first_log_index) const {
  std::shared_lock lock(mu_);
  std::vector<std::uint64_t> out;
  auto [begin, end] = key_map_.equal_range(key_hash(key));
  for (auto it = begin; it != end; ++it) {
    if (it->second <= visible && it->second >= first_log_index) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > max) out.resize(max);
  return out;
}

std::uint64_t DerivedIndexes::find_by_time(std::uint64_t timestamp_ms, std::uint64_t visible,
                                           std::uint64_t first_log_index) const {
  std::shared_lock lock(mu_);
  const auto& records = time_->records();
  // Records point at the entries where the running max rose, in log order, their values that max.
  auto it = std::lower_bound(records.begin(), records.end(), timestamp_ms,
                             [](const Record& r, std::uint64_t t) { return r.value < t; });
  // The answer of the untrimmed log, clamped to its start: when the running max as of the start - 1
  // reaches the time, an entry before the start was stamped at or after it, so every retained entry
  // was appended after it, plain ones included (review of dispatch3, M3). That max is the last
  // record below the start on a node that indexed the trimmed entries (the record covering the
  // start stays: forget_below), the seed on one that did not (rebuilt, skipped): the same value
  // when the seed is exact (SNAPSHOT's, docs/storage-format.md). A seed of 0 is no stamp.
  const bool reached_before_start = (it != records.end() && it->index < first_log_index) ||
                                    (seeded_stamp_ms_ != 0 && seeded_stamp_ms_ >= timestamp_ms);
  if (!reached_before_start && it == records.end()) return 0;
  const std::uint64_t answer = reached_before_start ? first_log_index : it->index;
  return answer <= visible ? answer : 0;
}

std::optional<std::uint64_t> DerivedIndexes::find_topic_offset_by_time(
    const std::string& topic, std::uint64_t timestamp_ms, std::uint64_t visible,
    std::uint64_t first_log_index) const {
  std::shared_lock lock(mu_);
  auto found = queues_.find(topic);
  if (found == queues_.end()) return std::nullopt;
  const RecordLog& queue = *found->second;
  const auto& records = queue.records();
  auto it = std::lower_bound(records.begin(), records.end(), timestamp_ms,
                             [](const Record& r, std::uint64_t t) { return r.value < t; });
  const std::uint64_t offset = queue.first_number() + static_cast<std::uint64_t>(it - records.begin());
  // At least the topic's first retained offset (records below it are still in memory until their
  // whole segment goes), at most its visible end.
  const std::uint64_t first_kept = first_at_or_above(queue, first_log_index);
  return std::min(std::max(offset, first_kept), first_at_or_above(queue, visible + 1));
}

std::uint64_t DerivedIndexes::unqueued_entries() const {
  std::shared_lock lock(mu_);
  return unqueued_entries_;
}
std::uint64_t DerivedIndexes::renumbered_entries() const {
  std::shared_lock lock(mu_);
  return renumbered_entries_;
}
std::uint64_t DerivedIndexes::bad_envelopes() const {
  std::shared_lock lock(mu_);
  return bad_envelopes_;
}
std::size_t DerivedIndexes::topic_count() const {
  std::shared_lock lock(mu_);
  return queues_.size();
}

}  // namespace raftlog::derived

#include "server/dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "replica/snapshot_data.h"
#include "util/thread_name.h"

namespace raftlog::server {
namespace {

// The node's recovered log, as DerivedIndexes::open checks it.
class NodeLogView final : public derived::LogView {
 public:
  explicit NodeLogView(const Node& node) : node_(node), bounds_(node.log_bounds()) {}
  std::uint64_t first_index() const override { return bounds_.first; }
  std::uint64_t last_index() const override { return bounds_.last; }
  std::optional<std::uint64_t> term_at(std::uint64_t index) const override {
    return node_.term_at(index);
  }

 private:
  const Node& node_;
  Node::LogBounds bounds_;
};

// The node's file layer (a test's slow or failing one: NodeConfig::store.env), else the disk: the
// indexes, GROUPS and the replica's SNAPSHOT files are all read and written through it.
store::Env* files_env(const NodeConfig& config) {
  return config.store.env != nullptr ? config.store.env : store::Env::posix();
}

}  // namespace

std::unique_ptr<Dispatcher> Dispatcher::open(Node* node, const NodeConfig& config,
                                             std::string* problem) {
  derived::OpenReport report;
  store::Status error;
  NodeLogView log(*node);
  store::Env* env = files_env(config);
  auto indexes = derived::DerivedIndexes::open(
      env, store::join_path(config.data_dir, "derived"),
      derived::LogIdentity{config.cluster_id, config.node_id}, log, &report, &error);
  if (indexes == nullptr) {
    *problem = "derived indexes: " + error.to_string();
    return nullptr;
  }
  spdlog::info("node {}: derived indexes {} at log index {}{}{}", config.node_id,
               derived::to_string(report.mode), report.boundary, report.reason.empty() ? "" : ": ",
               report.reason);
  derived::OpenReport groups_report;
  auto groups = derived::GroupTable::open(env,
                                          store::join_path(config.data_dir, "derived"),
                                          config.data_dir, config.cluster_id, log, &groups_report,
                                          &error);
  if (groups == nullptr) {
    *problem = "consumer group table: " + error.to_string();
    return nullptr;
  }
  // A table rebuilt, rolled back or left incomplete may answer "unknown" for some offsets: warn.
  const bool routine = (groups_report.mode == derived::OpenMode::kResumed &&
                        groups_report.reason.empty()) ||
                       (groups_report.mode == derived::OpenMode::kFresh && groups->complete());
  spdlog::log(routine ? spdlog::level::info : spdlog::level::warn,
              "node {}: consumer group table {} at log index {}{}{}", config.node_id,
              derived::to_string(groups_report.mode), groups_report.boundary,
              groups_report.reason.empty() ? "" : ": ", groups_report.reason);
  node->hold_log_from(groups->persisted_boundary());
  std::unique_ptr<Dispatcher> dispatcher(new Dispatcher(
      node, std::move(indexes), std::move(report), std::move(groups), std::move(groups_report)));
  dispatcher->data_dir_ = config.data_dir;
  dispatcher->env_ = env;
  dispatcher->persist_slice_ms_ = config.derived_persist_slice_ms;
  dispatcher->cluster_id_ = config.cluster_id;
  dispatcher->seed_topics_from_snapshot(node->log_bounds().first);
  // A snapshot installed before a crash, whose group table was not persisted yet: taken again.
  if (!dispatcher->groups_->complete() &&
      dispatcher->adopt_installed_snapshot_groups(node->log_bounds().first)) {
    node->hold_log_from(dispatcher->groups_->persisted_boundary());
  }
  return dispatcher;
}

bool Dispatcher::adopt_installed_snapshot_groups(std::uint64_t first) {
  // SNAPSHOT, or SNAPSHOT.next: the install renames it over SNAPSHOT only after its log reset, so
  // this thread can see the new log's start while the file naming it is still SNAPSHOT.next.
  const std::optional<replica::SnapshotData> found = snapshot_naming_log_start(
      first, {replica::SnapshotFile::kCurrent, replica::SnapshotFile::kNext},
      [&](const replica::SnapshotData& data) {
        return data.origin == replica::SnapshotOrigin::kInstalled && !data.section.empty() &&
               check_snapshot_section(data.section, data.index, cluster_id_).empty();
      });
  if (!found) return false;
  const replica::SnapshotData& data = *found;
  std::string problem;
  std::optional<derived::GroupTableState> state = derived::decode_group_table(data.section, &problem);
  if (!state || state->boundary < groups_->boundary()) return false;
  take_leaders_groups(std::move(*state), "the installed snapshot in SNAPSHOT");
  return true;
}

void Dispatcher::take_leaders_groups(derived::GroupTableState state, std::string_view from) {
  spdlog::info("consumer group table: adopted the leader's, from {}, at log index {} ({} groups)",
               from, state.boundary, state.groups.size());
  groups_->replace(std::move(state));
  groups_as_of_persist_.reset();  // the table it was taken from is gone
  dirty_ = true;
  records_dirty_ = true;
}

void Dispatcher::seed_topics_from_snapshot(std::uint64_t first) {
  if (first <= 1) return;
  // SNAPSHOT.next first: an install (or a trim) renames it over SNAPSHOT after its log's new start,
  // so read in this order one of the two names that start whenever the rename is under way.
  const std::optional<replica::SnapshotData> found = snapshot_naming_log_start(
      first, {replica::SnapshotFile::kNext, replica::SnapshotFile::kCurrent},
      [](const replica::SnapshotData& data) { return data.topics_at_index; });
  if (!found) return;
  std::vector<derived::TopicNextOffset> table;
  table.reserve(found->topics.size());
  for (const auto& row : found->topics) table.push_back({row.topic, row.next_offset});
  // The running max of the stamps as of the same index, when the file carries it (a trim's of
  // version 5, or an installed snapshot's of framed version 6 whose leader knew it; 0, none known,
  // otherwise: docs/storage-format.md, "Snapshot data and SNAPSHOT").
  if (indexes_->seed_topic_offsets(first, table, found->stamp_max_ms)) {
    dirty_ = true;
    records_dirty_ = true;
  }
  spdlog::info(
      "derived indexes: topic numbering and running max stamp ({} ms, 0: none known) as "
      "of log index {} from the snapshot ({} topics)",
      found->stamp_max_ms, found->index, table.size());
}

std::optional<replica::SnapshotData> Dispatcher::snapshot_naming_log_start(
    std::uint64_t first, std::initializer_list<replica::SnapshotFile> files,
    const std::function<bool(const replica::SnapshotData&)>& wanted) const {
  for (const replica::SnapshotFile file : files) {
    auto saved = replica::read_snapshot_file(env_, data_dir_, file);
    if (!saved.ok() || !saved->has_value()) continue;
    if ((*saved)->index + 1 == first && wanted(**saved)) return std::move(**saved);
  }
  return std::nullopt;
}

std::uint64_t Dispatcher::hold_retention_without_table(Node* node, const NodeConfig& config) {
  const std::optional<std::uint64_t> boundary = derived::read_group_table_boundary(
      files_env(config), store::join_path(config.data_dir, "derived"), config.cluster_id);
  const std::uint64_t hold =
      boundary ? *boundary : std::max<std::uint64_t>(node->log_bounds().first, 1);
  node->hold_log_from(hold);
  spdlog::warn("node {}: no consumer group table: retention held at log index {} ({}) until a "
               "restart opens the table again",
               config.node_id, hold,
               boundary ? "derived/GROUPS's boundary"
                        : "the log's first index; derived/GROUPS does not decode");
  return hold;
}

Dispatcher::Dispatcher(Node* node, std::unique_ptr<derived::DerivedIndexes> indexes,
                       derived::OpenReport report, std::unique_ptr<derived::GroupTable> groups,
                       derived::OpenReport groups_report)
    : node_(node),
      indexes_(std::move(indexes)),
      report_(std::move(report)),
      groups_(std::move(groups)),
      groups_report_(std::move(groups_report)) {}

std::uint64_t Dispatcher::next_index() const {
  return std::min(indexes_->boundary(), groups_->boundary());
}

void Dispatcher::set_failure(std::string failure) {
  {
    std::lock_guard lock(failure_mu_);
    failure_ = std::move(failure);
  }
  std::lock_guard lock(applied_mu_);
  applied_cv_.notify_all();
}

bool Dispatcher::wait_groups_applied(std::uint64_t index,
                                     std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(applied_mu_);
  applied_cv_.wait_until(lock, deadline, [&] {
    return groups_->boundary() > index || stop_.load() || !failure().empty();
  });
  return groups_->boundary() > index;
}

bool Dispatcher::wait_indexes_applied(std::uint64_t index,
                                      std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(applied_mu_);
  applied_cv_.wait_until(lock, deadline, [&] {
    return indexes_->boundary() > index || stop_.load() || !failure().empty();
  });
  return indexes_->boundary() > index;
}

Dispatcher::~Dispatcher() { stop(); }

void Dispatcher::start() {
  thread_ = std::thread([this] {
    util::name_this_thread("rl-dispatch");
    run();
  });
}

void Dispatcher::stop() {
  if (!stop_.load()) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(kStopPersistBoundMs);
    stop_persist_deadline_ns_.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
  }
  stop_.store(true);
  {
    std::lock_guard lock(applied_mu_);
    applied_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::uint64_t Dispatcher::lag() const {
  const std::uint64_t indexed = indexes_->boundary() - 1;
  const std::uint64_t commit = node_->commit_index();
  return commit > indexed ? commit - indexed : 0;
}

DispatchStats Dispatcher::stats() const {
  DispatchStats stats;
  stats.persists = persists_.load();
  stats.persist_syncs = indexes_->persist_syncs();
  stats.persist_seconds = static_cast<double>(persist_ns_.load()) / 1e9;
  stats.persist_begin_seconds =
      static_cast<double>(persist_begin_ns_.load() + indexes_->persist_write_ns()) / 1e9;
  stats.apply_seconds = static_cast<double>(apply_ns_.load()) / 1e9;
  stats.last_persist_seconds = static_cast<double>(last_persist_ns_.load()) / 1e9;
  return stats;
}

std::string Dispatcher::failure() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

std::string Dispatcher::snapshot_section(std::uint64_t index) const {
  derived::GroupTableState state = groups_->state();
  if (state.boundary <= index) return {};  // not applied that far yet
  std::string bytes = derived::encode_group_table(state);
  if (bytes.size() > kMaxSnapshotGroupsBytes) {
    spdlog::warn("consumer group table: {} bytes, more than the {} a snapshot carries: a follower "
                 "installing it marks every offset unknown",
                 bytes.size(), kMaxSnapshotGroupsBytes);
    return {};
  }
  return bytes;
}

std::string Dispatcher::check_snapshot_section(std::string_view section, std::uint64_t index,
                                               const std::string& cluster_id) {
  std::string problem;
  const std::optional<derived::GroupTableState> state =
      derived::decode_group_table(std::string(section), &problem);
  if (!state) return "its consumer group table: " + problem;
  if (state->cluster_id != cluster_id) return "its consumer group table is of another cluster";
  if (state->boundary <= index) {
    return "its consumer group table covers the log only up to " +
           std::to_string(state->boundary - 1);
  }
  return "";
}

void Dispatcher::adopt_snapshot_section(const std::string& section) {
  if (section.empty()) return;
  std::string problem;
  std::optional<derived::GroupTableState> state = derived::decode_group_table(section, &problem);
  if (!state) return;  // checked before the install: cannot happen
  std::lock_guard lock(adopt_mu_);
  adopted_groups_ = std::move(state);
}

bool Dispatcher::adopt_pending_groups() {
  std::optional<derived::GroupTableState> state;
  {
    std::lock_guard lock(adopt_mu_);
    state.swap(adopted_groups_);
  }
  if (!state) return false;
  // Taken from SNAPSHOT already (skip_trimmed ran first) and applied past it: nothing to add.
  if (state->boundary < groups_->boundary() && groups_->complete() == state->complete) return false;
  take_leaders_groups(std::move(*state), "the installed snapshot");
  return true;
}

void Dispatcher::run() {
  while (!stop_.load() && failure().empty()) {
    (void)adopt_pending_groups();
    const auto apply_started = std::chrono::steady_clock::now();
    const bool applied = dispatch_batch();
    const auto now = std::chrono::steady_clock::now();
    apply_ns_.fetch_add(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - apply_started).count()));
    // A persist under way: its next slice of syncs, after the batch just applied.
    if (indexes_->persist_pending()) continue_indexes_persist(/*whole=*/false);
    // At most every kPersistIntervalMs: a trickle of appends must not turn into a trickle of
    // fsyncs competing with the log's own on the same disk. (A persist of the indexes begins once
    // the pending one ended; the group table waits for it too: persist().)
    if (now - persisted_at_ >= std::chrono::milliseconds(kPersistIntervalMs) &&
        (indexes_persist_due(now) || groups_persist_due(now))) {
      persist();
    }
    const std::uint64_t first = node_->log_bounds().first;
    if (first > trimmed_below_ && failure().empty()) {
      // Retention moved the log's start. The indexes drop the whole segments below it with their
      // next persist (forgotten at its begin, unlinked once its cursor is durable), which runs in
      // slices like any other: a whole persist here held dispatch for seconds at every trim with
      // many busy topics (review of dispatch, M1). That persist comes at the 200 ms cadence when
      // a segment is due to go or the cursor moved (not the 10 s of a cursor-only one), so a
      // restart rarely finds its cursor below the log's first index (entries "trimmed before
      // they were indexed" are skipped, never lost to a query: they are below the log's start).
      if (indexes_->retain_from(first) || dirty_) {
        dirty_ = true;
        records_dirty_ = true;
      }
      trimmed_below_ = first;
    }
    if (!applied && !indexes_->persist_pending()) {
      // Sleeps until the commit index passes what is applied, or 100 ms (stop, retention, and a
      // persist that is due); shorter while something waits to be persisted.
      const auto wait = records_dirty_ ? std::chrono::milliseconds(kPersistIntervalMs / 4)
                               : std::chrono::milliseconds(100);
      node_->wait_for_commit(next_index() - 1, std::chrono::steady_clock::now() + wait);
    }
  }
  stopping_persist_ = true;
  // stop_ is set: the group table's boundary too. A pending persist is finished, then one more
  // covers what was applied since it began (both within kStopPersistBoundMs).
  if (failure().empty() && indexes_->persist_pending()) continue_indexes_persist(/*whole=*/true);
  if (failure().empty()) persist();
}

bool Dispatcher::persist_may_go_on() const {
  if (!stop_.load()) return true;
  if (!stopping_persist_) return false;  // a periodic persist: the last one follows at once
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  return now < stop_persist_deadline_ns_.load();
}

void Dispatcher::skip_trimmed(std::uint64_t from) {
  // Retention removed entries before they were applied: they cannot be, so dispatch goes on at the
  // first retained index (docs/operations.md, "Topics and keys"). The group table holds retention
  // at its persisted boundary (and a node without a table at the file's boundary, or its log's
  // first index: hold_retention_without_table), so it meets this only after segments were removed
  // by hand, or a GROUPS file was restored older than its log.
  const std::uint64_t first = node_->log_bounds().first;
  // A snapshot install replaced the log: its group table first, if it brought one (handed over, or
  // still only in SNAPSHOT when the install's hand-over has not arrived yet).
  if (!adopt_pending_groups() && groups_->boundary() < first) {
    (void)adopt_installed_snapshot_groups(first);
  }
  spdlog::warn("derived state: entries {}..{} were trimmed by retention before they were "
               "applied; they stay unindexed",
               from, first - 1);
  if (indexes_->boundary() < first) {
    indexes_->skip_to(first);
    seed_topics_from_snapshot(first);
  }
  if (groups_->boundary() < first) {
    spdlog::error("consumer group table: entries {}..{} were trimmed before it applied them: "
                  "every group offset is unknown until committed again",
                  groups_->boundary(), first - 1);
    groups_->skip_to(first);
    groups_as_of_persist_.reset();
  }
  dirty_ = true;
  records_dirty_ = true;
}

bool Dispatcher::read_batch(std::uint64_t from, std::vector<derived::SourceEntry>* batch,
                            bool* skipped) {
  *skipped = false;
  if (from > node_->commit_index()) return false;
  std::vector<raft::Entry> entries;
  const NodeError error = node_->read_committed(from, kBatchEntries, kBatchBytes, &entries);
  if (!error.ok()) {
    if (error.reason == replica::kReasonIndexTrimmed) {
      skip_trimmed(from);
      *skipped = true;
      return false;
    }
    if (error.code != ErrorCode::kUnavailable) set_failure("reading the log: " + error.message);
    return false;
  }
  batch->clear();
  batch->reserve(entries.size());
  for (raft::Entry& entry : entries) {
    // Only an envelope (the indexes) or a group commit (the group table) is ever read: a plain
    // entry's payload is not copied (every node copied each 1 KiB payload here, and again per
    // consumer, on the 64-client append path: docs/benchmarks.md, "Cheaper appends").
    const bool read = entry.has_envelope || entry.is_group_commit;
    batch->push_back(derived::SourceEntry{entry.index, entry.term, entry.has_envelope,
                                          read ? std::string(entry.payload.view()) : std::string(),
                                          entry.is_group_commit});
  }
  return !batch->empty();
}

bool Dispatcher::dispatch_batch() {
  // The group table reads from its own boundary: when the indexes lag (a rebuild), the table and
  // the Groups calls waiting on it are not held back by them. When both are at the same boundary
  // one read feeds both.
  const std::uint64_t groups_from = groups_->boundary();
  const std::uint64_t indexes_from = indexes_->boundary();
  std::vector<derived::SourceEntry> batch;
  bool skipped = false;
  bool applied = false;
  // Each consumer takes the part of `batch` (read from `from`) at and after its own boundary.
  auto from_boundary = [&](std::uint64_t from, std::uint64_t boundary) {
    const auto skip = static_cast<std::ptrdiff_t>(
        std::min<std::uint64_t>(boundary - from, batch.size()));
    return std::vector<derived::SourceEntry>(batch.begin() + skip, batch.end());
  };
  bool envelopes_applied = false;  // the indexes were given an envelope (over-approximated)
  auto any_envelope = [&] {
    return std::any_of(batch.begin(), batch.end(),
                       [](const derived::SourceEntry& entry) { return entry.has_envelope; });
  };
  const std::uint64_t first_read = groups_from;
  if (read_batch(first_read, &batch, &skipped)) {
    const bool feeds_indexes = indexes_from >= first_read;
    envelopes_applied = feeds_indexes && any_envelope();
    if ((feeds_indexes && !indexes_->apply(from_boundary(first_read, indexes_from))) ||
        !groups_->apply(from_boundary(first_read, groups_from))) {
      set_failure("the log handed out entries out of order at " + std::to_string(first_read));
      return false;
    }
    applied = true;
  }
  auto notify = [&] {
    std::lock_guard lock(applied_mu_);
    applied_cv_.notify_all();
  };
  if (skipped) {
    notify();
    return true;  // skip_trimmed set dirty_
  }
  if (!failure().empty()) return false;
  // The indexes lag the group table: their own read, after the table's.
  const std::uint64_t lagging = indexes_->boundary();
  if (lagging < first_read && read_batch(lagging, &batch, &skipped)) {
    envelopes_applied = envelopes_applied || any_envelope();
    if (!indexes_->apply(from_boundary(lagging, lagging))) {
      set_failure("the log handed out entries out of order at " + std::to_string(lagging));
      return false;
    }
    applied = true;
  }
  if (applied || skipped) {
    notify();
    dirty_ = true;
  }
  // Only an envelope adds records (topics, keys, time); plain entries move the cursor alone.
  records_dirty_ = records_dirty_ || envelopes_applied;
  return applied || skipped;
}

bool Dispatcher::groups_persist_due(std::chrono::steady_clock::time_point now) const {
  if (groups_->slots_changed()) return true;
  if (groups_->boundary() == groups_->persisted_boundary()) return false;
  if (stop_.load()) return true;
  // Only the boundary moved: rewriting and fsyncing GROUPS for that every 200 ms would cost a
  // fsync per interval on an idle group table. The retention hold stays at the persisted boundary
  // meanwhile, which is safe (it only trims less).
  return now - groups_persisted_at_ >= std::chrono::milliseconds(kGroupsBoundaryPersistMs) ||
         groups_->boundary() - groups_->persisted_boundary() >= kGroupsHoldLagEntries;
}

bool Dispatcher::indexes_persist_due(std::chrono::steady_clock::time_point now) const {
  if (!dirty_) return false;
  return records_dirty_ || stop_.load() ||
         now - indexes_persisted_at_ >= std::chrono::milliseconds(kCursorOnlyPersistMs);
}

void Dispatcher::persist_indexes(bool whole) {
  if (!indexes_->persist_pending()) {
    if (stopping_persist_ && !persist_may_go_on()) {
      // Past the stop's bound none begins: its writes and syncs could not run anyway (review of
      // dispatch, L1). A begin only captures records in memory; its writes run in the slices.
      spdlog::info("derived indexes: the stop's {} ms bound passed before its last persist began "
                   "({} topic queues): the next start indexes again, from the log, what the "
                   "cursor on disk does not cover (it is up to index {} now)",
                   kStopPersistBoundMs, indexes_->topic_count(), indexes_->boundary() - 1);
      return;
    }
    const auto began = std::chrono::steady_clock::now();
    if (store::Status begun = indexes_->begin_persist(); !begun.ok()) {
      spdlog::error("derived indexes: persisting: {}", begun.to_string());
      set_failure("persisting: " + begun.to_string());
      return;
    }
    const auto begin_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                             began)
            .count());
    persist_ns_.fetch_add(begin_ns);
    persist_begin_ns_.fetch_add(begin_ns);
    // What is applied from here on is the next persist's: dirty again with the next batch.
    dirty_ = false;
    records_dirty_ = false;
    indexes_persist_began_at_ = began;
    // The group table as of this point is persisted once the records its commits can name are.
    groups_as_of_persist_ = groups_->state_for_persist();
  }
  continue_indexes_persist(whole);
}

void Dispatcher::continue_indexes_persist(bool whole) {
  const auto started = std::chrono::steady_clock::now();
  const auto slice_end = started + std::chrono::milliseconds(persist_slice_ms_);
  const bool sliced = !whole && persist_slice_ms_ != 0;
  bool first_step = true;  // a slice always runs one sync, so a persist ends however slow they are
  auto keep_going = [&] {
    if (!persist_may_go_on()) return false;
    if (!sliced || first_step) {
      first_step = false;
      return true;
    }
    return std::chrono::steady_clock::now() < slice_end;
  };
  bool finished = false;
  const store::Status persisted = indexes_->continue_persist(keep_going, &finished);
  const auto ended = std::chrono::steady_clock::now();
  persist_ns_.fetch_add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(ended - started).count()));
  if (!persisted.ok()) {
    spdlog::error("derived indexes: persisting: {}", persisted.to_string());
    set_failure("persisting: " + persisted.to_string());
    return;
  }
  if (!finished) {
    // Only a stop cuts a persist short; the cursor on disk stays where the last one left it.
    if (stopping_persist_ && !persist_may_go_on()) {
      spdlog::info("derived indexes: the last persist before the stop ended at its {} ms bound "
                   "({} topic queues): the next start indexes again, from the log, what "
                   "the cursor on disk does not cover (it is up to index {} now)",
                   kStopPersistBoundMs, indexes_->topic_count(), indexes_->boundary() - 1);
    }
    return;
  }
  persists_.fetch_add(1);
  last_persist_ns_.store(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(ended - indexes_persist_began_at_)
          .count()));
  indexes_persisted_at_ = indexes_persist_began_at_;
  // The group table as of the persist's start: every record its commits can name is durable now.
  if (groups_as_of_persist_ && groups_persist_due(ended)) {
    persist_groups(groups_as_of_persist_->first, groups_as_of_persist_->second, ended);
  }
  groups_as_of_persist_.reset();
}

void Dispatcher::persist() {
  const auto now = std::chrono::steady_clock::now();
  bool indexes_persisted = false;
  if (!indexes_->persist_pending() && indexes_persist_due(now)) {
    // At a stop: whole, within kStopPersistBoundMs (persist_may_go_on); else its first slice. The
    // group table follows when it ends (continue_indexes_persist), as of its start.
    persist_indexes(/*whole=*/stop_.load());
    if (!failure().empty()) return;
    indexes_persisted = true;
  }
  // The table as it stands only when every index record its commits can name is durable: no
  // persist of the indexes under way (the one just begun writes the table as of its start when it
  // ends) and no records applied since the last one began. At a stop too: when the stop cut the
  // indexes' last persist (kStopPersistBoundMs), GROUPS stays as of the last one that finished; a
  // table past the durable records would let retention trim entries the indexes must replay
  // (review of dispatch, L7). Holding retention lower meanwhile is the safe side.
  const bool records_durable = !indexes_->persist_pending() && !records_dirty_;
  if ((stop_.load() || !indexes_persisted) && records_durable && groups_persist_due(now)) {
    auto [state, change_count] = groups_->state_for_persist();
    persist_groups(state, change_count, now);
  }
  persisted_at_ = now;
}

void Dispatcher::persist_groups(const derived::GroupTableState& state, std::uint64_t change_count,
                                std::chrono::steady_clock::time_point now) {
  if (store::Status persisted = groups_->persist_state(state, change_count); !persisted.ok()) {
    spdlog::error("consumer group table: persisting: {}", persisted.to_string());
    set_failure("persisting the group table: " + persisted.to_string());
    return;
  }
  groups_persisted_at_ = now;
  node_->hold_log_from(groups_->persisted_boundary());
}

}  // namespace raftlog::server

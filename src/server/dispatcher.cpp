#include "server/dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

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

}  // namespace

std::unique_ptr<Dispatcher> Dispatcher::open(Node* node, const NodeConfig& config,
                                             std::string* problem) {
  derived::OpenReport report;
  store::Status error;
  NodeLogView log(*node);
  auto indexes = derived::DerivedIndexes::open(
      store::Env::posix(), store::join_path(config.data_dir, "derived"),
      derived::LogIdentity{config.cluster_id, config.node_id}, log, &report, &error);
  if (indexes == nullptr) {
    *problem = "derived indexes: " + error.to_string();
    return nullptr;
  }
  spdlog::info("node {}: derived indexes {} at log index {}{}{}", config.node_id,
               derived::to_string(report.mode), report.boundary, report.reason.empty() ? "" : ": ",
               report.reason);
  derived::OpenReport groups_report;
  auto groups = derived::GroupTable::open(store::Env::posix(),
                                          store::join_path(config.data_dir, "derived"),
                                          config.cluster_id, log, &groups_report, &error);
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
  return std::unique_ptr<Dispatcher>(new Dispatcher(node, std::move(indexes), std::move(report),
                                                    std::move(groups), std::move(groups_report)));
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

bool Dispatcher::wait_applied(std::uint64_t index,
                              std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(applied_mu_);
  applied_cv_.wait_until(lock, deadline, [&] {
    return next_index() > index || stop_.load() || !failure().empty();
  });
  return next_index() > index;
}

Dispatcher::~Dispatcher() { stop(); }

void Dispatcher::start() {
  thread_ = std::thread([this] {
    util::name_this_thread("rl-dispatch");
    run();
  });
}

void Dispatcher::stop() {
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

std::string Dispatcher::failure() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

void Dispatcher::run() {
  while (!stop_.load() && failure().empty()) {
    const bool applied = dispatch_batch();
    const auto now = std::chrono::steady_clock::now();
    // At most every kPersistIntervalMs: a trickle of appends must not turn into a trickle of
    // fsyncs competing with the log's own on the same disk.
    if (dirty_ && now - persisted_at_ >= std::chrono::milliseconds(kPersistIntervalMs)) persist();
    const std::uint64_t first = node_->log_bounds().first;
    if (first > trimmed_below_) {
      // trim_below persists the cursor itself before it unlinks (a restart keeps the offsets). A
      // failure there is a storage error like one in persist(): dispatch stops (a restart sweeps
      // the files it left).
      if (store::Status trimmed = indexes_->trim_below(first); !trimmed.ok()) {
        spdlog::error("derived indexes: dropping segments below {}: {}", first, trimmed.to_string());
        set_failure("dropping segments below " + std::to_string(first) + ": " +
                    trimmed.to_string());
      }
      trimmed_below_ = first;
    }
    if (!applied) {
      // Sleeps until the commit index passes what is applied, or 100 ms (stop, retention, and a
      // persist that is due); shorter while something waits to be persisted.
      const auto wait = dirty_ ? std::chrono::milliseconds(kPersistIntervalMs / 4)
                               : std::chrono::milliseconds(100);
      node_->wait_for_commit(next_index() - 1, std::chrono::steady_clock::now() + wait);
    }
  }
  if (dirty_ && failure().empty()) persist();
}

bool Dispatcher::dispatch_batch() {
  const std::uint64_t from = next_index();
  if (from > node_->commit_index()) return false;
  std::vector<raft::Entry> entries;
  const NodeError error = node_->read_committed(from, kBatchEntries, kBatchBytes, &entries);
  if (!error.ok()) {
    if (error.reason == replica::kReasonIndexTrimmed) {
      // Retention removed entries before they were applied: they cannot be, so dispatch goes on
      // at the first retained index (docs/operations.md, "Topics and keys"). The group table holds
      // retention at its persisted boundary, so it meets this only after a trim by hand.
      const std::uint64_t first = node_->log_bounds().first;
      spdlog::warn("derived state: entries {}..{} were trimmed by retention before they were "
                   "applied; they stay unindexed",
                   from, first - 1);
      if (indexes_->boundary() < first) indexes_->skip_to(first);
      if (groups_->boundary() < first) {
        spdlog::error("consumer group table: entries {}..{} were trimmed before it applied them: "
                      "every group offset is unknown until committed again",
                      groups_->boundary(), first - 1);
        groups_->skip_to(first);
      }
      dirty_ = true;
      return true;
    }
    if (error.code != ErrorCode::kUnavailable) set_failure("reading the log: " + error.message);
    return false;
  }
  if (entries.empty()) return false;
  std::vector<derived::SourceEntry> batch;
  batch.reserve(entries.size());
  for (raft::Entry& entry : entries) {
    batch.push_back(derived::SourceEntry{entry.index, entry.term, entry.has_envelope,
                                         std::string(entry.payload.view()),
                                         entry.is_group_commit});
  }
  // Each consumer takes the part of the batch at and after its own boundary.
  auto from_boundary = [&](std::uint64_t boundary) {
    const auto skip = static_cast<std::ptrdiff_t>(
        std::min<std::uint64_t>(boundary - from, batch.size()));
    return std::vector<derived::SourceEntry>(batch.begin() + skip, batch.end());
  };
  if (!indexes_->apply(from_boundary(indexes_->boundary())) ||
      !groups_->apply(from_boundary(groups_->boundary()))) {
    set_failure("the log handed out entries out of order at " + std::to_string(from));
    return false;
  }
  {
    std::lock_guard lock(applied_mu_);
    applied_cv_.notify_all();
  }
  dirty_ = true;
  return true;
}

void Dispatcher::persist() {
  if (store::Status persisted = indexes_->persist(); !persisted.ok()) {
    spdlog::error("derived indexes: persisting: {}", persisted.to_string());
    set_failure("persisting: " + persisted.to_string());
    return;
  }
  if (store::Status persisted = groups_->persist(); !persisted.ok()) {
    spdlog::error("consumer group table: persisting: {}", persisted.to_string());
    set_failure("persisting the group table: " + persisted.to_string());
    return;
  }
  node_->hold_log_from(groups_->persisted_boundary());
  dirty_ = false;
  persisted_at_ = std::chrono::steady_clock::now();
}

}  // namespace raftlog::server

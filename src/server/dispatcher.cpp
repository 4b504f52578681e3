#include "server/dispatcher.h"

#include <spdlog/spdlog.h>

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
  return std::unique_ptr<Dispatcher>(new Dispatcher(node, std::move(indexes), std::move(report)));
}

Dispatcher::Dispatcher(Node* node, std::unique_ptr<derived::DerivedIndexes> indexes,
                       derived::OpenReport report)
    : node_(node), indexes_(std::move(indexes)), report_(std::move(report)) {}

Dispatcher::~Dispatcher() { stop(); }

void Dispatcher::start() {
  thread_ = std::thread([this] {
    util::name_this_thread("rl-dispatch");
    run();
  });
}

void Dispatcher::stop() {
  stop_.store(true);
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
        std::lock_guard lock(failure_mu_);
        failure_ = "dropping segments below " + std::to_string(first) + ": " + trimmed.to_string();
      }
      trimmed_below_ = first;
    }
    if (!applied) {
      // Sleeps until the commit index passes what is indexed, or 100 ms (stop, retention, and a
      // persist that is due); shorter while something waits to be persisted.
      const auto wait = dirty_ ? std::chrono::milliseconds(kPersistIntervalMs / 4)
                               : std::chrono::milliseconds(100);
      node_->wait_for_commit(indexes_->boundary() - 1, std::chrono::steady_clock::now() + wait);
    }
  }
  if (dirty_ && failure().empty()) persist();
}

bool Dispatcher::dispatch_batch() {
  const std::uint64_t from = indexes_->boundary();
  if (from > node_->commit_index()) return false;
  std::vector<raft::Entry> entries;
  const NodeError error = node_->read_committed(from, kBatchEntries, kBatchBytes, &entries);
  if (!error.ok()) {
    if (error.reason == replica::kReasonIndexTrimmed) {
      // Retention removed entries before they were indexed: they cannot be, so dispatch goes on
      // at the first retained index (docs/operations.md, "Topics and keys").
      const std::uint64_t first = node_->log_bounds().first;
      spdlog::warn("derived indexes: entries {}..{} were trimmed by retention before they were "
                   "indexed; they stay unindexed",
                   from, first - 1);
      indexes_->skip_to(first);
      dirty_ = true;
      return true;
    }
    if (error.code != ErrorCode::kUnavailable) {
      std::lock_guard lock(failure_mu_);
      failure_ = "reading the log: " + error.message;
    }
    return false;
  }
  if (entries.empty()) return false;
  std::vector<derived::SourceEntry> batch;
  batch.reserve(entries.size());
  for (raft::Entry& entry : entries) {
    batch.push_back(derived::SourceEntry{entry.index, entry.term, entry.has_envelope,
                                         std::string(entry.payload.view())});
  }
  if (!indexes_->apply(batch)) {
    std::lock_guard lock(failure_mu_);
    failure_ = "the log handed out entries out of order at " + std::to_string(from);
    return false;
  }
  dirty_ = true;
  return true;
}

void Dispatcher::persist() {
  if (store::Status persisted = indexes_->persist(); !persisted.ok()) {
    spdlog::error("derived indexes: persisting: {}", persisted.to_string());
    std::lock_guard lock(failure_mu_);
    failure_ = "persisting: " + persisted.to_string();
    return;
  }
  dirty_ = false;
  persisted_at_ = std::chrono::steady_clock::now();
}

}  // namespace raftlog::server

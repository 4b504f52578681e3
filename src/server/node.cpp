#include "server/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sys/statvfs.h>
#include <thread>
#include <variant>

#include "raft/raft.h"
#include "server/check.h"
#include "server/dedup_table.h"
#include "server/hard_state_file.h"
#include "server/node_identity.h"
#include "server/scrubber.h"
#include "server/storage_fault.h"
#include "server/store_log_reader.h"

namespace raftlog::server {

using Clock = std::chrono::steady_clock;

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kNotLeader: return "NOT_LEADER";
    case ErrorCode::kNoLeader: return "NO_LEADER";
    case ErrorCode::kOutOfRange: return "OUT_OF_RANGE";
    case ErrorCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case ErrorCode::kUnavailable: return "UNAVAILABLE";
    case ErrorCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case ErrorCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case ErrorCode::kInternal: return "INTERNAL";
    case ErrorCode::kDataLoss: return "DATA_LOSS";
  }
  return "UNKNOWN";
}

namespace {

NodeError make_error(ErrorCode code, std::string message, std::string reason = "") {
  NodeError error;
  error.code = code;
  error.message = std::move(message);
  error.reason = std::move(reason);
  return error;
}

// An append that did not (or may not) happen: no indexes to report.
AppendResult failed_append(NodeError error) { return AppendResult{std::move(error), 0, 0, 0, false}; }

// Reason words, as the client library reads them (src/api_errors/error_details.h).
constexpr const char* kReasonEmptyAppend = "EMPTY_APPEND";
constexpr const char* kReasonEntryTooLarge = "ENTRY_TOO_LARGE";
constexpr const char* kReasonTooManyEntries = "TOO_MANY_ENTRIES";
constexpr const char* kReasonBadIndexRange = "BAD_INDEX_RANGE";
constexpr const char* kReasonTooManyPending = "TOO_MANY_PENDING";
constexpr const char* kReasonShuttingDown = "SHUTTING_DOWN";
constexpr const char* kReasonLeadershipLost = "LEADERSHIP_LOST";
constexpr const char* kReasonSequenceTooOld = "SEQUENCE_TOO_OLD";
constexpr const char* kReasonSequenceReused = "SEQUENCE_REUSED";
constexpr const char* kReasonBadSequence = "BAD_SEQUENCE";
constexpr const char* kReasonAppendTooLarge = "APPEND_TOO_LARGE";
constexpr const char* kReasonDiskFull = "DISK_FULL";
constexpr const char* kReasonDiskWatermark = "DISK_WATERMARK";
constexpr const char* kReasonCorruptEntry = "CORRUPT_ENTRY";

// The scrubber's pace: one chunk every interval (NodeConfig::scrub_bytes_per_second sets its size).
constexpr std::uint32_t kScrubIntervalMs = 100;

// An append whose entry was cut or overwritten by a new leader: its outcome is unknown to the client.
AppendResult replaced_entry_error() {
  return failed_append(make_error(ErrorCode::kUnavailable,
                                  "the entry was replaced after a leadership change; retry with the same "
                                  "client_id/sequence",
                                  kReasonLeadershipLost));
}

// Bounds of the node's own queues (docs/configuration.md).
constexpr std::uint64_t kMaxQueuedAppendBytes = 256ULL << 20;  // payload bytes waiting in the input queue
constexpr std::size_t kMaxHeldBatches = 4096;  // Ready batches whose acknowledgements wait for a flush
// How often the leader re-reads the file system's free space before proposing.
constexpr auto kDiskCheckInterval = std::chrono::milliseconds(100);

// --- inputs to the Raft loop ---------------------------------------------------------------------
struct AppendInput {
  std::vector<std::string> payloads;
  std::uint64_t client_id = 0;
  std::uint64_t sequence = 0;
  Node::AppendCallback done;
  Clock::time_point deadline;
};
struct ReadIndexInput {
  Node::ReadIndexCallback done;
  Clock::time_point deadline;
};
struct TransferInput {
  std::uint64_t target = 0;
  Node::TransferCallback done;
};
struct MessageInput {
  raft::Message message;
};
struct FlushedInput {
  std::uint64_t flushed_index = 0;
};
struct TrimInput {
  std::uint64_t before_index = 0;
  Node::TrimCallback done;
};
// A reader or the scrubber found the durable entry at `index` corrupt.
struct CorruptionInput {
  std::uint64_t index = 0;
  std::string message;
};
using Input = std::variant<AppendInput, ReadIndexInput, TransferInput, MessageInput, FlushedInput, TrimInput,
                           CorruptionInput>;

// An append (or a retry of one) waiting for its range to commit.
struct PendingAppend {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::uint64_t term = 0;
  bool duplicate = false;
  Node::AppendCallback done;
  Clock::time_point deadline;
  // For metrics: when it was proposed and how many payload bytes it carries (0 for a duplicate).
  Clock::time_point proposed_at{};
  std::uint64_t payload_bytes = 0;
};

struct PendingRead {
  Node::ReadIndexCallback done;
  Clock::time_point deadline;
};

// Messages that may leave only once the log is durable up to `required_index`, whose entry must still
// have `required_term` then: after a truncation the messages vouch for entries that no longer exist
// and are dropped (Raft retransmits; a lost vote is re-requested).
struct HeldMessages {
  std::uint64_t required_index = 0;
  std::uint64_t required_term = 0;
  std::vector<raft::Message> messages;
};

// Answers an input that will never reach the loop (queue full, node stopped).
void reject(Input& input, const NodeError& error) {
  std::visit(
      [&](auto& in) {
        using T = std::decay_t<decltype(in)>;
        if constexpr (std::is_same_v<T, AppendInput>) {
          in.done(failed_append(error));
        } else if constexpr (std::is_same_v<T, ReadIndexInput>) {
          in.done(ReadIndexResult{error, 0});
        } else if constexpr (std::is_same_v<T, TransferInput>) {
          in.done(TransferResult{error, 0, 0});
        } else if constexpr (std::is_same_v<T, TrimInput>) {
          in.done(TrimResult{error, 0, 0});
        }
      },
      input);
}

}  // namespace

class Node::Impl {
 public:
  Impl(NodeConfig config, MessageSender* sender, NodeEvents* events)
      : config_(std::move(config)),
        sender_(sender),
        events_(events),
        dedup_(config_.dedup_max_clients, config_.dedup_sequences_per_client) {}

  bool open(NodeError* error);
  void start();
  void stop();

  void push(Input input, bool droppable);
  void loop();
  // Ticks the core for the tick period(s) due at `now` and advances *next_tick.
  void tick_due(Clock::time_point now, Clock::time_point* next_tick);

  // Loop-thread handlers.
  void handle_input(Input& input);
  void handle_append(AppendInput& in);
  void handle_read_index(ReadIndexInput& in);
  void handle_transfer(TransferInput& in);
  void report_durability();
  void handle_ready(raft::Ready& ready);
  void deliver_commit(std::uint64_t commit);
  void expire_pending(Clock::time_point now);
  void release_held(std::uint64_t durable_index);
  void fail_pending_appends(ErrorCode code, const std::string& message, const char* reason);
  bool disk_has_room(std::uint64_t append_bytes, NodeError* error);
  bool answer_from_dedup(AppendInput& in);
  void record_dedup(const std::vector<raft::Entry>& entries);
  void publish_status();
  // Retention (loop thread): the highest `before_index` a trim may use now, and the trim itself.
  std::uint64_t trim_limit() const;
  TrimResult trim_before(std::uint64_t before_index, const char* why);
  void apply_retention(Clock::time_point now);
  void report_role_change(const raft::SoftState& before, const raft::SoftState& after);
  void fail_all(ErrorCode code, const std::string& message);
  void fatal(const std::string& what);
  NodeError not_leader_error() const;

  NodeError read_committed(std::uint64_t from_index, std::size_t max_entries, std::size_t max_bytes,
                           std::vector<raft::Entry>* out);
  // Storage faults (storage_fault.h, scrubber.h).
  bool open_store(const store::Options& store_options, NodeError* error);
  bool rebuild_dedup(std::uint64_t* corrupt_index, std::string* problem);
  void assess_recovery(bool same_boot, raft::Config* raft_config);
  ScrubChunk scrub_chunk(std::uint64_t from, std::uint64_t max_bytes);
  // The first index in [from, from + count) whose read fails its check (store_mu_ held shared), or 0.
  std::uint64_t find_corrupt_index(std::uint64_t from, std::uint64_t count) const;
  void report_corruption(std::uint64_t index, std::string message);  // any thread
  void handle_corruption(const CorruptionInput& in);                  // loop thread
  std::uint64_t wait_for_commit(std::uint64_t after_index, Clock::time_point deadline) const;

  NodeConfig config_;
  MessageSender* sender_;
  NodeEvents* events_;  // nullable
  std::unique_ptr<store::CommitLog> log_;
  std::unique_ptr<HardStateFile> hard_state_file_;
  std::unique_ptr<StoreLogReader> reader_;
  std::unique_ptr<raft::Raft> raft_;
  raft::HardState persisted_hard_state_;

  // Loop-thread state.
  DedupTable dedup_;
  std::uint64_t dedup_recorded_through_ = 0;  // highest log index recorded in dedup_
  std::multimap<std::uint64_t, PendingAppend> pending_appends_;  // by last index
  std::map<std::uint64_t, PendingRead> pending_reads_;          // by read request id
  std::multimap<std::uint64_t, PendingRead> reads_awaiting_commit_;  // by read index
  std::uint64_t next_read_id_ = 1;
  std::deque<HeldMessages> held_messages_;
  std::uint64_t reported_durable_ = 0;  // highest index reported to the core via on_persisted
  Clock::time_point disk_checked_at_{};
  std::uint64_t disk_free_bytes_ = 0;
  double disk_used_ratio_ = 0.0;
  std::atomic<bool> disk_watermark_exceeded_{false};  // read by metrics from any thread
  std::optional<TransferInput> pending_transfer_;
  Clock::time_point retention_checked_at_{};
  std::set<std::uint64_t> peers_behind_first_index_;  // warned about once each
  Clock::time_point transfer_deadline_;
  raft::SoftState soft_state_;
  std::string storage_fault_;  // why recovery started this node catching up ("" = it did not)
  std::unique_ptr<Scrubber> scrubber_;
  std::atomic<bool> corruption_reported_{false};  // one CorruptionInput is enough
  std::atomic<std::uint64_t> corrupt_index_{0};

  // Input queue.
  mutable std::mutex input_mu_;
  std::condition_variable input_cv_;
  // True while the Raft loop is blocked (or about to block) on input_cv_: push() notifies only then,
  // so a busy loop costs its producers no futex wake-up per input. Set and read under input_mu_ only
  // (see push() for why that rules out a lost wake-up); atomic so that a data race would be a
  // harmless stale read rather than undefined behaviour if that rule were ever broken.
  std::atomic<bool> loop_sleeping_{false};
  std::deque<Input> inputs_;
  std::uint64_t queued_append_bytes_ = 0;  // payload bytes of AppendInputs in inputs_ (bounded)

  // The store is shared with gRPC threads (reads, flush); close() must not race with them.
  mutable std::shared_mutex store_mu_;
  bool store_closed_ = false;

  // Published state.
  mutable std::mutex status_mu_;
  NodeStatus status_;
  std::atomic<std::uint64_t> commit_{0};
  mutable std::mutex commit_mu_;
  mutable std::condition_variable commit_cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> loop_exit_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::thread loop_thread_;
};

// --- opening ---------------------------------------------------------------------------------------

bool Node::Impl::open(NodeError* error) {
  if (std::string problem = validate(config_); !problem.empty()) {
    *error = make_error(ErrorCode::kInvalidArgument, "bad configuration: " + problem);
    return false;
  }
  std::error_code mkdir_error;
  std::filesystem::create_directories(config_.data_dir, mkdir_error);
  if (mkdir_error) {
    *error = make_error(ErrorCode::kInternal, "cannot create data directory " + config_.data_dir + ": " +
                                                  mkdir_error.message());
    return false;
  }
  // Before anything in the directory is opened: refuse another cluster's or another node's.
  if (std::string problem = establish_data_dir_identity(config_); !problem.empty()) {
    *error = make_error(ErrorCode::kFailedPrecondition, problem);
    return false;
  }
  // Decided before the store's recovery writes anything: did the machine restart since the last open?
  const bool same_boot = same_boot_as_last_open(config_.data_dir, current_boot_id());
  store::Options store_options = config_.store;
  // With peers to repair from, a corrupt durable entry cuts the log there (and the node catches up,
  // below) instead of keeping the node down for good; a single node has no other copy, so it refuses.
  store_options.allow_truncate_corrupted_flushed_data =
      config_.members.size() > 1 && config_.store.flush_mode == store::FlushMode::kSync;
  if (!open_store(store_options, error)) return false;

  auto hard_state_file = HardStateFile::open(config_.data_dir);
  if (!hard_state_file.ok()) {
    *error = make_error(ErrorCode::kInternal,
                        "opening the hard state failed: " + hard_state_file.status().to_string());
    return false;
  }
  hard_state_file_ = std::move(hard_state_file).value();
  persisted_hard_state_ = hard_state_file_->current();
  // Term and vote are persisted before any entry of that term is written, so a log entry of a term
  // above the persisted one means HARDSTATE was lost or replaced: starting would risk a second vote
  // in a term this node already voted in.
  if (log_->last_index() >= log_->first_index()) {
    auto last_term = log_->term_at(log_->last_index());
    if (last_term.ok() && *last_term > persisted_hard_state_.term) {
      *error = make_error(ErrorCode::kInternal,
                          "hard state term " + std::to_string(persisted_hard_state_.term) +
                              " is below the term " + std::to_string(*last_term) + " of log entry " +
                              std::to_string(log_->last_index()) + ": " + config_.data_dir +
                              "/HARDSTATE was lost or replaced; refusing to start (see docs/operations.md)");
      return false;
    }
  }
  if (persisted_hard_state_.term > raft::kMaxTerm) {
    *error = make_error(ErrorCode::kInternal, config_.data_dir + "/HARDSTATE: term " +
                                                  std::to_string(persisted_hard_state_.term) +
                                                  " is above the limit " + std::to_string(raft::kMaxTerm) +
                                                  "; refusing to start (see docs/operations.md)");
    return false;
  }
  // The commit index lives in the store's checkpoint. It may be ahead of what the log recovered (async
  // flush mode can lose a written tail; a storage fault can remove entries, see assess_recovery());
  // Raft re-learns the commit index from the leader.
  persisted_hard_state_.commit = std::min(log_->commit_index(), log_->last_index());

  reader_ = std::make_unique<StoreLogReader>(*log_);
  raft::Config raft_config = raft_config_for(config_);
  raft_config.random_seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                            (config_.node_id * 0x9E3779B97F4A7C15ULL);
  assess_recovery(same_boot, &raft_config);
  if (std::string problem = raft::validate_config(raft_config); !problem.empty()) {
    *error = make_error(ErrorCode::kInvalidArgument, "bad Raft configuration: " + problem);
    return false;
  }
  raft_ = std::make_unique<raft::Raft>(raft_config, *reader_, persisted_hard_state_);
  spdlog::info("node {}: restored term {} vote {} commit {}, log [{}, {}]", config_.node_id,
               persisted_hard_state_.term, persisted_hard_state_.vote, persisted_hard_state_.commit,
               log_->first_index(), log_->last_index());

  const std::uint64_t last = log_->last_index();
  dedup_recorded_through_ = last;  // open_store() rebuilt the dedup table from the log
  reported_durable_ = last;  // recovered entries are durable (recovery flushed them)
  commit_.store(persisted_hard_state_.commit, std::memory_order_release);

  // The flusher's notice only wakes the loop: the loop re-reads flushed_index() itself, because a
  // notice's value may predate a truncation (report_durability()).
  log_->set_flush_listener([this](std::uint64_t flushed) { push(FlushedInput{flushed}, false); });
  if (events_ != nullptr) {
    log_->set_flush_observer([events = events_](const store::CommitLog::FlushCycle& cycle) {
      events->store_flushed(cycle);
    });
  }
  publish_status();
  return true;
}

void Node::Impl::start() {
  assert(!started_);
  started_ = true;
  loop_thread_ = std::thread([this] { loop(); });
  scrubber_ = std::make_unique<Scrubber>(
      config_.scrub_bytes_per_second, kScrubIntervalMs,
      [this](std::uint64_t from, std::uint64_t max_bytes) { return scrub_chunk(from, max_bytes); },
      [this](std::uint64_t index, const std::string& message) { report_corruption(index, message); });
  scrubber_->start();
}

void Node::Impl::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(commit_mu_);  // so a wait_for_commit() cannot miss the wake-up
    stopping_.store(true, std::memory_order_release);
  }
  commit_cv_.notify_all();
  {
    std::lock_guard lock(input_mu_);
    loop_exit_.store(true, std::memory_order_release);
  }
  input_cv_.notify_all();
  if (scrubber_ != nullptr) scrubber_->stop();  // before the store closes under it
  if (loop_thread_.joinable()) {
    loop_thread_.join();
  } else if (raft_ != nullptr) {
    fail_all(ErrorCode::kUnavailable, "node shutting down");  // never started: answer what is queued
  }
  // Inputs pushed between the loop's last drain and loop_exit_ are answered here.
  {
    std::deque<Input> rest;
    {
      std::lock_guard lock(input_mu_);
      rest.swap(inputs_);
    }
    for (Input& input : rest) reject(input, make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown));
  }
  std::unique_lock store_lock(store_mu_);  // no gRPC thread is inside the store while it closes
  if (log_ != nullptr && !store_closed_) {
    store_closed_ = true;
    log_->set_flush_listener(nullptr);
    log_->set_flush_observer(nullptr);
    if (!failed_.load()) {
      // The checkpoint keeps the commit index so that a restart knows what was committed.
      const std::uint64_t commit = std::min(commit_.load(), log_->last_index());
      if (commit > log_->commit_index()) {
        if (auto st = log_->set_commit_index(commit); !st.ok()) {
          spdlog::error("node {}: saving commit index {}: {}", config_.node_id, commit, st.to_string());
        }
      }
    }
    store::Status st = log_->close();
    if (!st.ok()) spdlog::error("node {}: closing the store: {}", config_.node_id, st.to_string());
    spdlog::info("node {}: stopped (commit {}, last {})", config_.node_id, commit_.load(),
                 log_->last_index());
  }
}

// --- the input queue -------------------------------------------------------------------------------

void Node::Impl::push(Input input, bool droppable) {
  {
    std::unique_lock lock(input_mu_);
    if (loop_exit_.load()) {
      lock.unlock();
      reject(input, make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown));
      return;
    }
    // Flush notices are never refused: they are bounded by the flusher's rate and carry durability.
    const bool flushed_notice = std::holds_alternative<FlushedInput>(input);
    std::uint64_t append_bytes = 0;
    if (const auto* append = std::get_if<AppendInput>(&input)) {
      for (const std::string& payload : append->payloads) append_bytes += payload.size();
    }
    if ((inputs_.size() >= config_.max_input_queue && !flushed_notice) ||
        queued_append_bytes_ + append_bytes > kMaxQueuedAppendBytes) {
      lock.unlock();
      // Peer messages are dropped silently (Raft retransmits); client requests are told to back off.
      if (!droppable) {
        reject(input, make_error(ErrorCode::kResourceExhausted, "node input queue full; retry later",
                                 kReasonTooManyPending));
      }
      return;
    }
    queued_append_bytes_ += append_bytes;
    inputs_.push_back(std::move(input));
    // No lost wake-up: the loop sets loop_sleeping_ and checks inputs_ in one critical section
    // under input_mu_, and the wait releases input_mu_ atomically with blocking. This push holds
    // input_mu_, so it happens either before that section (the loop then sees the input and does
    // not wait) or after the loop blocked with the flag set (this push sees the flag and notifies).
    // A loop that is awake drains inputs_ at the top of its next round, so it needs no notify.
    // Clearing the flag here makes the producers that follow skip the notify until the loop waits
    // again; a notify after a timed-out wait, or a spurious wake-up, only costs one extra round.
    if (!loop_sleeping_.load(std::memory_order_relaxed)) return;
    loop_sleeping_.store(false, std::memory_order_relaxed);
  }
  input_cv_.notify_one();
}

void Node::Impl::loop() {
  const auto tick = std::chrono::milliseconds(config_.tick_ms);
  auto next_tick = Clock::now() + tick;
  std::deque<Input> batch;
  while (true) {
    {
      std::unique_lock lock(input_mu_);
      // The flag protocol of push(): set loop_sleeping_ before every wait, in the same critical
      // section as the check of inputs_. Bounded by next_tick: each pass waits at most until then.
      while (inputs_.empty() && !loop_exit_.load() && Clock::now() < next_tick) {
        loop_sleeping_.store(true, std::memory_order_relaxed);
        input_cv_.wait_until(lock, next_tick);
        loop_sleeping_.store(false, std::memory_order_relaxed);
      }
      if (loop_exit_.load()) break;
      batch.swap(inputs_);
      queued_append_bytes_ = 0;
    }
    const auto now = Clock::now();
    if (now >= next_tick) {
      tick_due(now, &next_tick);
      expire_pending(now);
    }
    for (Input& input : batch) {
      handle_input(input);
      if (failed_.load()) break;
    }
    batch.clear();
    // Durability may have advanced (a flush notice, or nothing at all: it is re-read every round).
    report_durability();
    // Bounded: each Ready drains the core's pending output; a new one appears only from new work.
    for (int round = 0; round < 64 && raft_->has_ready() && !failed_.load(); ++round) {
      raft::Ready ready = raft_->ready();
      handle_ready(ready);
      report_durability();
    }
    apply_retention(now);
    publish_status();
    if (failed_.load()) break;
  }
  fail_all(ErrorCode::kUnavailable, failed_.load() ? "node failed; see its log" : "node shutting down");
}

void Node::Impl::tick_due(Clock::time_point now, Clock::time_point* next_tick) {
  const auto tick = std::chrono::milliseconds(config_.tick_ms);
  // Ticks missed while this loop was away (a long round, a machine too busy to run it, a paused
  // process) are not replayed in a burst, with one exception. A follower or candidate gets one tick:
  // the leader's heartbeats that arrived meanwhile wait in the input queue, which this round steps
  // next, and a burst of ticks would fire the election timer first. A leader gets up to
  // heartbeat_ticks of them, so a heartbeat that fell due during the stall leaves in this round
  // rather than heartbeat_ticks rounds later while the followers' timers kept running. A leader still
  // never ticks faster than the clock, so check_quorum waits at least an election timeout.
  std::uint64_t due = 1 + static_cast<std::uint64_t>((now - *next_tick) / tick);
  due = raft_->role() == raft::Role::kLeader ? std::min<std::uint64_t>(due, config_.heartbeat_ticks) : 1;
  for (std::uint64_t i = 0; i < due; ++i) {
    raft_->tick();
    if (raft_->role() != raft::Role::kLeader) break;  // stepped down (check_quorum): no follower burst
  }
  *next_tick += tick * static_cast<std::int64_t>(due);
  if (*next_tick < now) *next_tick = now + tick;
}

void Node::Impl::handle_input(Input& input) {
  std::visit(
      [&](auto& in) {
        using T = std::decay_t<decltype(in)>;
        if constexpr (std::is_same_v<T, AppendInput>) {
          handle_append(in);
        } else if constexpr (std::is_same_v<T, ReadIndexInput>) {
          handle_read_index(in);
        } else if constexpr (std::is_same_v<T, TransferInput>) {
          handle_transfer(in);
        } else if constexpr (std::is_same_v<T, MessageInput>) {
          raft_->step(in.message);
        } else if constexpr (std::is_same_v<T, TrimInput>) {
          in.done(trim_before(in.before_index, "requested"));
        } else if constexpr (std::is_same_v<T, CorruptionInput>) {
          handle_corruption(in);
        } else {
          // A flush notice only wakes the loop; report_durability() reads the store itself.
          static_assert(std::is_same_v<T, FlushedInput>);
        }
      },
      input);
}

NodeError Node::Impl::not_leader_error() const {
  const raft::NodeId leader = raft_->leader();
  if (leader == raft::kNoNode) {
    return make_error(ErrorCode::kNoLeader, "no leader known yet (election in progress); retry shortly");
  }
  NodeError error = make_error(ErrorCode::kNotLeader, "node " + std::to_string(config_.node_id) +
                                                          " is not the leader; the leader is node " +
                                                          std::to_string(leader));
  error.leader_id = leader;
  auto it = config_.members.find(leader);
  if (it != config_.members.end()) {
    error.leader_address = it->second;
    error.message += " at " + it->second;
  }
  return error;
}

// --- appends ---------------------------------------------------------------------------------------

void Node::Impl::handle_append(AppendInput& in) {
  if (in.client_id != 0 && in.sequence == 0) {
    // Sequences start at 1: 0 is what a client that forgot to set one sends (the proto default), and
    // taking it would make every later append of that client a retry of the first.
    in.done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                    "sequence 0 with client_id " + std::to_string(in.client_id) +
                                        ": an idempotent append needs a sequence of at least 1 "
                                        "(client_id 0 appends without deduplication)",
                                    kReasonBadSequence)));
    return;
  }
  if (raft_->role() != raft::Role::kLeader) {
    in.done(failed_append(not_leader_error()));
    return;
  }
  if (pending_appends_.size() >= config_.max_pending_appends) {
    in.done(failed_append(make_error(ErrorCode::kResourceExhausted,
                                    "too many appends waiting for commit on this node (" +
                                        std::to_string(config_.max_pending_appends) + "); retry later",
                                    kReasonTooManyPending)));
    return;
  }
  if (in.client_id != 0 && answer_from_dedup(in)) return;
  std::uint64_t append_bytes = 0;
  for (const std::string& payload : in.payloads) append_bytes += payload.size();
  if (NodeError full; !disk_has_room(append_bytes, &full)) {
    in.done(failed_append(full));
    return;
  }
  // Taken before the payloads move into the proposal; a retry is compared against it (find()).
  const std::uint32_t digest = in.client_id != 0 ? append_digest(in.payloads) : 0;
  std::vector<raft::Entry> entries;
  entries.reserve(in.payloads.size());
  for (std::string& payload : in.payloads) {
    raft::Entry entry;
    entry.type = raft::EntryType::kNormal;
    entry.client_id = in.client_id;
    entry.sequence = in.sequence;
    entry.payload = std::move(payload);
    entries.push_back(std::move(entry));
  }
  const raft::ProposeResult result = raft_->propose(std::move(entries));
  switch (result.status) {
    case raft::ProposeStatus::kOk:
      break;
    case raft::ProposeStatus::kNotLeader:
      in.done(failed_append(not_leader_error()));
      return;
    case raft::ProposeStatus::kTransferring:
      in.done(failed_append(make_error(ErrorCode::kUnavailable,
                                      "leadership transfer in progress; retry on the new leader",
                                      kReasonLeadershipLost)));
      return;
    case raft::ProposeStatus::kTooManyPending:
      in.done(failed_append(make_error(ErrorCode::kResourceExhausted,
                                      "too many uncommitted entries on the leader; retry later", kReasonTooManyPending)));
      return;
    case raft::ProposeStatus::kEmpty:
    case raft::ProposeStatus::kTooLarge:
    case raft::ProposeStatus::kInvalidEntry:
      // Node::append validates against limits the core is configured to accept (open()), so these
      // mean a configuration mismatch; still answered precisely rather than asserted.
      in.done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                      std::string("append refused by Raft: ") + raft::to_string(result.status),
                                      kReasonAppendTooLarge)));
      return;
  }
  // Recorded at once, not when the entries reach the store: a retry arriving in the same input batch
  // must already see this append.
  if (in.client_id != 0) {
    dedup_.record_append(in.client_id, in.sequence,
                         DedupTable::Range{result.first_index, result.last_index, result.term}, digest);
  }
  dedup_recorded_through_ = std::max(dedup_recorded_through_, result.last_index);
  pending_appends_.emplace(result.last_index, PendingAppend{result.first_index, result.last_index,
                                                            result.term, false, std::move(in.done),
                                                            in.deadline, Clock::now(), append_bytes});
  if (events_ != nullptr) events_->append_proposed();
}

// A retry of an append this node's log holds (or one it can no longer judge) is answered from the
// dedup table: true when `in` was answered (or now waits for the original's commit).
bool Node::Impl::answer_from_dedup(AppendInput& in) {
  DedupTable::Range range;
  switch (dedup_.find(in.client_id, in.sequence, in.payloads, &range)) {
    case DedupTable::Lookup::kFound:
      if (range.last <= commit_.load()) {
        in.done(AppendResult{NodeError{}, range.first, range.last, range.term, true});
      } else {
        // The original is in this leader's log and will commit under it: wait for that.
        pending_appends_.emplace(range.last, PendingAppend{range.first, range.last, range.term, true,
                                                           std::move(in.done), in.deadline});
      }
      return true;
    case DedupTable::Lookup::kReused: {
      // Answering with the old range would drop this request's entries without a word.
      const std::uint64_t held = range.last - range.first + 1;
      const std::string difference = held == in.payloads.size()
                                         ? "this request's entries differ"
                                         : "this request has " + std::to_string(in.payloads.size());
      in.done(failed_append(make_error(
          ErrorCode::kFailedPrecondition,
          "sequence " + std::to_string(in.sequence) + " of client " + std::to_string(in.client_id) +
              " already holds other entries (" + std::to_string(held) + " at indexes " +
              std::to_string(range.first) + ".." + std::to_string(range.last) + "; " + difference +
              "): a retry must carry the same entries, new data needs a new sequence",
          kReasonSequenceReused)));
      return true;
    }
    case DedupTable::Lookup::kTooOld:
      in.done(failed_append(make_error(ErrorCode::kFailedPrecondition,
                                      "sequence " + std::to_string(in.sequence) + " of client " +
                                          std::to_string(in.client_id) +
                                          " is older than the deduplication window; it cannot be retried safely",
                                      kReasonSequenceTooOld)));
      return true;
    case DedupTable::Lookup::kUnknown:
      break;
  }
  return false;
}

void Node::Impl::record_dedup(const std::vector<raft::Entry>& entries) {
  for (const raft::Entry& entry : entries) {
    if (entry.index <= dedup_recorded_through_) continue;
    dedup_.record_entry(entry.client_id, entry.sequence, entry.index, entry.term, entry.payload);
    dedup_recorded_through_ = entry.index;
  }
}

// --- reads and transfers ---------------------------------------------------------------------------

void Node::Impl::handle_read_index(ReadIndexInput& in) {
  const std::uint64_t id = next_read_id_++;
  switch (raft_->read_index(id)) {
    case raft::ReadIndexStatus::kOk:
      pending_reads_.emplace(id, PendingRead{std::move(in.done), in.deadline});
      return;
    case raft::ReadIndexStatus::kNotLeader:
      in.done(ReadIndexResult{not_leader_error(), 0});
      return;
    case raft::ReadIndexStatus::kTooManyPending:
      in.done(ReadIndexResult{
          make_error(ErrorCode::kResourceExhausted, "too many linearizable reads pending; retry later", kReasonTooManyPending), 0});
      return;
  }
}

void Node::Impl::handle_transfer(TransferInput& in) {
  if (!config_.members.contains(in.target)) {
    in.done(TransferResult{make_error(ErrorCode::kInvalidArgument, "node " + std::to_string(in.target) +
                                                        " is not a member of the cluster"), 0, 0});
    return;
  }
  switch (raft_->transfer_leadership(in.target)) {
    case raft::TransferStatus::kOk:
      break;
    case raft::TransferStatus::kAlreadyLeader:
      in.done(TransferResult{NodeError{}, config_.node_id, raft_->term()});
      return;
    case raft::TransferStatus::kNotLeader:
      in.done(TransferResult{not_leader_error(), 0, 0});
      return;
    case raft::TransferStatus::kUnknownTarget:
      in.done(TransferResult{make_error(ErrorCode::kInvalidArgument, "unknown transfer target " + std::to_string(in.target)), 0, 0});
      return;
    case raft::TransferStatus::kInProgress:
      in.done(TransferResult{make_error(ErrorCode::kUnavailable, "another leadership transfer is in progress"), 0, 0});
      return;
  }
  if (pending_transfer_) pending_transfer_->done(TransferResult{make_error(ErrorCode::kUnavailable, "superseded"), 0, 0});
  pending_transfer_ = std::move(in);
  // The core aborts a transfer after an election timeout; allow two before reporting failure.
  transfer_deadline_ = Clock::now() + std::chrono::milliseconds(4ULL * config_.election_ticks * config_.tick_ms);
}

// --- durability ------------------------------------------------------------------------------------

// Tells the core how far the log is durable and releases the acknowledgements that waited for it.
// It reads the store's flushed index rather than trusting a flush notice's value: the store lowers
// flushed_index() on truncate_suffix (this thread is its only writer) and a flush cycle excludes a
// truncation, so the current value always describes the current log. In async flush mode an entry
// counts once written to the mapping (docs/durability.md).
void Node::Impl::report_durability() {
  const std::uint64_t last = log_->last_index();
  const bool async = config_.store.flush_mode == store::FlushMode::kAsync;
  const std::uint64_t durable = async ? last : std::min(log_->flushed_index(), last);
  if (durable != reported_durable_) {
    reported_durable_ = durable;
    if (durable > 0) {
      auto term = log_->term_at(durable);
      if (term.ok()) raft_->on_persisted(durable, *term);
    }
  }
  release_held(durable);
}

void Node::Impl::release_held(std::uint64_t durable_index) {
  while (!held_messages_.empty() && held_messages_.front().required_index <= durable_index) {
    HeldMessages& held = held_messages_.front();
    bool still_valid = held.required_index == 0;
    if (!still_valid) {
      auto term = log_->term_at(held.required_index);
      still_valid = term.ok() && *term == held.required_term;
    }
    if (still_valid) {
      for (raft::Message& message : held.messages) sender_->send(std::move(message));
    }
    held_messages_.pop_front();
  }
}

void Node::Impl::handle_ready(raft::Ready& ready) {
  if (ready.soft_state) {
    const raft::SoftState& next = *ready.soft_state;
    if (next.role != soft_state_.role || next.leader != soft_state_.leader) {
      spdlog::info("node {}: term {}: role {} -> {}, leader {}", config_.node_id, next.term,
                   raft::to_string(soft_state_.role), raft::to_string(next.role), next.leader);
    }
    const bool lost_leadership = soft_state_.role == raft::Role::kLeader && next.role != raft::Role::kLeader;
    if (events_ != nullptr) report_role_change(soft_state_, next);
    soft_state_ = next;
    if (lost_leadership) {
      // Their entries may still commit under the new leader, but this node can no longer tell: the
      // clients retry at once (same client_id/sequence) instead of waiting out append_timeout_ms.
      fail_pending_appends(ErrorCode::kUnavailable,
                           "leadership lost while the append was pending; the outcome is unknown: retry "
                           "with the same client_id/sequence",
                           kReasonLeadershipLost);
    }
    if (pending_transfer_ && next.leader == pending_transfer_->target) {
      pending_transfer_->done(TransferResult{NodeError{}, next.leader, next.term});
      pending_transfer_.reset();
    }
  }

  // Term and vote must be durable before any message that depends on them leaves.
  if (ready.hard_state && (ready.hard_state->term != persisted_hard_state_.term ||
                           ready.hard_state->vote != persisted_hard_state_.vote)) {
    if (store::Status st = hard_state_file_->write(*ready.hard_state); !st.ok()) {
      fatal("persisting hard state: " + st.to_string());
      return;
    }
    persisted_hard_state_.term = ready.hard_state->term;
    persisted_hard_state_.vote = ready.hard_state->vote;
  }

  if (ready.truncate_from) {
    const std::uint64_t from = *ready.truncate_from;
    RAFTLOG_CHECK(from > commit_.load(), "Raft asked to truncate committed entries");
    spdlog::warn("node {}: term {}: truncating uncommitted log tail from index {} (last {})",
                 config_.node_id, raft_->term(), from, log_->last_index());
    // force: the check above already guarantees no committed entry is cut; the store's own commit
    // index may be a stale checkpoint value above the recovered log (async mode after a power loss).
    if (store::Status st = log_->truncate_suffix(from, /*force=*/true); !st.ok()) {
      fatal("truncating the log from " + std::to_string(from) + ": " + st.to_string());
      return;
    }
    dedup_.truncate_from(from);
    dedup_recorded_through_ = std::min(dedup_recorded_through_, from - 1);
    reported_durable_ = std::min(reported_durable_, from - 1);
    // Acknowledgements held for the removed suffix vouch for entries that no longer exist.
    std::erase_if(held_messages_, [&](const HeldMessages& held) { return held.required_index >= from; });
    // Appends waiting for indexes that no longer exist learn it now rather than at their deadline.
    for (auto it = pending_appends_.lower_bound(from); it != pending_appends_.end();) {
      it->second.done(replaced_entry_error());
      it = pending_appends_.erase(it);
    }
  }

  // Messages before the entries (Ready's contract allows it: they do not depend on this batch): the
  // heartbeats and a leader's appends of this round leave before its own write of a large batch,
  // which holds this loop for milliseconds, far longer on a loaded machine.
  for (raft::Message& message : ready.messages) sender_->send(std::move(message));

  if (!ready.entries.empty()) {
    std::vector<store::EntryToAppend> batch;
    batch.reserve(ready.entries.size());
    for (const raft::Entry& entry : ready.entries) batch.push_back(to_store_entry(entry));
    auto appended = log_->append_no_wait(batch);
    if (!appended.ok()) {
      // Raft already counts these entries as part of this node's log: continuing would diverge.
      fatal("appending entries " + std::to_string(ready.entries.front().index) + ".." +
            std::to_string(ready.entries.back().index) + ": " + appended.status().to_string());
      return;
    }
    record_dedup(ready.entries);
  }

  // Acknowledgements and votes wait until everything written so far is durable; the caller's
  // report_durability() releases them (at once in async mode).
  if (!ready.messages_after_persist.empty()) {
    const std::uint64_t last = log_->last_index();
    std::uint64_t last_term = 0;
    if (last > 0) {
      auto term = log_->term_at(last);
      if (term.ok()) last_term = *term;
    }
    if (held_messages_.size() >= kMaxHeldBatches) {
      // Only when fsync stalls for long: dropping the oldest is safe (Raft retransmits and re-votes).
      spdlog::warn("node {}: {} acknowledgement batches wait for a flush; dropping the oldest",
                   config_.node_id, held_messages_.size());
      held_messages_.pop_front();
    }
    held_messages_.push_back(HeldMessages{last, last_term, std::move(ready.messages_after_persist)});
  }

  if (ready.commit_index) deliver_commit(*ready.commit_index);

  for (const raft::ReadState& read : ready.read_states) {
    auto it = pending_reads_.find(read.request_id);
    if (it == pending_reads_.end()) continue;  // expired already
    if (read.index <= commit_.load()) {
      it->second.done(ReadIndexResult{NodeError{}, read.index});
    } else {
      reads_awaiting_commit_.emplace(read.index, std::move(it->second));
    }
    pending_reads_.erase(it);
  }
  for (std::uint64_t id : ready.aborted_reads) {
    auto it = pending_reads_.find(id);
    if (it == pending_reads_.end()) continue;
    it->second.done(ReadIndexResult{not_leader_error(), 0});
    pending_reads_.erase(it);
  }
}

void Node::Impl::deliver_commit(std::uint64_t commit) {
  if (commit <= commit_.load()) return;
  {
    std::lock_guard lock(commit_mu_);
    commit_.store(commit, std::memory_order_release);
  }
  commit_cv_.notify_all();
  if (store::Status st = log_->set_commit_index(commit); !st.ok()) {
    spdlog::warn("node {}: recording commit index {}: {}", config_.node_id, commit, st.to_string());
  }
  while (!pending_appends_.empty() && pending_appends_.begin()->first <= commit) {
    PendingAppend& pending = pending_appends_.begin()->second;
    auto term = log_->term_at(pending.last);
    if (term.ok() && *term == pending.term) {
      if (events_ != nullptr && !pending.duplicate) {
        events_->append_committed(pending.last - pending.first + 1, pending.payload_bytes,
                                  Clock::now() - pending.proposed_at);
      }
      pending.done(AppendResult{NodeError{}, pending.first, pending.last, pending.term, pending.duplicate});
    } else {
      pending.done(replaced_entry_error());
    }
    pending_appends_.erase(pending_appends_.begin());
  }
  while (!reads_awaiting_commit_.empty() && reads_awaiting_commit_.begin()->first <= commit) {
    auto first = reads_awaiting_commit_.begin();
    first->second.done(ReadIndexResult{NodeError{}, first->first});
    reads_awaiting_commit_.erase(first);
  }
}

void Node::Impl::expire_pending(Clock::time_point now) {
  // Bounded by the number of pending requests (max_pending_appends / the core's read bound).
  for (auto it = pending_appends_.begin(); it != pending_appends_.end();) {
    if (it->second.deadline <= now) {
      it->second.done(failed_append(make_error(ErrorCode::kDeadlineExceeded,
                                              "not committed within " +
                                                  std::to_string(config_.append_timeout_ms) +
                                                  " ms; the outcome is unknown: retry with the same "
                                                  "client_id/sequence")));
      it = pending_appends_.erase(it);
    } else {
      ++it;
    }
  }
  auto expire_reads = [&](auto& reads) {
    for (auto it = reads.begin(); it != reads.end();) {
      if (it->second.deadline <= now) {
        it->second.done(ReadIndexResult{
            make_error(ErrorCode::kDeadlineExceeded, "leadership could not be confirmed in time"), 0});
        it = reads.erase(it);
      } else {
        ++it;
      }
    }
  };
  expire_reads(pending_reads_);
  expire_reads(reads_awaiting_commit_);
  if (pending_transfer_ && transfer_deadline_ <= now) {
    pending_transfer_->done(
        TransferResult{make_error(ErrorCode::kUnavailable, "leadership transfer did not complete in time"), 0, 0});
    pending_transfer_.reset();
  }
}

void Node::Impl::fail_all(ErrorCode code, const std::string& message) {
  fail_pending_appends(code, message + "; the outcome is unknown: retry with the same client_id/sequence",
                       kReasonShuttingDown);
  for (auto& [id, read] : pending_reads_) read.done(ReadIndexResult{make_error(code, message, kReasonShuttingDown), 0});
  pending_reads_.clear();
  for (auto& [index, read] : reads_awaiting_commit_) read.done(ReadIndexResult{make_error(code, message, kReasonShuttingDown), 0});
  reads_awaiting_commit_.clear();
  if (pending_transfer_) {
    pending_transfer_->done(TransferResult{make_error(code, message, kReasonShuttingDown), 0, 0});
    pending_transfer_.reset();
  }
  // Inputs still queued get the same answer.
  std::deque<Input> rest;
  {
    std::lock_guard lock(input_mu_);
    rest.swap(inputs_);
  }
  for (Input& input : rest) reject(input, make_error(code, message, kReasonShuttingDown));
}

void Node::Impl::fatal(const std::string& what) {
  spdlog::critical("node {}: term {}: cannot continue: {}", config_.node_id, raft_->term(), what);
  failed_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(commit_mu_);
    stopping_.store(true, std::memory_order_release);
  }
  commit_cv_.notify_all();
  std::lock_guard lock(input_mu_);  // from now on push() refuses: nothing can be left unanswered
  loop_exit_.store(true, std::memory_order_release);
}

void Node::Impl::fail_pending_appends(ErrorCode code, const std::string& message, const char* reason) {
  for (auto& [last, pending] : pending_appends_) {
    pending.done(failed_append(make_error(code, message, reason)));
  }
  pending_appends_.clear();
}

// The leader refuses an append the disk could not take, rather than accept it into Raft and then fail
// to write it (which would stop the node): it needs the append plus a whole segment to spare, since a
// roll-over preallocates the next segment in full. Followers cannot refuse what the leader sends; a
// follower whose disk fills stops (docs/operations.md).
//
// Before that hard limit comes the high watermark (config.disk_high_watermark of the file system in
// use): appends are refused with reason DISK_WATERMARK, so that operators get a clear signal, room to
// act (retention, trim, a bigger disk) and reads keep working. Hysteresis: appends resume only once
// use falls to the low watermark, so that a disk hovering at the limit does not flap.
bool Node::Impl::disk_has_room(std::uint64_t append_bytes, NodeError* error) {
  const auto now = Clock::now();
  if (now - disk_checked_at_ >= kDiskCheckInterval) {
    struct statvfs fs {};
    if (::statvfs(config_.data_dir.c_str(), &fs) == 0) {
      disk_free_bytes_ = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
      disk_used_ratio_ =
          fs.f_blocks == 0 ? 0.0 : 1.0 - static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks);
    } else {
      disk_free_bytes_ = UINT64_MAX;  // unknown: let the store decide
      disk_used_ratio_ = 0.0;
    }
    disk_checked_at_ = now;
    const bool exceeded = disk_watermark_exceeded_.load();
    // A high watermark of 1 turns the watermark off (the DISK_FULL check below still applies).
    if (!exceeded && config_.disk_high_watermark < 1.0 && disk_used_ratio_ >= config_.disk_high_watermark) {
      disk_watermark_exceeded_.store(true);
      spdlog::warn("node {}: disk {:.1f}% used in {} (high watermark {:.1f}%): refusing appends until it falls "
                   "to {:.1f}%",
                   config_.node_id, disk_used_ratio_ * 100, config_.data_dir, config_.disk_high_watermark * 100,
                   config_.disk_low_watermark * 100);
    } else if (exceeded && disk_used_ratio_ <= config_.disk_low_watermark) {
      disk_watermark_exceeded_.store(false);
      spdlog::info("node {}: disk {:.1f}% used in {} (low watermark {:.1f}%): accepting appends again",
                   config_.node_id, disk_used_ratio_ * 100, config_.data_dir, config_.disk_low_watermark * 100);
    }
  }
  if (disk_watermark_exceeded_.load()) {
    *error = make_error(ErrorCode::kResourceExhausted,
                        fmt::format("disk {:.1f}% used on the leader ({}), above the high watermark {:.1f}%; "
                                    "appends resume below {:.1f}% (free space or trim the log), reads keep working",
                                    disk_used_ratio_ * 100, config_.data_dir, config_.disk_high_watermark * 100,
                                    config_.disk_low_watermark * 100),
                        kReasonDiskWatermark);
    return false;
  }
  const std::uint64_t needed = append_bytes + config_.store.segment_size_bytes;
  if (disk_free_bytes_ >= needed) return true;
  *error = make_error(ErrorCode::kResourceExhausted,
                      "disk full on the leader: " + std::to_string(disk_free_bytes_) + " bytes free in " +
                          config_.data_dir + ", " + std::to_string(needed) +
                          " needed (the append plus one segment); free space and retry",
                      kReasonDiskFull);
  disk_free_bytes_ = 0;  // keep refusing until the next check
  return false;
}

// --- retention -------------------------------------------------------------------------------------

// Never past the commit index (an uncommitted tail may still be replaced). On the leader, never past
// what a follower still needs, unless the follower has been silent longer than the grace period: it
// could not be caught up anyway once it is that far gone, and keeping the log forever for a dead node
// would fill the disk. Followers know only their own log; see docs/operations.md ("Retention").
std::uint64_t Node::Impl::trim_limit() const {
  std::uint64_t limit = commit_.load() + 1;
  if (raft_->role() != raft::Role::kLeader) return limit;
  for (const raft::PeerProgress& progress : raft_->progress()) {
    if (progress.id == config_.node_id) continue;
    const std::uint64_t silent_ms = progress.ticks_since_contact * config_.tick_ms;
    if (silent_ms >= config_.retention_follower_grace_ms) continue;
    limit = std::min<std::uint64_t>(limit, progress.match_index + 1);
  }
  return limit;
}

TrimResult Node::Impl::trim_before(std::uint64_t before_index, const char* why) {
  const std::uint64_t limit = trim_limit();
  const std::uint64_t target = std::min(before_index, limit);
  const std::uint64_t first_before = log_->first_index();
  const std::uint64_t segments_before = log_->disk_usage().segments;
  if (target > first_before) {
    if (store::Status st = log_->truncate_prefix(target); !st.ok()) {
      spdlog::error("node {}: trimming the log before {}: {}", config_.node_id, target, st.to_string());
      return TrimResult{make_error(ErrorCode::kInternal, "trim failed: " + st.to_string()), first_before, limit};
    }
  }
  const std::uint64_t first_after = log_->first_index();
  const std::uint64_t removed = segments_before - std::min(segments_before, log_->disk_usage().segments);
  if (removed > 0) {
    spdlog::info("node {}: {} trim before {} (allowed up to {}): {} segment(s) deleted, first index {} -> {}",
                 config_.node_id, why, before_index, limit, removed, first_before, first_after);
    if (events_ != nullptr) events_->segments_deleted(removed);
  }
  return TrimResult{NodeError{}, first_after, limit};
}

void Node::Impl::apply_retention(Clock::time_point now) {
  if (config_.retention_max_age_s == 0 && config_.retention_max_bytes == 0) return;
  if (now - retention_checked_at_ < std::chrono::milliseconds(config_.retention_check_interval_ms)) return;
  retention_checked_at_ = now;
  const std::vector<store::CommitLog::SegmentInfo> segments = log_->segments();
  std::uint64_t total_bytes = 0;
  for (const auto& segment : segments) total_bytes += segment.disk_bytes;
  const auto oldest_kept = std::filesystem::file_time_type::clock::now() -
                           std::chrono::seconds(config_.retention_max_age_s);
  std::uint64_t before = 0;
  // Oldest first; stops at the first segment that may stay (retention deletes a prefix).
  for (const auto& segment : segments) {
    if (segment.active) break;
    bool expired = false;
    if (config_.retention_max_age_s != 0) {
      std::error_code error;
      const auto modified = std::filesystem::last_write_time(segment.data_path, error);
      expired = !error && modified < oldest_kept;
    }
    const bool over_size = config_.retention_max_bytes != 0 && total_bytes > config_.retention_max_bytes;
    if (!expired && !over_size) break;
    before = segment.last_index + 1;
    total_bytes -= std::min(total_bytes, segment.disk_bytes);
  }
  if (before > log_->first_index()) trim_before(before, "retention:");
}

// Leader changes and election outcomes, for metrics. An election is won when the node becomes
// leader (a single-node cluster gets there in one step, without a visible candidate state), and lost
// when a candidate becomes a follower or starts the next election in a higher term.
void Node::Impl::report_role_change(const raft::SoftState& before, const raft::SoftState& after) {
  if (before.leader != after.leader) events_->leader_changed();
  if (after.role == raft::Role::kLeader && before.role != raft::Role::kLeader) {
    events_->election_finished(true);
  } else if (before.role == raft::Role::kCandidate &&
             (after.role == raft::Role::kFollower || after.term > before.term)) {
    events_->election_finished(false);
  }
}

void Node::Impl::publish_status() {
  NodeStatus status;
  status.node_id = config_.node_id;
  status.address = config_.members.at(config_.node_id);
  status.role = raft_->role();
  status.term = raft_->term();
  status.leader_id = raft_->leader();
  if (auto it = config_.members.find(status.leader_id); it != config_.members.end()) {
    status.leader_address = it->second;
  }
  status.first_index = log_->first_index();
  status.last_index = log_->last_index();
  status.commit_index = commit_.load();
  status.flushed_index = log_->flushed_index();
  status.flush_mode = config_.store.flush_mode;
  status.catching_up = raft_->catching_up();
  status.catching_up_to_index = raft_->catching_up_to();
  status.storage_fault = status.catching_up ? storage_fault_ : "";
  status.corrupt_index = corrupt_index_.load();
  if (scrubber_ != nullptr) {
    const ScrubberStats scrub = scrubber_->stats();
    status.scrub_bytes_verified = scrub.bytes_verified;
    status.scrub_passes = scrub.passes_completed;
  }
  for (const raft::PeerProgress& progress : raft_->progress()) {
    if (progress.id == config_.node_id) continue;
    PeerStatus peer;
    peer.id = progress.id;
    if (auto it = config_.members.find(progress.id); it != config_.members.end()) peer.address = it->second;
    peer.match_index = progress.match_index;
    peer.lag_entries = status.last_index > progress.match_index ? status.last_index - progress.match_index : 0;
    peer.last_contact_ms = progress.ticks_since_contact * config_.tick_ms;
    peer.probing = progress.probing;
    peer.inflight_messages = progress.inflight_messages;
    // A follower that needs entries this leader no longer holds cannot be caught up (there are no
    // snapshots): it must be rebuilt from a copy of a healthy node (docs/operations.md).
    // next_index is what the leader would send next (in probe state, its current guess): below the
    // first index the core stops sending appends to that peer (raft_replication.cpp).
    peer.behind_first_index = progress.next_index < status.first_index;
    if (peer.behind_first_index && peers_behind_first_index_.insert(progress.id).second) {
      spdlog::error("node {}: follower {} needs entries from {} but the first retained index is {}: it cannot "
                    "catch up; rebuild it from a copy of a healthy node's data directory (docs/operations.md)",
                    config_.node_id, progress.id, progress.next_index, status.first_index);
    } else if (!peer.behind_first_index) {
      peers_behind_first_index_.erase(progress.id);
    }
    status.peers.push_back(std::move(peer));
  }
  std::lock_guard lock(status_mu_);
  status_ = std::move(status);
}

// --- storage faults --------------------------------------------------------------------------------

bool Node::Impl::open_store(const store::Options& store_options, NodeError* error) {
  // Recovery spot-checks sealed segments; the dedup rebuild then reads (and CRC-checks) the tail of the
  // log. A corrupt entry found there is marked suspect and the log reopened, so that recovery checks
  // that segment in full and cuts the log at it (with peers to repair from: allow_truncate_...).
  // Bounded: every round cuts the log below the previous cut.
  constexpr int kMaxOpenRepairs = 8;
  for (int attempt = 0;; ++attempt) {
    auto log = store::CommitLog::open(config_.data_dir + "/log", store_options);
    if (!log.ok()) {
      *error = make_error(ErrorCode::kInternal, "opening the commit log failed: " + log.status().to_string());
      return false;
    }
    log_ = std::move(log).value();
    spdlog::info("node {}: store recovered: {}", config_.node_id, log_->recovery_report().to_string());
    std::uint64_t corrupt_index = 0;
    std::string problem;
    if (rebuild_dedup(&corrupt_index, &problem)) return true;
    if (corrupt_index == 0 || !store_options.allow_truncate_corrupted_flushed_data || attempt >= kMaxOpenRepairs) {
      *error = make_error(ErrorCode::kInternal, "rebuilding the dedup table failed: " + problem);
      return false;
    }
    spdlog::error("node {}: entry {} is corrupt ({}); reopening the log so that recovery cuts it there, to be "
                  "repaired from the peers",
                  config_.node_id, corrupt_index, problem);
    if (store::Status st = log_->mark_suspect(corrupt_index); !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "marking entry " + std::to_string(corrupt_index) +
                                                    " suspect failed: " + st.to_string());
      return false;
    }
    if (store::Status st = log_->close(); !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "closing the commit log failed: " + st.to_string());
      return false;
    }
    log_.reset();
    dedup_ = DedupTable(config_.dedup_max_clients, config_.dedup_sequences_per_client);
  }
}

bool Node::Impl::rebuild_dedup(std::uint64_t* corrupt_index, std::string* problem) {
  // The last dedup_rebuild_entries entries of the log (the window is documented in node_config.h).
  const std::uint64_t last = log_->last_index();
  std::uint64_t from = log_->first_index();
  if (last >= config_.dedup_rebuild_entries && last - config_.dedup_rebuild_entries + 1 > from) {
    from = last - config_.dedup_rebuild_entries + 1;
  }
  dedup_.set_view_start(from);  // an append that began below `from` is seen only in part
  constexpr std::size_t kBatchEntries = 4096;
  while (from <= last) {
    auto batch = log_->read(from, kBatchEntries, 64ULL << 20);
    if (!batch.ok() || batch->entries.empty()) {
      if (!batch.ok() && batch.status().code() == store::StatusCode::kCorruption) {
        *corrupt_index = find_corrupt_index(from, kBatchEntries);
      }
      *problem = "at index " + std::to_string(from) + ": " + batch.status().to_string();
      return false;
    }
    for (const store::EntryView& view : batch->entries) {
      dedup_.record_entry(view.meta.client_id, view.meta.sequence, view.meta.index, view.meta.term,
                          view.payload);
    }
    from = batch->entries.back().meta.index + 1;
  }
  return true;
}

void Node::Impl::assess_recovery(bool same_boot, raft::Config* raft_config) {
  RecoveryFacts facts;
  facts.report = log_->recovery_report();
  facts.checkpoint_commit_index = log_->commit_index();
  facts.recovered_last_index = log_->last_index();
  facts.hard_state_term = persisted_hard_state_.term;
  if (log_->last_index() >= log_->first_index()) {
    if (auto term = log_->term_at(log_->last_index()); term.ok()) facts.last_log_term = *term;
  }
  facts.sync_flush = config_.store.flush_mode == store::FlushMode::kSync;
  facts.single_member = config_.members.size() == 1;
  facts.same_boot = same_boot;
  const StorageFault fault = assess_storage_fault(facts);
  if (!fault.lost_durable_entries) return;
  storage_fault_ = fault.description;
  raft_config->promised_index = fault.promised_index;
  raft_config->promised_term = fault.promised_term;
  spdlog::error("node {}: storage fault: {}; this node may have acknowledged entries up to {} (term {}) that "
                "it no longer holds: it catches up from the leader and neither votes nor counts toward "
                "commit until its log reaches them (docs/operations.md, \"Storage faults\")",
                config_.node_id, fault.description, fault.promised_index, fault.promised_term);
}

ScrubChunk Node::Impl::scrub_chunk(std::uint64_t from, std::uint64_t max_bytes) {
  ScrubChunk chunk;
  std::shared_lock store_lock(store_mu_);
  if (store_closed_ || stopping_.load()) {
    chunk.outcome = ScrubChunk::Outcome::kStopped;
    return chunk;
  }
  const std::uint64_t first = log_->first_index();
  const std::uint64_t durable_end = log_->flushed_index();  // only what the log vouches for
  if (from < first) from = first;                             // 0, or trimmed meanwhile
  if (from > durable_end) return chunk;                      // kAtEnd
  constexpr std::size_t kMaxScrubEntries = 4096;
  const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(durable_end - from + 1, kMaxScrubEntries));
  auto batch = log_->read(from, count, static_cast<std::size_t>(max_bytes));
  if (batch.ok() && !batch->entries.empty()) {
    chunk.outcome = ScrubChunk::Outcome::kVerified;
    for (const store::EntryView& view : batch->entries) chunk.bytes += view.payload.size();
    chunk.entries = batch->entries.size();
    chunk.next_index = batch->entries.back().meta.index + 1;
    return chunk;
  }
  if (!batch.ok() && batch.status().code() == store::StatusCode::kCorruption) {
    chunk.outcome = ScrubChunk::Outcome::kCorrupt;
    const std::uint64_t corrupt = find_corrupt_index(from, count);
    chunk.corrupt_index = corrupt != 0 ? corrupt : from;
    chunk.message = batch.status().message();
  }
  return chunk;  // an empty batch or another error (a truncation raced): start over next time
}

std::uint64_t Node::Impl::find_corrupt_index(std::uint64_t from, std::uint64_t count) const {
  // Bounded by `count` (one read batch); each read is of one entry.
  for (std::uint64_t index = from; index < from + count; ++index) {
    auto one = log_->read(index, 1, std::numeric_limits<std::size_t>::max());
    if (!one.ok() && one.status().code() == store::StatusCode::kCorruption) return index;
    if (!one.ok()) return 0;
  }
  return 0;
}

void Node::Impl::report_corruption(std::uint64_t index, std::string message) {
  if (corruption_reported_.exchange(true)) return;
  corrupt_index_.store(index);
  push(CorruptionInput{index, std::move(message)}, /*droppable=*/false);
}

void Node::Impl::handle_corruption(const CorruptionInput& in) {
  // The entry is never served (reads of it fail with DATA_LOSS). The node cannot cut its log below
  // the commit index while it runs, so it records the entry for the next open, which verifies that
  // segment in full, cuts the log at the first bad entry and catches up from the leader
  // (assess_recovery). Stopping makes a supervisor (systemd, Kubernetes) restart it.
  std::string outcome = "marked for repair";
  {
    std::shared_lock store_lock(store_mu_);
    if (store::Status st = log_->mark_suspect(in.index); !st.ok()) outcome = "NOT marked: " + st.to_string();
  }
  publish_status();
  fatal("entry " + std::to_string(in.index) + " is corrupt (" + in.message + "); " + outcome +
        ": restart the node and it re-fetches the entries from its peers (docs/operations.md, \"Storage "
        "faults\")");
}

// --- committed reads (any thread) ------------------------------------------------------------------

NodeError Node::Impl::read_committed(std::uint64_t from_index, std::size_t max_entries,
                                     std::size_t max_bytes, std::vector<raft::Entry>* out) {
  out->clear();
  std::shared_lock store_lock(store_mu_);
  if (store_closed_) return make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown);
  const std::uint64_t commit = commit_.load(std::memory_order_acquire);
  const std::uint64_t first = log_->first_index();
  if (from_index == 0) return make_error(ErrorCode::kInvalidArgument, "indexes start at 1", kReasonBadIndexRange);
  if (from_index < first) {
    return make_error(ErrorCode::kOutOfRange, "index " + std::to_string(from_index) +
                                                  " is below the first retained index " + std::to_string(first),
                      kReasonBadIndexRange);
  }
  if (from_index > commit + 1) {
    return make_error(ErrorCode::kOutOfRange, "index " + std::to_string(from_index) +
                                                  " is past the committed end " + std::to_string(commit),
                      kReasonBadIndexRange);
  }
  if (from_index == commit + 1) return NodeError{};
  const std::size_t available = static_cast<std::size_t>(commit - from_index + 1);
  auto batch = log_->read(from_index, std::min(max_entries, available), max_bytes);
  if (!batch.ok()) {
    if (batch.status().code() == store::StatusCode::kOutOfRange) {
      return make_error(ErrorCode::kOutOfRange, batch.status().message());
    }
    if (batch.status().code() == store::StatusCode::kCorruption) {
      std::uint64_t corrupt = find_corrupt_index(from_index, std::min(max_entries, available));
      if (corrupt == 0) corrupt = from_index;  // the batch failed its check, one read alone did not
      report_corruption(corrupt, batch.status().message());
      return make_error(ErrorCode::kDataLoss,
                        "entry " + std::to_string(corrupt) +
                            " on this node failed its checksum; it is not served (read it from another "
                            "node; this one repairs it from its peers after a restart): " +
                            batch.status().message(),
                        kReasonCorruptEntry);
    }
    return make_error(ErrorCode::kInternal, "reading the log: " + batch.status().to_string());
  }
  out->reserve(batch->entries.size());
  for (const store::EntryView& view : batch->entries) {
    if (view.meta.index > commit) break;
    out->push_back(to_raft_entry(view));
  }
  return NodeError{};
}

std::uint64_t Node::Impl::wait_for_commit(std::uint64_t after_index, Clock::time_point deadline) const {
  std::unique_lock lock(commit_mu_);
  commit_cv_.wait_until(lock, deadline, [&] {
    return commit_.load() > after_index || stopping_.load();
  });
  return commit_.load();
}

// --- Node ------------------------------------------------------------------------------------------

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Node::~Node() { stop(); }

std::unique_ptr<Node> Node::open(const NodeConfig& config, MessageSender* sender, NodeError* error,
                                 NodeEvents* events) {
  auto impl = std::make_unique<Impl>(config, sender, events);
  if (!impl->open(error)) return nullptr;
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

void Node::start() { impl_->start(); }
void Node::trim(std::uint64_t before_index, TrimCallback done) {
  if (impl_->stopping_.load()) {
    done(TrimResult{make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown), 0, 0});
    return;
  }
  impl_->push(TrimInput{before_index, std::move(done)}, /*droppable=*/false);
}

bool Node::disk_watermark_exceeded() const { return impl_->disk_watermark_exceeded_.load(); }
void Node::stop() { impl_->stop(); }

void Node::append(std::vector<std::string> payloads, std::uint64_t client_id, std::uint64_t sequence,
                  AppendCallback done) {
  const NodeConfig& config = impl_->config_;
  if (impl_->stopping_.load()) {
    done(failed_append(make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown)));
    return;
  }
  if (payloads.empty()) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument, "empty append: at least one entry is required", kReasonEmptyAppend)));
    return;
  }
  if (payloads.size() > config.max_entries_per_append) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                 "too many entries: " + std::to_string(payloads.size()) + " > " +
                                     std::to_string(config.max_entries_per_append) + " per append",
                                 kReasonTooManyEntries)));
    return;
  }
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i].size() > config.store.max_entry_size_bytes) {
      done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                   "entry " + std::to_string(i) + " is " + std::to_string(payloads[i].size()) +
                                       " bytes, larger than the maximum entry size of " +
                                       std::to_string(config.store.max_entry_size_bytes) + " bytes",
                                   kReasonEntryTooLarge)));
      return;
    }
    bytes += payloads[i].size();
  }
  if (bytes > config.max_append_bytes) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                 "append of " + std::to_string(bytes) + " bytes exceeds the per-append limit of " +
                                     std::to_string(config.max_append_bytes) + " bytes",
                                 kReasonAppendTooLarge)));
    return;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(config.append_timeout_ms);
  impl_->push(AppendInput{std::move(payloads), client_id, sequence, std::move(done), deadline}, false);
}

void Node::read_index(ReadIndexCallback done) {
  if (impl_->stopping_.load()) {
    done(ReadIndexResult{make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown), 0});
    return;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(impl_->config_.append_timeout_ms);
  impl_->push(ReadIndexInput{std::move(done), deadline}, false);
}

void Node::transfer_leadership(std::uint64_t target_id, TransferCallback done) {
  if (impl_->stopping_.load()) {
    done(TransferResult{make_error(ErrorCode::kUnavailable, "node shutting down", kReasonShuttingDown), 0, 0});
    return;
  }
  impl_->push(TransferInput{target_id, std::move(done)}, false);
}

void Node::receive(raft::Message message) {
  if (impl_->stopping_.load()) return;
  impl_->push(MessageInput{std::move(message)}, true);
}

NodeError Node::read_committed(std::uint64_t from_index, std::size_t max_entries, std::size_t max_bytes,
                               std::vector<raft::Entry>* out) const {
  return impl_->read_committed(from_index, max_entries, max_bytes, out);
}

std::uint64_t Node::wait_for_commit(std::uint64_t after_index, Clock::time_point deadline) const {
  return impl_->wait_for_commit(after_index, deadline);
}

std::uint64_t Node::commit_index() const { return impl_->commit_.load(std::memory_order_acquire); }
bool Node::stopping() const { return impl_->stopping_.load(std::memory_order_acquire); }
bool Node::failed() const { return impl_->failed_.load(std::memory_order_acquire); }

NodeStatus Node::status() const {
  NodeStatus status;
  {
    std::lock_guard lock(impl_->status_mu_);
    status = impl_->status_;
  }
  // The store's figures are read when someone asks (Status RPC, a metrics scrape, the health
  // poller), not by the Raft loop after every round of work.
  std::shared_lock store_lock(impl_->store_mu_);
  if (impl_->store_closed_) return status;
  const store::CommitLog& log = *impl_->log_;
  for (PeerStatus& peer : status.peers) {
    peer.lag_bytes = peer.lag_entries == 0 ? 0 : log.bytes_after(peer.match_index);
  }
  const store::CommitLog::DiskUsage usage = log.disk_usage();
  status.store_segments = usage.segments;
  status.store_disk_bytes = usage.bytes;
  status.recovery_mode = log.recovery_report().mode;
  status.recovery_duration = log.recovery_report().duration;
  return status;
}

store::Status Node::flush_store() {
  std::shared_lock store_lock(impl_->store_mu_);
  if (impl_->store_closed_) return store::Status::closed("node shutting down");
  return impl_->log_->flush();
}

std::uint64_t Node::flushed_index() const {
  std::shared_lock store_lock(impl_->store_mu_);
  return impl_->store_closed_ ? 0 : impl_->log_->flushed_index();
}
const NodeConfig& Node::config() const { return impl_->config_; }

}  // namespace raftlog::server

// Node: raftlogd's shell around one Replica (src/replica/replica.h): the Raft loop thread, the
// bounded input queue, the store lock that lets gRPC threads read while the loop writes, the
// published commit index and status, and the scrubber thread.
#include "server/node.h"
#include "server/node_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <thread>
#include <variant>

#include "replica/replica.h"
#include "replica/storage_fault.h"
#include "replica/store_log_reader.h"
#include "server/entry_envelopes.h"
#include "server/node_identity.h"
#include "server/scrubber.h"
#include "util/prng.h"
#include "util/thread_name.h"

namespace raftlog::server {

namespace node_detail {

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
        } else if constexpr (std::is_same_v<T, MembershipInput>) {
          in.done(MembershipResult{error, 0, 0, {}});
        }
      },
      input);
}

// A leadership nonce seed (raft::Config::leadership_nonce_seed) that no earlier start of this node
// had: 64 bits of the system's random source, read once per start, mixed with the clock and the
// id. A random source that fails (no entropy device) leaves the clock and the id, which still
// differ from one start to the next.
std::uint64_t leadership_nonce_seed(std::uint64_t node_id) {
  // The wall clock too: the steady clock counts from boot, and repeats its range after a reboot.
  std::uint64_t seed =
      static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
      static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
      (node_id * 0xC2B2AE3D27D4EB4FULL);
  try {
    std::random_device device;
    seed ^= (static_cast<std::uint64_t>(device()) << 32) ^ static_cast<std::uint64_t>(device());
  } catch (const std::exception& e) {
    spdlog::warn("node {}: no random source for leadership nonces ({}); using the clock", node_id,
                 e.what());
  }
  const std::uint64_t mixed = util::splitmix64(seed);
  return mixed != 0 ? mixed : 1;  // 0 would mean "derive from random_seed"
}

}  // namespace node_detail


// --- opening and stopping --------------------------------------------------------------------------

bool Node::Impl::open(NodeError* error) {
  if (std::string problem = validate(config_); !problem.empty()) {
    *error = make_error(ErrorCode::kInvalidArgument, "bad configuration: " + problem);
    return false;
  }
  std::error_code mkdir_error;
  std::filesystem::create_directories(config_.data_dir, mkdir_error);
  if (mkdir_error) {
    *error = make_error(ErrorCode::kInternal, "cannot create data directory " + config_.data_dir +
                                                  ": " + mkdir_error.message());
    return false;
  }
  // Before anything in the directory is opened: refuse another cluster's or another node's.
  if (std::string problem = establish_data_dir_identity(config_); !problem.empty()) {
    *error = make_error(ErrorCode::kFailedPrecondition, problem);
    return false;
  }
  replica::ReplicaConfig replica_config = replica_config_for(config_);
  // Decided before the store's recovery writes anything: did the machine restart since the last open?
  replica_config.same_boot =
      replica::same_boot_as_last_open(config_.data_dir, replica::current_boot_id());
  replica_config.raft.random_seed =
      static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
      (config_.node_id * 0x9E3779B97F4A7C15ULL);
  replica_config.raft.leadership_nonce_seed = node_detail::leadership_nonce_seed(config_.node_id);
  replica::ReplicaDeps deps;
  deps.sender = sender_;
  deps.disk = &disk_probe_;
  deps.events = events_;
  deps.commit_advanced = [this](std::uint64_t commit) { publish_commit(commit); };
  deps.snapshot_section = [this](std::uint64_t index) {
    return snapshot_section_.provide ? snapshot_section_.provide(index) : std::string();
  };
  deps.check_snapshot_section = [this](std::string_view section, std::uint64_t index) {
    // Without a group table (Dispatcher::open failed) a section is not checked: it is not used.
    return snapshot_section_.check ? snapshot_section_.check(section, index) : std::string();
  };
  deps.snapshot_installed = [this](std::uint64_t index, const std::string& section) {
    if (snapshot_section_.installed) snapshot_section_.installed(index, section);
  };
  off_loop_ = std::make_unique<OffLoopWorker>(
      [this](std::function<void()> done) { push(OffLoopDoneInput{std::move(done)}, false); });
  deps.off_loop = off_loop_.get();
  replica_ = Replica::open(std::move(replica_config), std::move(deps), error);
  if (replica_ == nullptr) return false;
  log_ = &replica_->log();
  commit_.store(replica_->commit_index(), std::memory_order_release);
  // The flusher's notice only wakes the loop: the replica re-reads flushed_index() itself, because a
  // notice's value may predate a truncation (Replica::report_durability).
  log_->set_flush_listener([this](std::uint64_t flushed) { push(FlushedInput{flushed}, false); });
  update_peers();
  publish_status();
  return true;
}

void Node::Impl::start() {
  assert(!started_);
  started_ = true;
  // Made before the loop thread starts: the loop reads scrubber_ (publish_status).
  scrubber_ = std::make_unique<Scrubber>(
      config_.scrub_bytes_per_second, kScrubIntervalMs,
      [this](std::uint64_t from, std::uint64_t max_bytes) { return scrub_chunk(from, max_bytes); },
      [this](std::uint64_t index, const std::string& message) {
        report_corruption(index, message);
      });
  loop_thread_ = std::thread([this] {
    util::name_this_thread("raft-loop");
    loop();
  });
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
  if (off_loop_ != nullptr) off_loop_->stop();  // its results would find no loop to run them
  if (loop_thread_.joinable()) {
    loop_thread_.join();
  } else if (replica_ != nullptr) {
    replica_->fail_all(ErrorCode::kUnavailable, "node shutting down");  // never started
  }
  // Inputs pushed between the loop's last drain and loop_exit_ are answered here.
  fail_queued(ErrorCode::kUnavailable, "node shutting down");
  std::unique_lock store_lock(store_mu_);  // no gRPC thread is inside the store while it closes
  if (replica_ != nullptr && !store_closed_) {
    store_closed_ = true;
    replica_->close();
  }
}

void Node::Impl::fail_queued(ErrorCode code, const std::string& message) {
  std::deque<Input> rest;
  {
    std::lock_guard lock(input_mu_);
    rest.swap(inputs_);
  }
  for (Input& input : rest) reject(input, make_error(code, message, replica::kReasonShuttingDown));
}

void Node::Impl::stop_after_failure() {
  failed_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(commit_mu_);
    stopping_.store(true, std::memory_order_release);
  }
  commit_cv_.notify_all();
  std::lock_guard lock(input_mu_);  // from now on push() refuses: nothing can be left unanswered
  loop_exit_.store(true, std::memory_order_release);
}

void Node::Impl::publish_commit(std::uint64_t commit) {
  {
    std::lock_guard lock(commit_mu_);
    commit_.store(commit, std::memory_order_release);
  }
  commit_cv_.notify_all();
}

// --- the input queue and the loop ------------------------------------------------------------------

void Node::Impl::push(Input input, bool droppable) {
  {
    std::unique_lock lock(input_mu_);
    if (loop_exit_.load()) {
      lock.unlock();
      reject(input, make_error(ErrorCode::kUnavailable, "node shutting down",
                               replica::kReasonShuttingDown));
      return;
    }
    // Flush notices are never refused: they are bounded by the flusher's rate and carry durability;
    // nor are off-loop results (at most one outstanding: the replica waits for it).
    const bool flushed_notice = std::holds_alternative<FlushedInput>(input) ||
                                std::holds_alternative<OffLoopDoneInput>(input);
    std::uint64_t append_bytes = 0;
    if (const auto* append = std::get_if<AppendInput>(&input)) {
      for (const std::string& payload : append->payloads) append_bytes += payload.size();
    }
    if ((inputs_.size() >= config_.max_input_queue && !flushed_notice) ||
        queued_append_bytes_ + append_bytes > kMaxQueuedAppendBytes) {
      lock.unlock();
      // Peer messages are dropped silently (Raft retransmits); client requests are told to back off.
      if (!droppable) {
        reject(input,
               make_error(ErrorCode::kResourceExhausted, "node input queue full; retry later",
                          replica::kReasonTooManyPending));
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

void Node::Impl::push_all(std::vector<Input> inputs) {
  if (inputs.empty()) return;
  std::vector<Input> refused;  // answered outside input_mu_: their callbacks may take other locks
  bool exiting = false;
  bool notify = false;
  {
    std::lock_guard lock(input_mu_);
    exiting = loop_exit_.load();
    for (Input& input : inputs) {
      const auto& append = std::get<AppendInput>(input);
      std::uint64_t append_bytes = 0;
      for (const std::string& payload : append.payloads) append_bytes += payload.size();
      if (exiting || inputs_.size() >= config_.max_input_queue ||
          queued_append_bytes_ + append_bytes > kMaxQueuedAppendBytes) {
        refused.push_back(std::move(input));
        continue;
      }
      queued_append_bytes_ += append_bytes;
      inputs_.push_back(std::move(input));
    }
    // The wake-up protocol of push().
    if (refused.size() < inputs.size() && loop_sleeping_.load(std::memory_order_relaxed)) {
      loop_sleeping_.store(false, std::memory_order_relaxed);
      notify = true;
    }
  }
  if (notify) input_cv_.notify_one();
  for (Input& input : refused) {
    reject(input, exiting ? make_error(ErrorCode::kUnavailable, "node shutting down",
                                       replica::kReasonShuttingDown)
                          : make_error(ErrorCode::kResourceExhausted,
                                       "node input queue full; retry later",
                                       replica::kReasonTooManyPending));
  }
}

void Node::Impl::loop() {
  const auto tick = std::chrono::milliseconds(config_.tick_ms);
  auto next_tick = Clock::now() + tick;
  // NodeConfig::slow_round_log_ms; 0: half the shortest election timeout.
  const std::chrono::milliseconds slow_round(
      config_.slow_round_log_ms != 0
          ? config_.slow_round_log_ms
          : static_cast<std::uint64_t>(config_.election_ticks) * config_.tick_ms / 2);
  using replica::RoundPart;
  using Part = replica::RoundProfile::Scope;
  replica::RoundProfile& round = replica_->round_profile();
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
    replica_->begin_round();
    if (now >= next_tick) {
      Part part(round, RoundPart::kTicks);
      tick_due(now, &next_tick);
      replica_->expire_pending(now);
    }
    for (Input& input : batch) {
      if (replica_->failed()) {  // the rest of the batch is answered, as every input must be
        reject(input, make_error(ErrorCode::kUnavailable, "node failed; see its log",
                                 replica::kReasonShuttingDown));
        continue;
      }
      handle_input(input);
    }
    batch.clear();
    if (!replica_->failed()) replica_->process();
    if (!replica_->failed()) replica_->apply_retention(now);
    {
      Part part(round, RoundPart::kStatus);
      update_peers();
      publish_status();
    }
    const Clock::duration took = replica_->end_round(slow_round);
    if (events_ != nullptr) events_->loop_round_finished(took);
    if (replica_->failed()) stop_after_failure();
    if (failed_.load()) break;
  }
  const std::string why = failed_.load() ? "node failed; see its log" : "node shutting down";
  replica_->fail_all(ErrorCode::kUnavailable, why);
  fail_queued(ErrorCode::kUnavailable, why);
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
  due = replica_->role() == raft::Role::kLeader
            ? std::min<std::uint64_t>(due, config_.heartbeat_ticks)
            : 1;
  for (std::uint64_t i = 0; i < due; ++i) {
    replica_->tick();
    if (replica_->role() != raft::Role::kLeader)
      break;  // stepped down (check_quorum): no follower burst
  }
  *next_tick += tick * static_cast<std::int64_t>(due);
  if (*next_tick < now) *next_tick = now + tick;
}

void Node::Impl::handle_input(Input& input) {
  using replica::RoundPart;
  const RoundPart part = std::holds_alternative<MessageInput>(input) ? RoundPart::kStepMessages
                         : std::holds_alternative<OffLoopDoneInput>(input)
                             ? RoundPart::kOffLoopResults
                             : RoundPart::kClientRequests;  // a trim's own steps are its parts
  replica::RoundProfile::Scope scope(replica_->round_profile(), part);
  std::visit(
      [&](auto& in) {
        using T = std::decay_t<decltype(in)>;
        if constexpr (std::is_same_v<T, AppendInput>) {
          replica_->append(std::move(in));
        } else if constexpr (std::is_same_v<T, ReadIndexInput>) {
          replica_->read_index(std::move(in));
        } else if constexpr (std::is_same_v<T, TransferInput>) {
          replica_->transfer_leadership(std::move(in));
        } else if constexpr (std::is_same_v<T, MessageInput>) {
          replica_->step(std::move(in.message));
        } else if constexpr (std::is_same_v<T, TrimInput>) {
          in.done(replica_->trim(in.before_index, "requested"));
        } else if constexpr (std::is_same_v<T, CorruptionInput>) {
          handle_corruption(in);
        } else if constexpr (std::is_same_v<T, MembershipInput>) {
          replica_->propose_conf_change(std::move(in));
        } else if constexpr (std::is_same_v<T, OffLoopDoneInput>) {
          in.done();  // the replica's: e.g. a snapshot encoding's result, its messages sent
        } else {
          // A flush notice only wakes the loop: Replica::process() reads the store itself.
          static_assert(std::is_same_v<T, FlushedInput>);
        }
      },
      input);
}

void Node::Impl::handle_corruption(const CorruptionInput& in) {
  {
    std::shared_lock store_lock(store_mu_);
    replica_->mark_corrupt(in.index, in.message);
  }
  publish_status();
}

void Node::Impl::update_peers() {
  // The peers change only with the configuration history (an entry appended, cut or committed):
  // cheap to compare on every round, unlike the address maps.
  const std::vector<raft::ConfRecord>& history = replica_->core().conf_history();
  const ConfHistoryKey key{history.size(), history.front().index, history.back().index,
                           history.back().term};
  if (peers_key_ && *peers_key_ == key) return;
  peers_key_ = key;
  std::map<std::uint64_t, std::string> peers = replica_->peer_addresses();
  if (peers == peers_) return;
  peers_ = std::move(peers);
  sender_->set_peers(peers_);
}

void Node::Impl::publish_status() {
  NodeStatus status = replica_->status();
  status.corrupt_index = corrupt_index_.load();
  if (scrubber_ != nullptr) {
    const ScrubberStats scrub = scrubber_->stats();
    status.scrub_bytes_verified = scrub.bytes_verified;
    status.scrub_passes = scrub.passes_completed;
  }
  removed_by_.store(status.removed_by, std::memory_order_release);
  removed_.store(status.removed, std::memory_order_release);
  std::lock_guard lock(status_mu_);
  status_ = std::move(status);
}

// --- storage faults found by readers and the scrubber ----------------------------------------------

ScrubChunk Node::Impl::scrub_chunk(std::uint64_t from, std::uint64_t max_bytes) {
  ScrubChunk chunk;
  std::shared_lock store_lock(store_mu_);
  if (store_closed_ || stopping_.load()) {
    chunk.outcome = ScrubChunk::Outcome::kStopped;
    return chunk;
  }
  const std::uint64_t first = log_->first_index();
  const std::uint64_t durable_end = log_->flushed_index();  // only what the log vouches for
  if (from < first) from = first;                           // 0, or trimmed meanwhile
  if (from > durable_end) return chunk;                     // kAtEnd
  constexpr std::size_t kMaxScrubEntries = 4096;
  const std::size_t count =
      static_cast<std::size_t>(std::min<std::uint64_t>(durable_end - from + 1, kMaxScrubEntries));
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
    const std::uint64_t corrupt = replica::first_corrupt_index(*log_, from, count);
    chunk.corrupt_index = corrupt != 0 ? corrupt : from;
    chunk.message = batch.status().message();
  }
  return chunk;  // an empty batch or another error (a truncation raced): start over next time
}

void Node::Impl::report_corruption(std::uint64_t index, std::string message) {
  if (corruption_reported_.exchange(true)) return;
  corrupt_index_.store(index);
  push(CorruptionInput{index, std::move(message)}, /*droppable=*/false);
}

// --- committed reads (any thread) ------------------------------------------------------------------

NodeError Node::Impl::read_committed(std::uint64_t from_index, std::size_t max_entries,
                                     std::size_t max_bytes, std::vector<raft::Entry>* out) {
  out->clear();
  std::shared_lock store_lock(store_mu_);
  if (store_closed_)
    return make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown);
  const std::uint64_t commit = commit_.load(std::memory_order_acquire);
  const std::uint64_t first = log_->first_index();
  if (from_index == 0)
    return make_error(ErrorCode::kInvalidArgument, "indexes start at 1",
                      replica::kReasonBadIndexRange);
  // Two OUT_OF_RANGE reasons, because a client does opposite things about them: an index below the
  // first retained one is gone for good, one past the committed end may exist soon.
  auto out_of_range = [&](std::string message, const char* reason) {
    NodeError error = make_error(ErrorCode::kOutOfRange, std::move(message), reason);
    error.first_index = log_->first_index();
    error.commit_index = commit;
    return error;
  };
  if (from_index < first) {
    return out_of_range("index " + std::to_string(from_index) +
                            " is below the first retained index " + std::to_string(first) +
                            " (trimmed)",
                        replica::kReasonIndexTrimmed);
  }
  if (from_index > commit + 1) {
    return out_of_range("index " + std::to_string(from_index) + " is past the committed end " +
                            std::to_string(commit) + "; retry once it is committed",
                        replica::kReasonIndexNotYetCommitted);
  }
  if (from_index == commit + 1) return NodeError{};
  const std::size_t available = static_cast<std::size_t>(commit - from_index + 1);
  auto batch = log_->read(from_index, std::min(max_entries, available), max_bytes);
  if (!batch.ok()) {
    if (batch.status().code() == store::StatusCode::kOutOfRange) {
      // A trim between the checks above and the read (committed entries are never cut from the end).
      const bool trimmed = from_index < log_->first_index();
      return out_of_range(batch.status().message(), trimmed ? replica::kReasonIndexTrimmed
                                                            : replica::kReasonIndexNotYetCommitted);
    }
    if (batch.status().code() == store::StatusCode::kCorruption) {
      std::uint64_t corrupt =
          replica::first_corrupt_index(*log_, from_index, std::min(max_entries, available));
      if (corrupt == 0) corrupt = from_index;  // the batch failed its check, one read alone did not
      report_corruption(corrupt, batch.status().message());
      return make_error(
          ErrorCode::kDataLoss,
          "entry " + std::to_string(corrupt) +
              " on this node failed its checksum; it is not served (read it from another "
              "node; this one repairs it from its peers after a restart): " +
              batch.status().message(),
          replica::kReasonCorruptEntry);
    }
    return make_error(ErrorCode::kInternal, "reading the log: " + batch.status().to_string(),
                      replica::kReasonStorageError);
  }
  out->reserve(batch->entries.size());
  for (const store::EntryView& view : batch->entries) {
    if (view.meta.index > commit) break;
    out->push_back(replica::to_raft_entry(view));
  }
  return NodeError{};
}

std::uint64_t Node::Impl::wait_for_commit(std::uint64_t after_index,
                                          Clock::time_point deadline) const {
  std::unique_lock lock(commit_mu_);
  commit_cv_.wait_until(lock, deadline,
                        [&] { return commit_.load() > after_index || stopping_.load(); });
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
bool Node::disk_watermark_exceeded() const { return impl_->replica_->disk_watermark_exceeded(); }
void Node::stop() { impl_->stop(); }

NodeError Node::read_committed(std::uint64_t from_index, std::size_t max_entries,
                               std::size_t max_bytes, std::vector<raft::Entry>* out) const {
  return impl_->read_committed(from_index, max_entries, max_bytes, out);
}

std::uint64_t Node::wait_for_commit(std::uint64_t after_index, Clock::time_point deadline) const {
  return impl_->wait_for_commit(after_index, deadline);
}

void Node::set_snapshot_section(SnapshotSection section) {
  impl_->snapshot_section_ = std::move(section);
}

void Node::set_status_extension(std::function<void(NodeStatus*)> extend) {
  impl_->status_extension_ = std::move(extend);
}

Node::LogBounds Node::log_bounds() const {
  std::shared_lock store_lock(impl_->store_mu_);
  if (impl_->store_closed_) return LogBounds{};
  return LogBounds{impl_->log_->first_index(), impl_->log_->last_index()};
}

std::optional<std::uint64_t> Node::term_at(std::uint64_t index) const {
  std::shared_lock store_lock(impl_->store_mu_);
  if (impl_->store_closed_) return std::nullopt;
  auto term = impl_->log_->term_at(index);
  if (!term.ok()) return std::nullopt;
  return *term;
}

std::uint64_t Node::commit_index() const { return impl_->commit_.load(std::memory_order_acquire); }
bool Node::stopping() const { return impl_->stopping_.load(std::memory_order_acquire); }
bool Node::removed() const { return impl_->removed_.load(std::memory_order_acquire); }

NodeError Node::removed_refusal() const {
  if (!removed()) return NodeError{};
  if (const std::uint64_t by = impl_->removed_by_.load(std::memory_order_acquire); by != 0) {
    return make_error(ErrorCode::kUnavailable,
                      "member " + std::to_string(by) + " answered that node " +
                          std::to_string(impl_->config_.node_id) +
                          "'s id is retired (removed by a committed change): this node does not "
                          "serve; if it was restarted on a lost disk under a retired id, stop it "
                          "and confirm with raftlogctl members list (docs/operations.md, "
                          "\"Membership\")",
                      replica::kReasonNodeRemoved);
  }
  return make_error(ErrorCode::kUnavailable,
                    "node " + std::to_string(impl_->config_.node_id) +
                        " was removed from the cluster by a committed change: its log stops at "
                        "commit " + std::to_string(commit_index()) +
                        " for good; read from a member (raftlogctl members list), and stop this node",
                    replica::kReasonNodeRemoved);
}
bool Node::failed() const { return impl_->failed_.load(std::memory_order_acquire); }

NodeStatus Node::status() const {
  NodeStatus status;
  {
    std::lock_guard lock(impl_->status_mu_);
    status = impl_->status_;
  }
  if (impl_->status_extension_) impl_->status_extension_(&status);
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

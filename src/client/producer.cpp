// Producer: see producer.h for the contract. This file is the combining queue: callers queue a
// Waiter on their own stack, and whichever caller finds a free lane sends the oldest queued entries.
#include "client/producer.h"

#include <cassert>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace raftlog::client {

namespace {
constexpr std::size_t kMaxBatchEntries = 1024;  // the server's default bound per Append
constexpr std::size_t kMaxQueuedEntries = 1u << 20;
}  // namespace

std::string validate_producer_options(const ProducerOptions& options) {
  if (std::string problem = validate_options(options.client); !problem.empty()) return problem;
  if (options.client.client_id != 0) {
    return "the producer's client_id must be 0: each lane draws its own id (two lanes sharing one "
           "id "
           "would break the server's per-client sequence order)";
  }
  if (options.lanes == 0 || options.lanes > kMaxProducerLanes) {
    return "lanes must be in [1, " + std::to_string(kMaxProducerLanes) + "]";
  }
  if (options.max_batch_entries == 0 || options.max_batch_entries > kMaxBatchEntries) {
    return "max_batch_entries must be in [1, " + std::to_string(kMaxBatchEntries) + "]";
  }
  if (options.max_batch_bytes == 0 || options.max_batch_bytes > options.client.max_message_bytes) {
    return "max_batch_bytes must be in [1, max_message_bytes]";
  }
  if (options.max_queued_entries == 0 || options.max_queued_entries > kMaxQueuedEntries) {
    return "max_queued_entries must be in [1, " + std::to_string(kMaxQueuedEntries) + "]";
  }
  return "";
}

class Producer::Impl {
 public:
  Impl(ProducerOptions options, std::vector<std::unique_ptr<Client>> lanes)
      : options_(std::move(options)), lanes_(std::move(lanes)) {
    for (std::size_t lane = 0; lane < lanes_.size(); ++lane) free_lanes_.push_back(lane);
  }

  Result<AppendResult> append(std::string payload);
  Stats stats() const {
    std::lock_guard lock(mu_);
    Stats now = stats_;
    now.queued = queue_.size();
    return now;
  }

 private:
  // One caller's entry, on that caller's stack. Fields other than payload are guarded by mu_;
  // `result` is written by the sending thread before `done` is set under mu_, and read by the owner
  // only after it saw `done` under mu_.
  struct Waiter {
    std::string payload;
    std::condition_variable wake;
    bool taken = false;  // in a batch being sent
    bool done = false;
    std::optional<Result<AppendResult>> result;
  };

  // Takes a free lane and the oldest queued entries, sends them with mu_ released, completes them.
  // `self` is the calling thread's own Waiter (it is not waiting, so it needs no wake-up).
  void send_one_batch(std::unique_lock<std::mutex>& lock, const Waiter* self);
  // The RPC(s) for `batch` on `lane`, without mu_. Fills every waiter's result; returns RPCs made.
  std::uint64_t send(Client& lane, const std::vector<Waiter*>& batch);
  // Wakes the oldest queued caller other than `self` when a lane is free, so it sends the next batch.
  void hand_free_lane_to_queue(const Waiter* self) {
    if (free_lanes_.empty()) return;
    for (Waiter* waiter : queue_) {
      if (waiter == self) continue;
      waiter->wake.notify_one();
      return;  // visits at most two waiters: self and the one after it
    }
  }

  const ProducerOptions options_;
  const std::vector<std::unique_ptr<Client>> lanes_;

  mutable std::mutex mu_;
  std::deque<Waiter*> queue_;            // not yet taken, oldest first; <= max_queued_entries
  std::vector<std::size_t> free_lanes_;  // <= lanes_.size()
  Stats stats_;
};

Result<AppendResult> Producer::Impl::append(std::string payload) {
  Waiter me;
  me.payload = std::move(payload);
  std::unique_lock lock(mu_);
  if (queue_.size() >= options_.max_queued_entries) {
    return Status(StatusCode::kResourceExhausted,
                  "producer queue full: " + std::to_string(queue_.size()) +
                      " entries wait for a lane (bound " +
                      std::to_string(options_.max_queued_entries) + "); nothing was written");
  }
  queue_.push_back(&me);
  // Bounded: every pass either sends a batch (an RPC bounded by the lane's retry deadline, and it
  // removes at least one entry from the queue) or sleeps until a batch completes or a lane frees;
  // the entries ahead of ours are finite, so ours is taken and completed after finitely many passes.
  while (!me.done) {
    if (!me.taken && !free_lanes_.empty()) {
      send_one_batch(lock, &me);
      continue;
    }
    me.wake.wait(lock);
  }
  assert(me.result.has_value());
  return std::move(*me.result);
}

void Producer::Impl::send_one_batch(std::unique_lock<std::mutex>& lock, const Waiter* self) {
  assert(!free_lanes_.empty() && !queue_.empty());
  const std::size_t lane = free_lanes_.back();
  free_lanes_.pop_back();
  std::vector<Waiter*> batch;
  std::size_t batch_bytes = 0;
  while (!queue_.empty() && batch.size() < options_.max_batch_entries) {
    Waiter* next = queue_.front();
    // An entry larger than the byte bound still goes, alone, so that it gets the server's answer.
    if (!batch.empty() && batch_bytes + next->payload.size() > options_.max_batch_bytes) break;
    batch_bytes += next->payload.size();
    next->taken = true;
    batch.push_back(next);
    queue_.pop_front();
  }
  hand_free_lane_to_queue(self);  // more queued than one batch holds, and another lane is idle
  lock.unlock();
  const std::uint64_t rpcs = send(*lanes_[lane], batch);
  lock.lock();
  stats_.rpcs += rpcs;
  stats_.entries += batch.size();
  for (Waiter* waiter : batch) {
    waiter->done = true;
    // Under mu_: the owner cannot see `done` and destroy its Waiter before this notify returns.
    waiter->wake.notify_one();
  }
  free_lanes_.push_back(lane);
  hand_free_lane_to_queue(self);
}

std::uint64_t Producer::Impl::send(Client& lane, const std::vector<Waiter*>& batch) {
  // The payloads stay in their waiters until the outcome is known: a one-by-one resend needs them.
  std::vector<std::string> payloads;
  payloads.reserve(batch.size());
  for (const Waiter* waiter : batch) payloads.push_back(waiter->payload);
  Result<AppendResult> sent = lane.append(payloads);
  if (sent.ok()) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      AppendResult own = sent.value();
      own.first_index = sent->first_index + i;
      own.last_index = own.first_index;
      batch[i]->result = own;
    }
    return 1;
  }
  // INVALID_ARGUMENT means the server refused the whole request before proposing it (an entry too
  // large, too many entries for its bound): nothing was written, so each entry may go again on its
  // own and only the bad ones fail. Any other failure is shared by the whole batch.
  if (sent.status().code() != StatusCode::kInvalidArgument || batch.size() == 1) {
    for (Waiter* waiter : batch) waiter->result = sent.status();
    return 1;
  }
  for (Waiter* waiter : batch) waiter->result = lane.append({waiter->payload});
  return 1 + batch.size();
}

Result<std::unique_ptr<Producer>> Producer::create(ProducerOptions options) {
  if (std::string problem = validate_producer_options(options); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, "producer options: " + problem);
  }
  std::vector<std::unique_ptr<Client>> lanes;
  lanes.reserve(options.lanes);
  for (std::size_t i = 0; i < options.lanes; ++i) {
    auto created = Client::create(options.client);  // client_id 0: a random id per lane
    if (!created.ok()) return created.status();
    lanes.push_back(std::move(created).value());
  }
  return std::unique_ptr<Producer>(
      new Producer(std::make_unique<Impl>(std::move(options), std::move(lanes))));
}

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Producer::~Producer() = default;

Result<AppendResult> Producer::append(std::string payload) {
  return impl_->append(std::move(payload));
}

Producer::Stats Producer::stats() const { return impl_->stats(); }

}  // namespace raftlog::client

#include "client/shared_append_stream.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace raftlog::client::internal {
namespace {

// Plain futex calls rather than std::atomic::wait/notify, whose wait spins and calls sched_yield()
// four times before it sleeps (the store's flush waiters measured that, src/store/flush_waiters.cpp):
// with 64 appending threads on 2 cores those yields cost more than the sleep they try to avoid.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) {
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while `word` holds `expected`; spurious returns are fine (the caller re-checks).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_one(std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace

SharedAppendStream::SharedAppendStream(std::shared_ptr<grpc::Channel> channel,
                                       std::string endpoint, Clock::duration idle_close)
    : channel_(std::move(channel)), endpoint_(std::move(endpoint)), watchdog_(idle_close) {}

SharedAppendStream::~SharedAppendStream() {
  // The watchdog may be watching the idle call: stop that before the call goes.
  watchdog_.end_idle_watch();
  call_.reset();
}

std::uint64_t SharedAppendStream::exchanges() const {
  std::lock_guard lock(mu_);
  return exchanges_;
}

void SharedAppendStream::wake(Waiter& waiter) {
  waiter.wakes.fetch_add(1, std::memory_order_release);
  futex_wake_one(waiter.wakes);
}

StreamAppendOutcome SharedAppendStream::append(pb::AppendStreamRequest* request,
                                               Clock::time_point deadline,
                                               pb::AppendResponse* response) {
  auto me = std::make_shared<Waiter>();
  me->request = request;
  me->deadline = deadline;
  me->response = response;
  for (const std::string& payload : request->append().entries()) me->bytes += payload.size();
  std::unique_lock lock(mu_);
  queue_.push_back(me);
  // Bounded: each pass either waits for a wake-up (the writer sets done or hands over the writing
  // role, and the writer's exchange is bounded by its deadline) or runs one exchange.
  while (!me->done.load(std::memory_order_acquire)) {
    if (writing_ || me->taken) {
      // Read under mu_: a wake-up for a change made after this (done, or the writing role free)
      // bumps wakes afterwards, so the wait below cannot miss it.
      const std::uint32_t seen = me->wakes.load(std::memory_order_acquire);
      lock.unlock();
      futex_wait(me->wakes, seen);
      if (me->done.load(std::memory_order_acquire)) break;  // answered: mu_ is not needed
      lock.lock();
      continue;
    }
    writing_ = true;
    std::vector<WaiterPtr> to_wake;
    std::deque<WaiterPtr> batch = take_batch(&to_wake);
    lock.unlock();
    for (const WaiterPtr& waiter : to_wake) wake(*waiter);
    to_wake.clear();
    if (!batch.empty()) exchange(batch);
    lock.lock();
    writing_ = false;
    ++exchanges_;
    for (const WaiterPtr& waiter : batch) {
      waiter->done.store(true, std::memory_order_release);
      if (waiter != me) to_wake.push_back(waiter);
    }
    if (!queue_.empty()) to_wake.push_back(queue_.front());  // the next writer
    // Woken outside mu_, so that they do not wake only to wait for it; each WaiterPtr keeps its
    // Waiter alive even if its caller has returned meanwhile.
    lock.unlock();
    for (const WaiterPtr& waiter : to_wake) wake(*waiter);
    if (me->done.load(std::memory_order_acquire)) break;  // its own append was in the batch
    lock.lock();
  }
  return std::move(me->outcome);
}

std::deque<SharedAppendStream::WaiterPtr> SharedAppendStream::take_batch(
    std::vector<WaiterPtr>* to_wake) {
  // A call that has not heard the node announce several appends per message (new, or to an older
  // node) gets one message per append.
  const std::size_t max_appends = call_ != nullptr && call_->usable() &&
                                          call_->appends_per_message() > 1
                                      ? call_->appends_per_message()
                                      : kMaxOneAppendMessagesInFlight;
  const Clock::time_point now = Clock::now();
  std::deque<WaiterPtr> batch;
  std::size_t bytes = 0;
  while (!queue_.empty() && batch.size() < max_appends) {
    WaiterPtr waiter = queue_.front();
    if (now >= waiter->deadline) {
      // Not sent: arming the stream's watchdog with a past deadline would cut the others' appends.
      queue_.pop_front();
      waiter->taken = true;
      waiter->outcome = {Status(StatusCode::kDeadlineExceeded,
                                endpoint_ + ": the append waited for the shared append stream "
                                            "past its deadline"),
                         false};
      waiter->done.store(true, std::memory_order_release);
      to_wake->push_back(std::move(waiter));
      continue;
    }
    if (!batch.empty() && bytes + waiter->bytes > kMaxBytesPerMessage) break;
    queue_.pop_front();
    waiter->taken = true;
    bytes += waiter->bytes;
    batch.push_back(std::move(waiter));
  }
  return batch;
}

void SharedAppendStream::exchange(std::deque<WaiterPtr>& batch) {
  // Closed by the watchdog after being idle: open a new call rather than fail the batch on it.
  if (watchdog_.end_idle_watch()) call_.reset();
  if (call_ == nullptr || !call_->usable()) {
    call_.reset();
    call_ = std::make_unique<AppendStreamCall>(channel_, endpoint_, &watchdog_);
  }
  std::vector<pb::AppendStreamRequest*> requests;
  std::vector<pb::AppendResponse*> responses;
  requests.reserve(batch.size());
  responses.reserve(batch.size());
  Clock::time_point deadline = Clock::time_point::max();
  for (const WaiterPtr& waiter : batch) {
    requests.push_back(waiter->request);
    responses.push_back(waiter->response);
    deadline = std::min(deadline, waiter->deadline);
  }
  std::vector<StreamAppendOutcome> outcomes = call_->append_all(requests, deadline, responses);
  if (call_->usable()) watchdog_.watch_idle(call_->context());
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i]->outcome = std::move(outcomes[i]);
}

std::shared_ptr<SharedAppendStream> shared_append_stream(
    const std::string& key, const std::string& endpoint,
    const std::shared_ptr<grpc::Channel>& channel, Clock::duration idle_close) {
  // Never destroyed: it holds weak references only, and Clients may outlive static destruction.
  static auto* const mu = new std::mutex;
  static auto* const streams = new std::map<std::string, std::weak_ptr<SharedAppendStream>>;
  std::lock_guard lock(*mu);
  if (auto found = streams->find(key); found != streams->end()) {
    if (std::shared_ptr<SharedAppendStream> live = found->second.lock()) return live;
  }
  // Bounded by the streams alive: entries whose last holder went are dropped here.
  std::erase_if(*streams, [](const auto& entry) { return entry.second.expired(); });
  auto created = std::make_shared<SharedAppendStream>(channel, endpoint, idle_close);
  (*streams)[key] = created;
  return created;
}

}  // namespace raftlog::client::internal

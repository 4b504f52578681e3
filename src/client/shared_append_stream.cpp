#include "client/shared_append_stream.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace raftlog::client::internal {

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

StreamAppendOutcome SharedAppendStream::append(pb::AppendStreamRequest* request,
                                               Clock::time_point deadline,
                                               pb::AppendResponse* response) {
  Waiter me{request, deadline, response, 0, {}, false, false, {}};
  for (const std::string& payload : request->append().entries()) me.bytes += payload.size();
  std::unique_lock lock(mu_);
  queue_.push_back(&me);
  // Bounded: each pass either waits for a wake-up (the writer sets done or hands over the writing
  // role, and the writer's exchange is bounded by its deadline) or runs one exchange.
  while (!me.done) {
    if (writing_ || me.taken) {
      me.wake.wait(lock);
      continue;
    }
    writing_ = true;
    std::deque<Waiter*> batch = take_batch();
    lock.unlock();
    if (!batch.empty()) exchange(batch);
    lock.lock();
    writing_ = false;
    ++exchanges_;
    // Notified under mu_: a waiter that sees done may return and destroy its condition variable.
    for (Waiter* waiter : batch) {
      waiter->done = true;
      if (waiter != &me) waiter->wake.notify_one();
    }
    if (!queue_.empty()) queue_.front()->wake.notify_one();  // the next writer
  }
  return std::move(me.outcome);
}

std::deque<SharedAppendStream::Waiter*> SharedAppendStream::take_batch() {
  // A call that has not heard the node announce several appends per message (new, or to an older
  // node) gets one message per append.
  const std::size_t max_appends = call_ != nullptr && call_->usable() &&
                                          call_->appends_per_message() > 1
                                      ? call_->appends_per_message()
                                      : kMaxOneAppendMessagesInFlight;
  const Clock::time_point now = Clock::now();
  std::deque<Waiter*> batch;
  std::size_t bytes = 0;
  while (!queue_.empty() && batch.size() < max_appends) {
    Waiter* waiter = queue_.front();
    if (now >= waiter->deadline) {
      // Not sent: arming the stream's watchdog with a past deadline would cut the others' appends.
      queue_.pop_front();
      waiter->taken = true;
      waiter->done = true;
      waiter->outcome = {Status(StatusCode::kDeadlineExceeded,
                                endpoint_ + ": the append waited for the shared append stream "
                                            "past its deadline"),
                         false};
      waiter->wake.notify_one();
      continue;
    }
    if (!batch.empty() && bytes + waiter->bytes > kMaxBytesPerMessage) break;
    queue_.pop_front();
    waiter->taken = true;
    bytes += waiter->bytes;
    batch.push_back(waiter);
  }
  return batch;
}

void SharedAppendStream::exchange(std::deque<Waiter*>& batch) {
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
  for (Waiter* waiter : batch) {
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

#include "client/append_stream_call.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "api_errors/error_info.h"

namespace raftlog::client::internal {

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CallWatchdog::wake_if_later_than(Clock::time_point when) {
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { run(); });
  } else if (sleeping_until_ > when) {
    wake_.notify_one();
  }
}

void CallWatchdog::arm(grpc::ClientContext* context, Clock::time_point deadline) {
  std::lock_guard lock(mu_);
  armed_ = context;
  deadline_ = deadline;
  fired_ = false;
  // In a closed loop the thread sleeps until an earlier append's deadline, which is earlier than
  // this one: no wake-up. It is woken only when it would otherwise be late.
  wake_if_later_than(deadline);
}

bool CallWatchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = nullptr;
  idle_since_ = Clock::now();
  return fired_;
}

void CallWatchdog::watch_idle(grpc::ClientContext* context) {
  std::lock_guard lock(mu_);
  idle_context_ = context;
  idle_fired_ = false;
  wake_if_later_than(idle_since_ + idle_close_);
}

bool CallWatchdog::end_idle_watch() {
  std::lock_guard lock(mu_);
  idle_context_ = nullptr;
  const bool fired = idle_fired_;
  idle_fired_ = false;
  return fired;
}

void CallWatchdog::run() {
  std::unique_lock lock(mu_);
  // One iteration per wake-up; ends when the Client is destroyed. Cancelling under mu_ means
  // disarm()/end_idle_watch() cannot return (and the caller free the context) while it runs.
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    if (armed_ != nullptr && now >= deadline_) {
      armed_->TryCancel();
      armed_ = nullptr;
      fired_ = true;
      continue;
    }
    if (armed_ == nullptr && idle_context_ != nullptr && now >= idle_since_ + idle_close_) {
      idle_context_->TryCancel();
      idle_context_ = nullptr;
      idle_fired_ = true;
      continue;
    }
    sleeping_until_ = Clock::time_point::max();
    if (armed_ != nullptr) sleeping_until_ = deadline_;
    if (armed_ == nullptr && idle_context_ != nullptr) sleeping_until_ = idle_since_ + idle_close_;
    if (sleeping_until_ == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, sleeping_until_);
    }
    sleeping_until_ = Clock::time_point::max();
  }
}

AppendStreamCall::AppendStreamCall(const std::shared_ptr<grpc::Channel>& channel,
                                   std::string endpoint, CallWatchdog* watchdog)
    : endpoint_(std::move(endpoint)), watchdog_(watchdog) {
  // The call's headers go out with its first message rather than in a packet of their own.
  context_.set_initial_metadata_corked(true);
  stream_ = pb::Log::NewStub(channel)->AppendStream(&context_);
}

AppendStreamCall::~AppendStreamCall() {
  if (!failed_) {
    // Open and idle (the Client is going away or moving to another endpoint): cancel rather than
    // half-close, so the destructor never waits on the server.
    context_.TryCancel();
    (void)stream_->Finish();
  }
}

StreamAppendOutcome AppendStreamCall::append(pb::AppendStreamRequest* request,
                                             Clock::time_point deadline,
                                             pb::AppendResponse* response) {
  return std::move(append_all({request}, deadline, {response}).front());
}

namespace {

StreamAppendOutcome result_outcome(const std::string& endpoint, pb::AppendStreamResult* result,
                                   pb::AppendResponse* response) {
  if (result->code() != 0) {
    // A code outside gRPC's range (a foreign or broken server) is not trusted as one.
    const int code =
        result->code() > 0 && result->code() <= static_cast<int>(StatusCode::kUnauthenticated)
            ? result->code()
            : static_cast<int>(StatusCode::kUnknown);
    return {Status(static_cast<StatusCode>(code), endpoint + ": " + result->message(),
                   api_errors::from_wire(result->error_info())),
            false};
  }
  response->Swap(result->mutable_response());
  return {Status(), false};
}

}  // namespace

bool AppendStreamCall::write_requests(const std::vector<pb::AppendStreamRequest*>& requests) {
  if (requests.size() == 1) return stream_->Write(*requests.front());
  if (appends_per_message_ < requests.size()) {
    // A node that reads one append per message (or a caller over the bound): one message each.
    for (pb::AppendStreamRequest* request : requests) {
      if (!stream_->Write(*request)) return false;
    }
    return true;
  }
  // One message: the first append in its top-level fields, the others in `more`. The appends are
  // swapped in (no payload copies) and swapped back after the write.
  message_.set_request_id(requests.front()->request_id());
  message_.mutable_append()->Swap(requests.front()->mutable_append());
  for (std::size_t i = 1; i < requests.size(); ++i) {
    pb::AppendStreamItem* item = message_.add_more();
    item->set_request_id(requests[i]->request_id());
    item->mutable_append()->Swap(requests[i]->mutable_append());
  }
  const bool written = stream_->Write(message_);
  message_.mutable_append()->Swap(requests.front()->mutable_append());
  for (std::size_t i = 1; i < requests.size(); ++i) {
    message_.mutable_more(static_cast<int>(i - 1))
        ->mutable_append()
        ->Swap(requests[i]->mutable_append());
  }
  message_.mutable_more()->Clear();
  return written;
}

std::vector<StreamAppendOutcome> AppendStreamCall::append_all(
    const std::vector<pb::AppendStreamRequest*>& requests, Clock::time_point deadline,
    const std::vector<pb::AppendResponse*>& responses) {
  const std::size_t count = requests.size();
  std::vector<StreamAppendOutcome> outcomes(count);
  if (failed_) {
    for (StreamAppendOutcome& outcome : outcomes) {
      outcome = {Status(StatusCode::kUnavailable, endpoint_ + ": append stream already failed"),
                 true};
    }
    return outcomes;
  }
  // Consecutive ids: an answer's request_id - first_id is its request's position.
  const std::uint64_t first_id = next_request_id_;
  next_request_id_ += count;
  for (std::size_t i = 0; i < count; ++i) requests[i]->set_request_id(first_id + i);
  std::vector<bool> answered(count, false);
  std::size_t unanswered = count;
  const Clock::time_point started = Clock::now();
  watchdog_->arm(&context_, deadline);
  bool broken = !write_requests(requests);
  std::optional<StreamAppendOutcome> broken_outcome;
  while (!broken && unanswered > 0) {
    if (!stream_->Read(&answer_)) {
      broken = true;
      break;
    }
    if (answer_.max_appends_per_message() > 0) {
      appends_per_message_ = std::min<std::size_t>(answer_.max_appends_per_message(),
                                                    kMaxAppendsPerMessage);
    }
    for (pb::AppendStreamResult& result : *answer_.mutable_results()) {
      const std::uint64_t position = result.request_id() - first_id;  // wraps when below first_id
      if (result.request_id() < first_id || position >= count || answered[position]) {
        broken_outcome = protocol_error("answered request " + std::to_string(result.request_id()) +
                                        ", which is not in flight");
        break;
      }
      answered[position] = true;
      --unanswered;
      outcomes[position] = result_outcome(endpoint_, &result, responses[position]);
    }
    if (broken_outcome) break;
  }
  const bool deadline_passed = watchdog_->disarm();
  if (!broken_outcome && (broken || deadline_passed)) {
    const auto waited_ms = static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    // Answers read before the stream broke (or the watchdog cancelled it) stand; the rest share
    // the call's fate.
    broken_outcome = fail(deadline_passed, waited_ms);
  }
  if (broken_outcome) {
    for (std::size_t i = 0; i < count; ++i) {
      if (!answered[i]) outcomes[i] = *broken_outcome;
    }
  }
  return outcomes;
}

StreamAppendOutcome AppendStreamCall::protocol_error(const std::string& what) {
  context_.TryCancel();
  (void)stream_->Finish();
  failed_ = true;
  // A retry on a new stream is safe (same sequence number).
  return {Status(StatusCode::kUnavailable, endpoint_ + ": append stream " + what), true};
}

StreamAppendOutcome AppendStreamCall::fail(bool deadline_passed, std::uint32_t waited_ms) {
  failed_ = true;
  if (deadline_passed) {
    (void)stream_->Finish();
    return {Status(StatusCode::kDeadlineExceeded, endpoint_ +
                                                      ": no answer on the append stream within " +
                                                      std::to_string(waited_ms) + " ms"),
            true};
  }
  // The server ended the call (or the connection broke): its status says why.
  const grpc::Status status = stream_->Finish();
  if (status.ok()) {
    return {Status(StatusCode::kUnavailable, endpoint_ + ": the node closed the append stream"),
            true};
  }
  switch (status.error_code()) {
    case grpc::StatusCode::CANCELLED:  // by the node (e.g. its shutdown deadline passed)
    case grpc::StatusCode::INTERNAL:   // a reset stream, a proxy in between
    case grpc::StatusCode::UNKNOWN:
      // The append's outcome is unknown and the stream is gone: the Client handles that like any
      // UNAVAILABLE, by retrying with the same sequence number on a new stream.
      return {Status(StatusCode::kUnavailable,
                     endpoint_ + ": the append stream ended with " +
                         client::to_string(static_cast<StatusCode>(status.error_code())) + ": " +
                         status.error_message(),
                     api_errors::error_details(context_)),
              true};
    default:
      break;
  }
  return {Status(static_cast<StatusCode>(status.error_code()),
                 endpoint_ + ": " + status.error_message(), api_errors::error_details(context_)),
          true};
}

}  // namespace raftlog::client::internal

#include "client/append_stream_call.h"

#include <utility>

#include "client/error_info.h"

namespace raftlog::client::internal {

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CallWatchdog::arm(grpc::ClientContext* context, Clock::time_point deadline) {
  std::lock_guard lock(mu_);
  armed_ = context;
  deadline_ = deadline;
  fired_ = false;
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { run(); });
  } else if (idle_) {
    wake_.notify_one();
  }
  // Otherwise the thread sleeps until an earlier deadline of this Client (each arm() comes after
  // the previous disarm(), and deadlines are now + a fixed timeout), then re-reads deadline_.
  // A deadline earlier than the one it sleeps to (a shorter overall retry budget) fires late by at
  // most the difference: still bounded by the call timeout.
}

bool CallWatchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = nullptr;
  return fired_;
}

void CallWatchdog::run() {
  std::unique_lock lock(mu_);
  // One iteration per wake-up; ends when the Client is destroyed.
  while (!stopping_) {
    if (armed_ == nullptr) {
      idle_ = true;
      wake_.wait(lock);
      idle_ = false;
      continue;
    }
    if (Clock::now() >= deadline_) {
      // Under mu_: disarm() cannot return (and the caller free the context) while it runs.
      armed_->TryCancel();
      armed_ = nullptr;
      fired_ = true;
      continue;
    }
    wake_.wait_until(lock, deadline_);
  }
}

AppendStreamCall::AppendStreamCall(const std::shared_ptr<grpc::Channel>& channel, std::string endpoint,
                                   CallWatchdog* watchdog)
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

StreamAppendOutcome AppendStreamCall::append(pb::AppendStreamRequest* request, Clock::time_point deadline,
                                             pb::AppendResponse* response) {
  if (failed_) return {Status(StatusCode::kUnavailable, endpoint_ + ": append stream already failed"), true};
  const std::uint64_t request_id = next_request_id_++;
  request->set_request_id(request_id);
  const Clock::time_point started = Clock::now();
  watchdog_->arm(&context_, deadline);
  const bool exchanged = stream_->Write(*request) && stream_->Read(&answer_);
  const bool deadline_passed = watchdog_->disarm();
  const auto waited_ms =
      static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  if (!exchanged || deadline_passed) return fail(deadline_passed, waited_ms);
  // One append in flight, so the answer holds exactly its result.
  if (answer_.results_size() != 1 || answer_.results(0).request_id() != request_id) {
    context_.TryCancel();
    (void)stream_->Finish();
    failed_ = true;
    return {Status(StatusCode::kInternal, endpoint_ + ": append stream answered " +
                                              std::to_string(answer_.results_size()) +
                                              " result(s) not matching request " + std::to_string(request_id)),
            true};
  }
  pb::AppendStreamResult& result = *answer_.mutable_results(0);
  if (result.code() != 0) {
    ErrorDetails details;
    details.leader_id = result.error_info().leader_id();
    details.leader_address = result.error_info().leader_address();
    details.reason = result.error_info().reason();
    return {Status(static_cast<StatusCode>(result.code()), endpoint_ + ": " + result.message(), std::move(details)),
            false};
  }
  response->Swap(result.mutable_response());
  return {Status(), false};
}

StreamAppendOutcome AppendStreamCall::fail(bool deadline_passed, std::uint32_t waited_ms) {
  failed_ = true;
  if (deadline_passed) {
    (void)stream_->Finish();
    return {Status(StatusCode::kDeadlineExceeded,
                   endpoint_ + ": no answer on the append stream within " + std::to_string(waited_ms) + " ms"),
            true};
  }
  // The server ended the call (or the connection broke): its status says why.
  const grpc::Status status = stream_->Finish();
  if (status.ok()) {
    return {Status(StatusCode::kUnavailable, endpoint_ + ": the node closed the append stream"), true};
  }
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    // Cancelled by the node (e.g. its shutdown deadline passed): the append's outcome is unknown,
    // which the Client handles like any UNAVAILABLE, by retrying it with the same sequence.
    return {Status(StatusCode::kUnavailable, endpoint_ + ": the node cancelled the append stream: " + status.error_message(),
                   error_details(context_)),
            true};
  }
  return {Status(static_cast<StatusCode>(status.error_code()), endpoint_ + ": " + status.error_message(),
                 error_details(context_)),
          true};
}

}  // namespace raftlog::client::internal

#include "client/retry.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace raftlog::client::internal {

namespace {
// RESOURCE_EXHAUSTED with TOO_MANY_PENDING: a bound on the node's pending work, refused before anything
// was proposed; the same request succeeds once the node has caught up (docs/client-protocol.md).
bool is_too_many_pending(const Status& status) {
  return status.code() == StatusCode::kResourceExhausted && status.details() &&
         status.details()->reason == reason::kTooManyPending;
}

// Hard cap on attempts of one call, in case the deadline is huge and every attempt fails at once.
constexpr std::uint32_t kMaxAttemptsPerCall = 10000;
}  // namespace

std::chrono::system_clock::time_point to_system(Clock::time_point deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - Clock::now());
}

RetryEngine::RetryEngine(const Options& options, Endpoints* endpoints, std::uint64_t jitter_seed)
    : call_timeout_ms_(options.call_timeout_ms),
      retry_deadline_ms_(options.retry_deadline_ms),
      backoff_min_ms_(options.backoff_min_ms),
      backoff_max_ms_(options.backoff_max_ms),
      endpoints_(*endpoints),
      jitter_(static_cast<std::minstd_rand::result_type>(jitter_seed)) {}

void RetryEngine::set_call_deadline(grpc::ClientContext& context,
                                    Clock::time_point overall_deadline) const {
  const Clock::time_point call_deadline = Clock::now() + Milliseconds(call_timeout_ms_);
  context.set_deadline(to_system(std::min(call_deadline, overall_deadline)));
}

std::uint32_t RetryEngine::next_backoff_ms(std::uint32_t backoff_ms) const {
  return std::min(backoff_ms * 2, backoff_max_ms_);
}

Clock::duration RetryEngine::jittered(std::uint32_t backoff_ms) {
  std::lock_guard lock(jitter_mu_);
  std::uniform_int_distribution<std::uint32_t> extra(0, backoff_ms / 4);
  return Milliseconds(backoff_ms + extra(jitter_));
}

Status RetryEngine::run(std::string_view what, const Attempt& attempt, std::string* served_by) {
  return run(what, attempt, served_by, Clock::time_point::max());
}

Status RetryEngine::run(std::string_view what, const Attempt& attempt, std::string* served_by,
                        Clock::time_point overall_deadline) {
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline =
      std::min(started + Milliseconds(retry_deadline_ms_), overall_deadline);
  std::string target = endpoints_.preferred();
  std::uint32_t backoff_ms = backoff_min_ms_;
  bool previous_was_redirect = false;
  Status last(StatusCode::kDeadlineExceeded, "no attempt was made");
  std::uint32_t attempts = 0;
  while (attempts < kMaxAttemptsPerCall) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    ++attempts;
    grpc::ClientContext context;
    set_call_deadline(context, deadline);
    Status result = attempt(target, context);
    if (result.ok()) {
      endpoints_.set_preferred(target);
      if (served_by != nullptr) *served_by = target;
      return {};
    }
    last = std::move(result);
    if (last.code() != StatusCode::kUnavailable && last.code() != StatusCode::kDeadlineExceeded &&
        !is_leader_error(last) && !is_too_many_pending(last)) {
      return last;  // not retryable: the request itself is wrong or refused
    }
    std::string leader = redirect_target(last, target);
    const bool redirect = !leader.empty();
    if (redirect) {
      target = std::move(leader);
      endpoints_.set_preferred(target);
      if (!previous_was_redirect) {
        previous_was_redirect = true;
        continue;  // one hop straight to the named leader, no sleep
      }
    } else if (!is_too_many_pending(last)) {
      target = endpoints_.next_after(target);
    }
    // TOO_MANY_PENDING keeps the target: it is the leader asking for a pause, and another node would
    // cost a NOT_LEADER round trip back to it (and, for appends, a new AppendStream).
    previous_was_redirect = redirect;
    const Clock::duration remaining = deadline - Clock::now();
    std::this_thread::sleep_for(std::min(jittered(backoff_ms), remaining));
    backoff_ms = next_backoff_ms(backoff_ms);
  }
  const auto elapsed_ms = std::chrono::duration_cast<Milliseconds>(Clock::now() - started).count();
  return Status(StatusCode::kDeadlineExceeded,
                std::string(what) + ": gave up after " + std::to_string(attempts) +
                    " attempt(s) in " + std::to_string(elapsed_ms) + " ms (retry deadline " +
                    std::to_string(retry_deadline_ms_) + " ms); last error: " + last.to_string(),
                last.details());
}

}  // namespace raftlog::client::internal

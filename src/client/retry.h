// Internal to the client library: the retry engine. Runs one call's attempts until one succeeds,
// one fails for good, or the retry deadline passes, following leader hints in one hop and backing
// off between attempts (the rules are in client.h). Also the deadline and backoff arithmetic the
// tail's reconnects share.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "client/client.h"
#include "client/endpoints.h"

namespace raftlog::client::internal {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

// `deadline` on the system clock, which grpc::ClientContext::set_deadline takes.
std::chrono::system_clock::time_point to_system(Clock::time_point deadline);

class RetryEngine {
 public:
  // One attempt of a call to `endpoint`, on a fresh `context` whose deadline is already set.
  using Attempt = std::function<Status(const std::string& endpoint, grpc::ClientContext& context)>;

  // `endpoints` must outlive the engine; the jitter is seeded with `jitter_seed`.
  RetryEngine(const Options& options, Endpoints* endpoints, std::uint64_t jitter_seed);

  // Starts at the preferred endpoint and retries UNAVAILABLE, DEADLINE_EXCEEDED, NOT_LEADER /
  // NO_LEADER and TOO_MANY_PENDING (after a backoff); returns any other failure at once, and DEADLINE_EXCEEDED naming the attempts when the
  // retry deadline passes. On success the endpoint that answered becomes the preferred one and is
  // stored in `served_by` (may be null). `what` names the call in the give-up message.
  Status run(std::string_view what, const Attempt& attempt, std::string* served_by);
  // The same, but giving up by `overall_deadline` too when it comes before the retry deadline (a
  // command bounded as a whole: MembersClient::bound_by).
  Status run(std::string_view what, const Attempt& attempt, std::string* served_by,
             Clock::time_point overall_deadline);

  // call_timeout_ms from now, but not past `overall_deadline`.
  void set_call_deadline(grpc::ClientContext& context, Clock::time_point overall_deadline) const;

  // Backoff between attempts: starts at first_backoff_ms(), doubles up to backoff_max_ms, and each
  // sleep adds up to 25% jitter.
  std::uint32_t first_backoff_ms() const { return backoff_min_ms_; }
  std::uint32_t next_backoff_ms(std::uint32_t backoff_ms) const;
  Clock::duration jittered(std::uint32_t backoff_ms);

 private:
  const std::uint32_t call_timeout_ms_;
  const std::uint32_t retry_deadline_ms_;
  const std::uint32_t backoff_min_ms_;
  const std::uint32_t backoff_max_ms_;
  Endpoints& endpoints_;
  std::mutex jitter_mu_;
  std::minstd_rand jitter_;  // guarded by jitter_mu_
};

}  // namespace raftlog::client::internal

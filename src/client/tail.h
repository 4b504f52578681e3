// Internal to the client library: Client::tail(). Follows the log on one Log/Tail stream at a time;
// when a stream breaks or a node ends it, reconnects to the next endpoint after a backoff and
// resumes at the next undelivered index, so the callback sees each index once, in order (client.h).
#pragma once

#include <cstdint>

#include "client/channels.h"
#include "client/client.h"
#include "client/endpoints.h"
#include "client/retry.h"

namespace raftlog::client::internal {

// The connections, the address list and the backoff of the Client that tails; all outlive the call.
struct TailResources {
  Endpoints& endpoints;
  Channels& channels;
  RetryEngine& retry;
  std::uint32_t retry_deadline_ms;  // no working stream on any node for this long ends the tail
  std::uint32_t call_timeout_ms;    // a stream not accepted within this long is given up (tail.cpp)
};

Result<std::uint64_t> follow_log(const TailOptions& options, const TailCallback& on_entry,
                                 const TailResources& resources);

}  // namespace raftlog::client::internal

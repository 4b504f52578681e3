// Internal to the client library: the address list a Client works through. Which endpoint a call
// goes to first (the last one that answered or was named leader), which one is tried after a
// failure, and how an error's leader hint is read (leader discovery).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"

namespace raftlog::client::internal {

// Empty when `item` is a usable "host:port" (or "[ipv6]:port"), else a sentence naming the problem.
std::string endpoint_problem(std::string_view item);

// FAILED_PRECONDITION with reason NOT_LEADER or NO_LEADER: another node may take the call.
bool is_leader_error(const Status& status);

// The leader address a NOT_LEADER error names, when it names one other than `asked`; "" otherwise.
std::string redirect_target(const Status& status, const std::string& asked);

// The configured endpoints and the preferred one. Thread-safe.
class Endpoints {
 public:
  explicit Endpoints(std::vector<std::string> configured);  // not empty (validate_options)

  const std::vector<std::string>& configured() const { return configured_; }
  std::string preferred() const;
  void set_preferred(const std::string& endpoint);
  // The configured endpoint after `endpoint`, in list order. An endpoint not in the list (a leader
  // hint) is followed by the configured endpoints in turn.
  std::string next_after(const std::string& endpoint);

 private:
  const std::vector<std::string> configured_;
  mutable std::mutex mu_;
  std::string preferred_;               // guarded by mu_
  std::size_t round_robin_cursor_ = 0;  // guarded by mu_
};

}  // namespace raftlog::client::internal

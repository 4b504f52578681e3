#include "client/endpoints.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <set>
#include <utility>

namespace raftlog::client {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

}  // namespace

namespace internal {

std::string endpoint_problem(std::string_view item) {
  const std::string quoted = "endpoint \"" + std::string(item) + "\"";
  std::string_view host;
  std::string_view port;
  if (!item.empty() && item.front() == '[') {
    const auto close = item.find(']');
    if (close == std::string_view::npos || close + 1 >= item.size() || item[close + 1] != ':') {
      return quoted + " is not \"[ipv6]:port\"";
    }
    host = item.substr(1, close - 1);
    port = item.substr(close + 2);
  } else {
    const auto colon = item.rfind(':');
    if (colon == std::string_view::npos) return quoted + " has no port (expected host:port)";
    host = item.substr(0, colon);
    port = item.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return quoted + ": write IPv6 hosts as [addr]:port";
  }
  if (host.empty()) return quoted + " has no host";
  if (host.find_first_of(" \t,/") != std::string_view::npos)
    return quoted + " has a malformed host";
  std::uint32_t number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || number == 0 ||
      number > 65535) {
    return quoted + " has a bad port (expected 1..65535)";
  }
  return {};
}

bool is_leader_error(const Status& status) {
  const auto& details = status.details();
  return status.code() == StatusCode::kFailedPrecondition && details &&
         (details->reason == reason::kNotLeader || details->reason == reason::kNoLeader);
}

std::string redirect_target(const Status& status, const std::string& asked) {
  if (!is_leader_error(status) || status.details()->reason != reason::kNotLeader) return {};
  const std::string& leader = status.details()->leader_address;
  return leader == asked ? std::string() : leader;
}

Endpoints::Endpoints(std::vector<std::string> configured)
    : configured_(std::move(configured)), preferred_(configured_.front()) {}

std::string Endpoints::preferred() const {
  std::lock_guard lock(mu_);
  return preferred_;
}

void Endpoints::set_preferred(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  preferred_ = endpoint;
}

std::string Endpoints::next_after(const std::string& endpoint) {
  const auto found = std::find(configured_.begin(), configured_.end(), endpoint);
  std::lock_guard lock(mu_);
  if (found != configured_.end()) {
    return configured_[(static_cast<std::size_t>(found - configured_.begin()) + 1) %
                       configured_.size()];
  }
  return configured_[round_robin_cursor_++ % configured_.size()];
}

}  // namespace internal

Result<std::vector<std::string>> parse_endpoints(std::string_view text) {
  std::vector<std::string> endpoints;
  if (trim(text).empty())
    return Status(StatusCode::kInvalidArgument, "no endpoints given (expected host:port,...)");
  std::set<std::string> seen;
  std::size_t start = 0;
  // One iteration per comma-separated item; bounded by kMaxEndpoints.
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty())
      return Status(StatusCode::kInvalidArgument,
                    "empty item in endpoint list \"" + std::string(text) + "\"");
    if (std::string problem = internal::endpoint_problem(item); !problem.empty()) {
      return Status(StatusCode::kInvalidArgument, std::move(problem));
    }
    if (!seen.insert(std::string(item)).second) {
      return Status(StatusCode::kInvalidArgument,
                    "endpoint \"" + std::string(item) + "\" is listed twice");
    }
    if (endpoints.size() == kMaxEndpoints) {
      return Status(StatusCode::kInvalidArgument,
                    "more than " + std::to_string(kMaxEndpoints) + " endpoints");
    }
    endpoints.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return endpoints;
}

}  // namespace raftlog::client

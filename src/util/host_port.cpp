#include "util/host_port.h"

#include <charconv>

namespace raftlog::util {

std::string parse_host_port(std::string_view address, PortZero port_zero, HostPort* out) {
  std::string_view host;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    const std::size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return "is not of the form [ipv6]:port";
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const std::size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return "has no port (expected host:port)";
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return "has an IPv6 host without brackets (write [addr]:port)";
  }
  if (host.empty()) return "has no host (expected host:port)";
  if (host.find_first_of(" \t\r\n,/=[]") != std::string_view::npos) return "has a malformed host";
  const std::uint32_t min_port = port_zero == PortZero::kAllowed ? 0 : 1;
  const std::string range =
      "(expected " + std::to_string(min_port) + ".." + std::to_string(kMaxPort) + ")";
  if (port.empty()) return "has no port " + range;
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number, 10);
  if (end != port.data() + port.size() ||
      (error != std::errc() && error != std::errc::result_out_of_range)) {
    return "has a port that is not a number " + range;
  }
  if (error == std::errc::result_out_of_range || number < min_port || number > kMaxPort) {
    return "has port " + std::string(port) + " out of range " + range;
  }
  if (out != nullptr) *out = HostPort{host, static_cast<std::uint32_t>(number)};
  return "";
}

bool is_wildcard_host(std::string_view host) {
  return host == "0.0.0.0" || host == "::" || host == "*" || host == "0:0:0:0:0:0:0:0";
}

}  // namespace raftlog::util

// "HOST:PORT" addresses as raftlogd's flags and NodeConfig take them: a non-empty host (an IPv6
// address in brackets, "[::1]:7001") and a decimal port in 1..65535 (0 only where a caller allows
// "any free port"). Only the syntax is checked; whether the host resolves is learnt when binding
// or dialling.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace raftlog::util {

enum class PortZero {
  kRefused,  // an address others dial (a member) or one whose port must be known in advance
  kAllowed,  // a listener whose bound port is reported afterwards (port 0 = any free port)
};

struct HostPort {
  std::string_view host;  // without the brackets of an IPv6 address; points into the parsed text
  std::uint32_t port = 0;
};

inline constexpr std::uint32_t kMaxPort = 65535;

// Empty and `*out` filled when `address` is well formed; otherwise what is wrong with it (a phrase
// such as "has no port", to follow the quoted address in a message). `out` may be nullptr.
std::string parse_host_port(std::string_view address, PortZero port_zero, HostPort* out);

// True when `host` (as HostPort::host, without brackets) is a wildcard ("0.0.0.0", "::", "*"):
// binding it takes the port on every interface.
bool is_wildcard_host(std::string_view host);

}  // namespace raftlog::util

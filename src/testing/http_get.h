// A minimal HTTP/1.0 GET over loopback for tests (scraping /metrics); no dependency beyond sockets.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace raftlog::testing {

// GETs http://<address><path> ("127.0.0.1:port", "/metrics"). The response body on status 200;
// nullopt on a connection error, another status, a response over `max_bytes`, or after `timeout`.
std::optional<std::string> http_get(const std::string& address, const std::string& path,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                    std::size_t max_bytes = 16 << 20);

}  // namespace raftlog::testing

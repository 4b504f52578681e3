#include "testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace raftlog::testing {

std::optional<std::string> http_get(const std::string& address, const std::string& path,
                                    std::chrono::milliseconds timeout, std::size_t max_bytes) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1)
    return std::nullopt;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return std::nullopt;
  const std::string request =
      "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string response;
  char buffer[16384];
  for (;;) {  // bounded by max_bytes and the deadline
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    response.append(buffer, static_cast<std::size_t>(n));
    if (response.size() > max_bytes) return std::nullopt;
  }
  const auto header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) return std::nullopt;
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) return std::nullopt;
  return response.substr(header_end + 4);
}

}  // namespace raftlog::testing

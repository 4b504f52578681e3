#include "testing/loopback_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace raftlog::testing {
HeldLoopbackPort::HeldLoopbackPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd_);
    throw std::runtime_error("bind() to a loopback port failed");
  }
  port_ = ntohs(address.sin_port);
}

HeldLoopbackPort::~HeldLoopbackPort() {
  if (fd_ >= 0) ::close(fd_);
}

HeldLoopbackPort::HeldLoopbackPort(HeldLoopbackPort&& other) noexcept
    : fd_(other.fd_), port_(other.port_) {
  other.fd_ = -1;
}

int free_loopback_port() { return HeldLoopbackPort().port(); }

std::vector<int> distinct_free_loopback_ports(int count) {
  std::vector<HeldLoopbackPort> held;
  held.reserve(static_cast<std::size_t>(count > 0 ? count : 0));
  std::vector<int> ports;
  for (int picked = 0; picked < count; ++picked) {
    held.emplace_back();
    ports.push_back(held.back().port());
  }
  return ports;  // `held` closes every socket only now
}

}  // namespace raftlog::testing

// Free ports on 127.0.0.1 for tests that must know an address before its server exists (peer lists,
// a node that starts later, a dead endpoint where nothing listens).
#pragma once

#include <vector>

namespace raftlog::testing {

// A port on 127.0.0.1 held bound (not listening) for the object's life: connections to it are
// refused, and no other socket can take it meanwhile. Throws std::runtime_error when a socket
// cannot be made or bound.
class HeldLoopbackPort {
 public:
  HeldLoopbackPort();
  ~HeldLoopbackPort();
  HeldLoopbackPort(HeldLoopbackPort&& other) noexcept;
  HeldLoopbackPort(const HeldLoopbackPort&) = delete;
  HeldLoopbackPort& operator=(const HeldLoopbackPort&) = delete;
  HeldLoopbackPort& operator=(HeldLoopbackPort&&) = delete;

  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// A port that was free a moment ago: bound to port 0, read back, released. Another process could
// take it in between. Two calls may return the same port (the kernel can hand a released port out
// again), so a test that needs several ports at once asks distinct_free_loopback_ports.
int free_loopback_port();

// `count` ports that were free a moment ago and differ from each other: every socket stays bound
// until the last port is read, so the kernel cannot hand one out twice. (Picked one by one, two of
// a cluster's nodes once got the same port, and the cluster refused the second as ADDRESS_IN_USE.)
// Throws std::runtime_error when a socket cannot be made or bound.
std::vector<int> distinct_free_loopback_ports(int count);

}  // namespace raftlog::testing

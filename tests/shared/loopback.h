// Loopback helpers for the gRPC tests (tests/server, tests/client): free ports on 127.0.0.1 and a
// started grpc::Server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <string>
#include <vector>

namespace raftlog::testing {

// A port on 127.0.0.1 that was free a moment ago: bound to port 0, read back, closed. Used where the
// address must be known before the server exists (peer lists, a peer that starts later, a dead
// endpoint: nothing listens there, so connections are refused).
inline int pick_free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    socklen_t length = sizeof(address);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
      port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

inline std::string loopback_address(int port) { return "127.0.0.1:" + std::to_string(port); }

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address() const { return loopback_address(port); }
  void shutdown() {
    if (server) {
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server->Wait();
      server.reset();
    }
  }
};

// Starts a server on 127.0.0.1:`port` (0 = any free port) with `services`.
inline StartedServer start_server(const std::vector<grpc::Service*>& services, int port = 0,
                                  int max_receive_bytes = 0) {
  grpc::ServerBuilder builder;
  StartedServer started;
  builder.AddListeningPort(loopback_address(port), grpc::InsecureServerCredentials(),
                           &started.port);
  if (max_receive_bytes > 0) builder.SetMaxReceiveMessageSize(max_receive_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  started.server = builder.BuildAndStart();
  EXPECT_TRUE(started.server != nullptr) << "could not start a gRPC server on port " << port;
  EXPECT_NE(started.port, 0);
  return started;
}

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
template <typename Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

}  // namespace raftlog::testing

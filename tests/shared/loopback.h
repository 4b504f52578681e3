// Loopback helpers for the gRPC tests (tests/server, tests/client): free ports on 127.0.0.1 and a
// started grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "testing/loopback_ports.h"

namespace raftlog::testing {

// A port on 127.0.0.1 that was free a moment ago (testing/loopback_ports.h). Used where the address
// must be known before the server exists; several at once: distinct_free_loopback_ports.
inline int pick_free_loopback_port() { return free_loopback_port(); }

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

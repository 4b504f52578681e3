// Uses the installed client library: parses endpoints and creates a client (no server needed; the
// connection is lazy). Prints "ok N" with the endpoint count, or the error and exit 1.
#include <client/client.h>

#include <iostream>

int main() {
  auto endpoints = raftlog::client::parse_endpoints("127.0.0.1:7001,127.0.0.1:7002");
  if (!endpoints.ok()) {
    std::cerr << endpoints.status().message() << "\n";
    return 1;
  }
  raftlog::client::Options options;
  options.endpoints = endpoints.value();
  auto client = raftlog::client::Client::create(options);
  if (!client.ok()) {
    std::cerr << client.status().message() << "\n";
    return 1;
  }
  std::cout << "ok " << options.endpoints.size() << "\n";
  return 0;
}

// raftlog-bench's minimal NATS client against a scripted fake server on 127.0.0.1: the handshake
// (INFO, CONNECT, PING/PONG), SUB/PUB framing, MSG parsing with the server's PINGs in between,
// skipping replies meant for other inboxes, and clear errors for -ERR, a non-NATS peer and timeouts.
#include "nats_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace raftlog::bench {
namespace {

using namespace std::chrono_literals;

// Listens on an ephemeral loopback port; `script` runs on a thread with the accepted socket.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(FakeServer&, int)> script) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    EXPECT_EQ(::listen(listener_, 1), 0);
    thread_ = std::thread([this, script] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      script(*this, fd);
      ::close(fd);
    });
  }
  ~FakeServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  static void send_text(int fd, const std::string& text) {
    ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(text.size()));
  }
  // Reads until `marker` has been received (bounded by 5 s); returns everything read so far.
  std::string read_until(int fd, const std::string& marker) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (received_.find(marker) == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      char chunk[4096];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      received_.append(chunk, static_cast<std::size_t>(n));
    }
    return received_;
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string received_;
};

TEST(NatsClient, HandshakePublishAndAReplyAfterPingsAndStaleMessages) {
  std::string seen;
  {  // the server thread has finished (joined) when this scope ends, so `seen` is complete
    FakeServer server([&](FakeServer& s, int fd) {
      FakeServer::send_text(fd, "INFO {\"server_id\":\"fake\",\"max_payload\":1048576}\r\n");
      s.read_until(fd, "PING\r\n");
      FakeServer::send_text(fd, "+OK\r\nPONG\r\n");
      s.read_until(fd, "hello\r\n");  // SUB and the PUB with its payload
      FakeServer::send_text(fd,
                            "PING\r\nMSG _INBOX.t.0 7 5\r\nstale\r\nMSG _INBOX.t.1 7 22\r\n"
                            "{\"stream\":\"S\",\"seq\":9}\r\n");
      seen = s.read_until(fd, "PONG\r\n");
    });
    std::string error;
    auto connection = NatsConnection::connect(server.endpoint(), 2000ms, &error);
    ASSERT_NE(connection, nullptr) << error;
    ASSERT_TRUE(connection->subscribe("_INBOX.t.*", "7", &error)) << error;
    std::string reply;
    ASSERT_TRUE(connection->request("S", "_INBOX.t.1", "hello", 2000ms, &reply, &error)) << error;
    EXPECT_EQ(reply, "{\"stream\":\"S\",\"seq\":9}");
    connection.reset();
  }
  EXPECT_NE(seen.find("CONNECT {"), std::string::npos);
  EXPECT_NE(seen.find("SUB _INBOX.t.* 7\r\n"), std::string::npos);
  EXPECT_NE(seen.find("PUB S _INBOX.t.1 5\r\nhello\r\n"), std::string::npos);
  EXPECT_NE(seen.find("PONG\r\n"), std::string::npos);  // the server's PING was answered
}

TEST(NatsClient, RefusedConnectAndNonNatsPeerGiveClearErrors) {
  {
    FakeServer server([](FakeServer& s, int fd) {
      FakeServer::send_text(fd, "INFO {}\r\n");
      s.read_until(fd, "PING\r\n");
      FakeServer::send_text(fd, "-ERR 'Authorization Violation'\r\n");
    });
    std::string error;
    EXPECT_EQ(NatsConnection::connect(server.endpoint(), 2000ms, &error), nullptr);
    EXPECT_NE(error.find("Authorization Violation"), std::string::npos) << error;
  }
  {
    FakeServer server(
        [](FakeServer&, int fd) { FakeServer::send_text(fd, "HTTP/1.1 400 Bad Request\r\n"); });
    std::string error;
    EXPECT_EQ(NatsConnection::connect(server.endpoint(), 2000ms, &error), nullptr);
    EXPECT_NE(error.find("did not greet with INFO"), std::string::npos) << error;
  }
  std::string error;
  EXPECT_EQ(NatsConnection::connect("no-port", 100ms, &error), nullptr);
  EXPECT_NE(error.find("host:port"), std::string::npos) << error;
}

TEST(NatsClient, ARequestWithoutReplyTimesOut) {
  FakeServer server([](FakeServer& s, int fd) {
    FakeServer::send_text(fd, "INFO {}\r\n");
    s.read_until(fd, "PING\r\n");
    FakeServer::send_text(fd, "PONG\r\n");
    s.read_until(fd, "never answered\r\n");
    s.read_until(fd,
                 "no such marker");  // holds the connection until the client gives up and closes
  });
  std::string error;
  auto connection = NatsConnection::connect(server.endpoint(), 2000ms, &error);
  ASSERT_NE(connection, nullptr) << error;
  std::string reply;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(connection->request("S", "_INBOX.t.1", "never answered", 200ms, &reply, &error));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
}

}  // namespace
}  // namespace raftlog::bench

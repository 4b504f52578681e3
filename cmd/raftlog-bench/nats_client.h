// A minimal NATS client (the text protocol over TCP: INFO, CONNECT, PING/PONG, SUB, PUB, MSG, -ERR),
// enough for `raftlog-bench nats` to publish to a JetStream stream and wait for each publish's
// acknowledgement, the way a JetStream producer does. Blocking sockets, one thread per connection;
// every wait has a deadline. Not a general client: no TLS, no headers (HMSG), no reconnects.
// Why our own: Debian 12 packages no C NATS client, and the comparison must not depend on one.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace raftlog::bench {

struct NatsMessage {
  std::string subject;
  std::string payload;
};

class NatsConnection {
 public:
  // A MSG payload or a protocol line longer than this ends the connection with an error (bounds the
  // read buffer; a JetStream ack is about 50 bytes).
  static constexpr std::size_t kMaxIncomingBytes = 1 << 20;

  // Connects to "host:port" (an IPv4 address or "localhost"), reads INFO, sends CONNECT and a PING and
  // waits for the PONG (so a server that refuses the CONNECT is noticed here). Null with *error set.
  static std::unique_ptr<NatsConnection> connect(const std::string& endpoint,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* error);
  ~NatsConnection();
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;

  bool subscribe(std::string_view subject, std::string_view sid, std::string* error);
  bool publish(std::string_view subject, std::string_view reply_to, std::string_view payload,
               std::string* error);
  // The next MSG (answering the server's PINGs on the way), or false on timeout, -ERR or a closed
  // connection, with *error set.
  bool next_message(std::chrono::milliseconds timeout, NatsMessage* message, std::string* error);
  // Publishes with reply subject `inbox` (already subscribed) and waits for the message sent to it;
  // messages for other subjects (late replies to earlier requests) are skipped.
  bool request(std::string_view subject, std::string_view inbox, std::string_view payload,
               std::chrono::milliseconds timeout, std::string* reply, std::string* error);

 private:
  explicit NatsConnection(int fd) : fd_(fd) {}
  bool send_all(std::string_view bytes, std::string* error);
  // Reads until `buffer_` holds a "\r\n"-terminated line; returns it without the terminator.
  bool read_line(std::chrono::steady_clock::time_point deadline, std::string* line,
                 std::string* error);
  bool read_exactly(std::size_t count, std::chrono::steady_clock::time_point deadline,
                    std::string* out, std::string* error);
  bool fill(std::chrono::steady_clock::time_point deadline, std::string* error);

  int fd_;
  std::string buffer_;  // received, not yet parsed; <= kMaxIncomingBytes + one read
};

}  // namespace raftlog::bench

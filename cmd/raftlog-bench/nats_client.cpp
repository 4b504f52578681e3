#include "nats_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunkBytes = 64 << 10;

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> parts;
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    const std::size_t start = at;
    while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
    if (at > start) parts.push_back(line.substr(start, at - start));
  }
  return parts;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::unique_ptr<NatsConnection> NatsConnection::connect(const std::string& endpoint,
                                                        std::chrono::milliseconds timeout,
                                                        std::string* error) {
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) {
    *error = "endpoint " + endpoint + " is not host:port";
    return nullptr;
  }
  std::string host = endpoint.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  int port = 0;
  const std::string port_text = endpoint.substr(colon + 1);
  auto [end, parse_error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (parse_error != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
      port > 65535 || inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    *error = "endpoint " + endpoint + " needs an IPv4 address and a port";
    return nullptr;
  }
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<NatsConnection> connection(new NatsConnection(fd));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    *error = "connect to " + endpoint + ": " + std::strerror(errno);
    return nullptr;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // one small publish per round trip
  const auto deadline = Clock::now() + timeout;
  std::string line;
  if (!connection->read_line(deadline, &line, error)) return nullptr;
  if (!starts_with(line, "INFO ")) {
    *error = endpoint +
             " did not greet with INFO (is a NATS server listening there?): " + line.substr(0, 80);
    return nullptr;
  }
  const std::string hello =
      "CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"raftlog-bench\",\"lang\":\"cpp\","
      "\"version\":\"1\",\"protocol\":1,\"headers\":false}\r\nPING\r\n";
  if (!connection->send_all(hello, error)) return nullptr;
  // Bounded: each line is read before the deadline; the server answers our PING with PONG.
  while (true) {
    if (!connection->read_line(deadline, &line, error)) return nullptr;
    if (line == "PONG") return connection;
    if (starts_with(line, "-ERR")) {
      *error = endpoint + " refused CONNECT: " + line;
      return nullptr;
    }
    if (line == "PING" && !connection->send_all("PONG\r\n", error)) return nullptr;
  }
}

NatsConnection::~NatsConnection() { ::close(fd_); }

bool NatsConnection::subscribe(std::string_view subject, std::string_view sid, std::string* error) {
  std::string command = "SUB ";
  command.append(subject).append(" ").append(sid).append("\r\n");
  return send_all(command, error);
}

bool NatsConnection::publish(std::string_view subject, std::string_view reply_to,
                             std::string_view payload, std::string* error) {
  std::string command = "PUB ";
  command.append(subject);
  if (!reply_to.empty()) command.append(" ").append(reply_to);
  command.append(" ").append(std::to_string(payload.size())).append("\r\n");
  command.append(payload).append("\r\n");
  return send_all(command, error);
}

bool NatsConnection::next_message(std::chrono::milliseconds timeout, NatsMessage* message,
                                  std::string* error) {
  const auto deadline = Clock::now() + timeout;
  std::string line;
  // Bounded by the deadline: every read_line waits at most until then.
  while (true) {
    if (!read_line(deadline, &line, error)) return false;
    if (line == "PING") {
      if (!send_all("PONG\r\n", error)) return false;
      continue;
    }
    if (line == "PONG" || line == "+OK" || starts_with(line, "INFO ")) continue;
    if (starts_with(line, "-ERR")) {
      *error = "server error: " + line;
      return false;
    }
    if (!starts_with(line, "MSG ")) {
      *error = "unexpected protocol line: " + line.substr(0, 80);
      return false;
    }
    // MSG <subject> <sid> [reply-to] <#bytes>
    const std::vector<std::string_view> parts = split_spaces(line);
    std::size_t size = 0;
    const std::string_view size_text = parts.back();
    auto [end, parse_error] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
    if ((parts.size() != 4 && parts.size() != 5) || parse_error != std::errc() ||
        end != size_text.data() + size_text.size() || size > kMaxIncomingBytes) {
      *error = "malformed MSG line: " + line.substr(0, 80);
      return false;
    }
    message->subject = std::string(parts[1]);
    std::string payload_and_crlf;
    if (!read_exactly(size + 2, deadline, &payload_and_crlf, error)) return false;
    if (payload_and_crlf.compare(size, 2, "\r\n") != 0) {
      *error = "MSG payload not followed by CRLF";
      return false;
    }
    payload_and_crlf.resize(size);
    message->payload = std::move(payload_and_crlf);
    return true;
  }
}

bool NatsConnection::request(std::string_view subject, std::string_view inbox,
                             std::string_view payload, std::chrono::milliseconds timeout,
                             std::string* reply, std::string* error) {
  const auto deadline = Clock::now() + timeout;
  if (!publish(subject, inbox, payload, error)) return false;
  NatsMessage message;
  // Bounded by the deadline; replies to earlier (timed-out) requests are skipped.
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      *error = "no reply on " + std::string(inbox) + " within " + std::to_string(timeout.count()) +
               " ms";
      return false;
    }
    if (!next_message(left, &message, error)) return false;
    if (message.subject == inbox) {
      *reply = std::move(message.payload);
      return true;
    }
  }
}

bool NatsConnection::send_all(std::string_view bytes, std::string* error) {
  // Bounded: every successful send makes progress; EINTR retries at most once per signal.
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      *error = std::string("send: ") + std::strerror(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

bool NatsConnection::fill(Clock::time_point deadline, std::string* error) {
  if (buffer_.size() > kMaxIncomingBytes + 2) {
    *error = "incoming protocol data exceeds " + std::to_string(kMaxIncomingBytes) + " bytes";
    return false;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) {
    *error = "timed out waiting for the server";
    return false;
  }
  pollfd waiting{fd_, POLLIN, 0};
  const int ready = ::poll(&waiting, 1, static_cast<int>(left));
  if (ready == 0) {
    *error = "timed out waiting for the server";
    return false;
  }
  if (ready < 0) {
    if (errno == EINTR) return true;
    *error = std::string("poll: ") + std::strerror(errno);
    return false;
  }
  char chunk[kReadChunkBytes];
  const ssize_t received = ::recv(fd_, chunk, sizeof chunk, 0);
  if (received == 0) {
    *error = "the server closed the connection";
    return false;
  }
  if (received < 0) {
    if (errno == EINTR || errno == EAGAIN) return true;
    *error = std::string("recv: ") + std::strerror(errno);
    return false;
  }
  buffer_.append(chunk, static_cast<std::size_t>(received));
  return true;
}

bool NatsConnection::read_line(Clock::time_point deadline, std::string* line, std::string* error) {
  // Bounded: fill() fails at the deadline or when the buffer outgrows its bound.
  while (true) {
    const std::size_t end = buffer_.find("\r\n");
    if (end != std::string::npos) {
      line->assign(buffer_, 0, end);
      buffer_.erase(0, end + 2);
      return true;
    }
    if (!fill(deadline, error)) return false;
  }
}

bool NatsConnection::read_exactly(std::size_t count, Clock::time_point deadline, std::string* out,
                                  std::string* error) {
  // Bounded: as read_line.
  while (buffer_.size() < count) {
    if (!fill(deadline, error)) return false;
  }
  out->assign(buffer_, 0, count);
  buffer_.erase(0, count);
  return true;
}

}  // namespace raftlog::bench

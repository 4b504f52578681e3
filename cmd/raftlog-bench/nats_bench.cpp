#include "nats_bench.h"

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/client.h"
#include "closed_loop.h"
#include "nats_client.h"
#include "report.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMaxPayloadBytes = 1 << 20;  // NATS's default max_payload
constexpr std::uint64_t kMaxCallTimeoutMs = 60'000;
constexpr std::chrono::milliseconds kConnectTimeout{5000};
// A fresh JetStream cluster needs a few seconds to elect its meta leader; stream creation is retried
// until then.
constexpr std::chrono::seconds kStreamCreateDeadline{30};

bool is_stream_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

// Creates the stream (or finds it already there). The JetStream API answers with JSON; the fields
// used are "error" (with "err_code" 10058: a stream of that name exists) and "config".
bool create_stream(const std::string& endpoint, const std::string& stream, std::uint64_t replicas,
                   std::string_view command, const cli::Io& io) {
  const std::string config =
      "{\"name\":\"" + stream + "\",\"subjects\":[\"" + stream +
      "\"],\"storage\":\"file\",\"num_replicas\":" + std::to_string(replicas) +
      ",\"retention\":\"limits\",\"discard\":\"old\",\"max_bytes\":4294967296}";
  const auto give_up = Clock::now() + kStreamCreateDeadline;
  std::string last_error;
  // Bounded by kStreamCreateDeadline: one attempt per 500 ms at most.
  while (Clock::now() < give_up) {
    std::string error;
    auto connection = NatsConnection::connect(endpoint, kConnectTimeout, &error);
    std::string reply;
    if (connection && connection->subscribe("_INBOX.raftlog-bench.setup", "1", &error) &&
        connection->request("$JS.API.STREAM.CREATE." + stream, "_INBOX.raftlog-bench.setup", config,
                            std::chrono::milliseconds(5000), &reply, &error)) {
      if (reply.find("\"error\"") == std::string::npos || reply.find("10058") != std::string::npos)
        return true;
      error = "JetStream answered " + reply.substr(0, 200);
    }
    last_error = error;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  io.err << command << ": cannot create JetStream stream " << stream << " through " << endpoint
         << " within " << kStreamCreateDeadline.count() << " s: " << last_error << "\n";
  return false;
}

// One closed-loop client: its own connection and inbox; each call publishes one message and waits
// for the stream's acknowledgement.
class Publisher {
 public:
  Publisher(std::unique_ptr<NatsConnection> connection, std::string subject,
            std::string inbox_prefix, std::string payload, std::chrono::milliseconds timeout)
      : connection_(std::move(connection)),
        subject_(std::move(subject)),
        inbox_prefix_(std::move(inbox_prefix)),
        payload_(std::move(payload)),
        timeout_(timeout) {}

  bool publish_and_wait() {
    std::string reply;
    std::string error;
    const std::string inbox = inbox_prefix_ + std::to_string(++calls_);
    if (!connection_->request(subject_, inbox, payload_, timeout_, &reply, &error)) return false;
    return reply.find("\"seq\"") != std::string::npos &&
           reply.find("\"error\"") == std::string::npos;
  }

 private:
  std::unique_ptr<NatsConnection> connection_;
  const std::string subject_;
  const std::string inbox_prefix_;
  const std::string payload_;
  const std::chrono::milliseconds timeout_;
  std::uint64_t calls_ = 0;
};

}  // namespace

int run_nats_command(std::string_view command_path, std::span<const std::string> args,
                     const cli::Io& io) {
  std::string endpoints_text;
  std::string server_pids_text;
  std::string stream = "RAFTLOGBENCH";
  std::uint64_t clients = 64;
  std::uint64_t payload_size = 1024;
  std::uint64_t duration_s = 10;
  std::uint64_t replicas = 3;
  std::uint64_t call_timeout_ms = 10'000;
  cli::FlagSet flags(
      std::string(command_path),
      "Closed-loop NATS JetStream publish load, the same loop as `raftlog-bench cluster`: N "
      "clients, each publishing a BYTES-byte message and waiting for the stream's "
      "acknowledgement. Client i connects to endpoint i mod (number of endpoints).");
  flags.string_flag("endpoints", &endpoints_text, "HOST:PORT,...", "NATS client addresses (IPv4)");
  flags.string_flag("stream", &stream, "NAME",
                    "JetStream stream (and subject) to create and publish to");
  flags.uint_flag("replicas", &replicas, "R",
                  "stream replicas (1..5; 3 matches raftlog's majority of 3)");
  flags.uint_flag("clients", &clients, "N", "concurrent clients, each with its own connection");
  flags.bytes_flag("entry-size", &payload_size, "BYTES", "payload bytes per message");
  flags.uint_flag("duration", &duration_s, "SECONDS", "how long to run");
  flags.uint_flag("call-timeout-ms", &call_timeout_ms, "MS",
                  "deadline of one publish acknowledgement");
  flags.string_flag("server-pids", &server_pids_text, "PID,...",
                    "report CPU seconds and RSS of these server processes over the run");
  flags.require("endpoints");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (clients == 0 || clients > kMaxLoadClients || payload_size == 0 ||
      payload_size > kMaxPayloadBytes || duration_s == 0 || duration_s > kMaxLoadDurationS ||
      call_timeout_ms == 0 || call_timeout_ms > kMaxCallTimeoutMs || replicas == 0 ||
      replicas > 5 || !is_stream_name(stream)) {
    io.err << command_path << ": need 1 <= clients <= " << kMaxLoadClients
           << ", 1 <= entry-size <= " << kMaxPayloadBytes
           << ", 1 <= duration <= " << kMaxLoadDurationS
           << ", 1 <= call-timeout-ms <= " << kMaxCallTimeoutMs
           << ", 1 <= replicas <= 5 and a stream name of [A-Za-z0-9_-]{1,64}\n";
    return cli::kExitUsage;
  }
  auto endpoints = client::parse_endpoints(endpoints_text);
  if (!endpoints.ok()) {
    io.err << command_path << ": --endpoints: " << endpoints.status().message() << "\n";
    return cli::kExitUsage;
  }
  std::optional<ClosedLoopOptions> load_options = make_closed_loop_options(
      clients, duration_s, 1, payload_size, server_pids_text, command_path, io.err);
  if (!load_options) return cli::kExitUsage;
  if (!create_stream(endpoints.value().front(), stream, replicas, command_path, io))
    return cli::kExitFailure;

  const auto timeout = std::chrono::milliseconds(call_timeout_ms);
  const ClosedLoopResult result = run_closed_loop(
      *load_options,
      [&](std::uint64_t c) -> ClientCall {
        const std::string& endpoint = endpoints.value()[c % endpoints->size()];
        std::string error;
        auto connection = NatsConnection::connect(endpoint, kConnectTimeout, &error);
        const std::string inbox_prefix = "_INBOX.raftlog-bench." + std::to_string(c) + ".";
        if (!connection ||
            !connection->subscribe(inbox_prefix + "*", std::to_string(c + 1), &error)) {
          io.err << "client " << c << ": " << error << "\n";
          return {};
        }
        auto publisher = std::make_shared<Publisher>(
            std::move(connection), stream, inbox_prefix,
            std::string(payload_size, static_cast<char>('a' + c % 26)), timeout);
        return [publisher] { return publisher->publish_and_wait(); };
      },
      io.err);
  ResultLine line("nats");
  add_closed_loop_fields(line, *load_options, result);
  line.add("endpoints", static_cast<std::uint64_t>(endpoints->size()));
  line.add("replicas", replicas);
  io.out << line.text() << "\n";
  return result.failures == 0 ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace raftlog::bench

#include "etcd_bench.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/client.h"
#include "closed_loop.h"
#include "etcd/kv_put.grpc.pb.h"
#include "report.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMaxValueBytes = 1 << 20;  // etcd's default request limit is 1.5 MiB
constexpr std::uint64_t kMaxCallTimeoutMs = 60'000;
constexpr std::chrono::seconds kProbeTimeout{5};

// One etcd endpoint's KV stub. Channels are made with default arguments, exactly like the raftlog
// client's (src/client): gRPC's global subchannel pool then shares one TCP connection per endpoint
// among all clients of the process, for both systems alike.
class EtcdKv {
 public:
  explicit EtcdKv(const std::string& endpoint)
      : stub_(etcdserverpb::KV::NewStub(
            grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()))) {}

  // The response header on success, or the gRPC status.
  grpc::Status put(const std::string& key, const std::string& value,
                   std::chrono::milliseconds timeout, etcdserverpb::ResponseHeader* header) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    etcdserverpb::PutRequest request;
    request.set_key(key);
    request.set_value(value);
    etcdserverpb::PutResponse response;
    grpc::Status status = stub_->Put(&context, request, &response);
    if (status.ok() && header != nullptr) *header = response.header();
    return status;
  }

 private:
  std::unique_ptr<etcdserverpb::KV::Stub> stub_;
};

std::string describe(const grpc::Status& status) {
  return "gRPC status " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

std::optional<std::vector<std::string>> parse_endpoints_or_complain(const std::string& text,
                                                                    std::string_view command,
                                                                    const cli::Io& io) {
  auto parsed = client::parse_endpoints(text);
  if (!parsed.ok()) {
    io.err << command << ": --endpoints: " << parsed.status().message() << "\n";
    return std::nullopt;
  }
  return parsed.value();
}

// One Put before the load, so an unreachable or non-etcd endpoint fails with a clear message instead
// of a run full of failures.
bool probe(const std::string& endpoint, std::string_view command, const cli::Io& io) {
  EtcdKv kv(endpoint);
  const grpc::Status status = kv.put("raftlog-bench/probe", "probe", kProbeTimeout, nullptr);
  if (status.ok()) return true;
  io.err << command << ": cannot Put to etcd at " << endpoint << " (" << describe(status)
         << "); is an etcd v3 server listening there?\n";
  return false;
}

// Guards the kill: --leader-pid must name a running etcd process, never some other program.
bool is_etcd_process(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return comm && std::getline(comm, name) && name == "etcd";
}

}  // namespace

int run_etcd_command(std::string_view command_path, std::span<const std::string> args,
                     const cli::Io& io) {
  std::string endpoints_text;
  std::string server_pids_text;
  std::uint64_t clients = 64;
  std::uint64_t value_size = 1024;
  std::uint64_t duration_s = 10;
  std::uint64_t call_timeout_ms = 10'000;
  cli::FlagSet flags(
      std::string(command_path),
      "Closed-loop etcd v3 KV.Put load, the same loop as `raftlog-bench cluster`: N clients, each "
      "putting a VALUE-byte value under its own key and waiting for the answer. Client i talks to "
      "endpoint i mod (number of endpoints); give only the leader to avoid follower forwarding.");
  flags.string_flag("endpoints", &endpoints_text, "HOST:PORT,...",
                    "etcd client URLs without http://");
  flags.uint_flag("clients", &clients, "N", "concurrent clients, each with its own stub and key");
  flags.bytes_flag("value-size", &value_size, "BYTES", "value bytes per Put");
  flags.uint_flag("duration", &duration_s, "SECONDS", "how long to run");
  flags.uint_flag("call-timeout-ms", &call_timeout_ms, "MS", "deadline of one Put");
  flags.string_flag("server-pids", &server_pids_text, "PID,...",
                    "report CPU seconds and RSS of these server processes over the run");
  flags.require("endpoints");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (clients == 0 || clients > kMaxLoadClients || value_size == 0 || value_size > kMaxValueBytes ||
      duration_s == 0 || duration_s > kMaxLoadDurationS || call_timeout_ms == 0 ||
      call_timeout_ms > kMaxCallTimeoutMs) {
    io.err << command_path << ": need 1 <= clients <= " << kMaxLoadClients
           << ", 1 <= value-size <= " << kMaxValueBytes
           << ", 1 <= duration <= " << kMaxLoadDurationS
           << ", 1 <= call-timeout-ms <= " << kMaxCallTimeoutMs << "\n";
    return cli::kExitUsage;
  }
  auto endpoints = parse_endpoints_or_complain(endpoints_text, command_path, io);
  if (!endpoints) return cli::kExitUsage;
  std::optional<ClosedLoopOptions> load_options = make_closed_loop_options(
      clients, duration_s, 1, value_size, server_pids_text, command_path, io.err);
  if (!load_options) return cli::kExitUsage;
  ClosedLoopOptions& load = *load_options;
  if (!probe(endpoints->front(), command_path, io)) return cli::kExitFailure;

  const auto timeout = std::chrono::milliseconds(call_timeout_ms);
  const ClosedLoopResult result = run_closed_loop(
      load,
      [&](std::uint64_t c) -> ClientCall {
        auto kv = std::make_shared<EtcdKv>((*endpoints)[c % endpoints->size()]);
        auto key = std::make_shared<const std::string>("raftlog-bench/client-" + std::to_string(c));
        auto value =
            std::make_shared<const std::string>(value_size, static_cast<char>('a' + c % 26));
        return [kv, key, value, timeout] { return kv->put(*key, *value, timeout, nullptr).ok(); };
      },
      io.err);
  ResultLine line("etcd");
  add_closed_loop_fields(line, load, result);
  line.add("endpoints", static_cast<std::uint64_t>(endpoints->size()));
  io.out << line.text() << "\n";
  return result.failures == 0 ? cli::kExitOk : cli::kExitFailure;
}

int run_etcd_failover_command(std::string_view command_path, std::span<const std::string> args,
                              const cli::Io& io) {
  std::string endpoints_text;
  std::uint64_t leader_pid = 0;
  std::uint64_t writers = 8;
  std::uint64_t call_timeout_ms = 200;
  std::uint64_t warmup_ms = 500;
  std::uint64_t give_up_s = 15;
  cli::FlagSet flags(
      std::string(command_path),
      "One failover trial against a running etcd cluster: W writers Put through every endpoint "
      "(moving to the next one on any error); after the warm-up the process --leader-pid is "
      "killed with SIGKILL, and the time until a Put is acknowledged in a newer Raft term is "
      "reported. Restarting the killed member is the caller's job.");
  flags.string_flag("endpoints", &endpoints_text, "HOST:PORT,...", "every member's client address");
  flags.uint_flag("leader-pid", &leader_pid, "PID",
                  "the etcd leader's process id (must be an `etcd` process)");
  flags.uint_flag("writers", &writers, "N",
                  "concurrent writers (1..64); their staggered retries set the resolution");
  flags.uint_flag("call-timeout-ms", &call_timeout_ms, "MS", "deadline of one Put attempt");
  flags.uint_flag("warmup-ms", &warmup_ms, "MS", "load before the kill");
  flags.uint_flag("give-up", &give_up_s, "SECONDS", "fail if writes have not resumed by then");
  flags.require("endpoints");
  flags.require("leader-pid");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (writers == 0 || writers > 64 || call_timeout_ms == 0 || call_timeout_ms > kMaxCallTimeoutMs ||
      warmup_ms > 60'000 || give_up_s == 0 || give_up_s > 600 || leader_pid == 0 ||
      leader_pid > INT32_MAX) {
    io.err << command_path
           << ": need 1 <= writers <= 64, 1 <= call-timeout-ms <= " << kMaxCallTimeoutMs
           << ", warmup-ms <= 60000, 1 <= give-up <= 600 and a valid --leader-pid\n";
    return cli::kExitUsage;
  }
  auto endpoints = parse_endpoints_or_complain(endpoints_text, command_path, io);
  if (!endpoints) return cli::kExitUsage;
  const auto pid = static_cast<pid_t>(leader_pid);
  if (!is_etcd_process(pid)) {
    io.err << command_path << ": process " << pid
           << " is not a running etcd (refusing to kill it)\n";
    return cli::kExitUsage;
  }
  if (!probe(endpoints->front(), command_path, io)) return cli::kExitFailure;

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> term_before_kill{0};  // highest term acknowledged before the kill
  std::atomic<std::int64_t> killed_at_ns{0};
  std::atomic<std::int64_t> recovered_at_ns{0};
  std::atomic<std::uint64_t> recovered_term{0};
  std::atomic<std::uint64_t> acknowledged{0};
  std::atomic<std::uint64_t> errors{0};
  const auto timeout = std::chrono::milliseconds(call_timeout_ms);
  std::vector<std::thread> threads;
  for (std::uint64_t w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<std::unique_ptr<EtcdKv>> kvs;
      for (const auto& endpoint : *endpoints) kvs.push_back(std::make_unique<EtcdKv>(endpoint));
      std::size_t current = w % kvs.size();
      const std::string key = "raftlog-bench/failover-" + std::to_string(w);
      // Bounded: the main thread sets `stop` by the give-up deadline at the latest.
      while (!stop.load()) {
        const bool before_kill = killed_at_ns.load() == 0;
        etcdserverpb::ResponseHeader header;
        const grpc::Status status = kvs[current]->put(key, "failover-probe", timeout, &header);
        if (!status.ok()) {
          errors.fetch_add(1);
          current = (current + 1) % kvs.size();
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        acknowledged.fetch_add(1);
        if (before_kill) {
          std::uint64_t seen = term_before_kill.load();
          while (header.raft_term() > seen &&
                 !term_before_kill.compare_exchange_weak(seen, header.raft_term())) {
          }
        } else if (header.raft_term() > term_before_kill.load()) {
          std::int64_t expected = 0;
          if (recovered_at_ns.compare_exchange_strong(expected,
                                                      Clock::now().time_since_epoch().count())) {
            recovered_term.store(header.raft_term());
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(warmup_ms));
  const std::uint64_t acknowledged_before_kill = acknowledged.load();
  int exit_code = cli::kExitOk;
  if (acknowledged_before_kill == 0 || term_before_kill.load() == 0) {
    io.err << command_path
           << ": no Put was acknowledged during the warm-up; not killing anything\n";
    exit_code = cli::kExitFailure;
  } else if (!is_etcd_process(pid)) {
    io.err << command_path << ": process " << pid << " is gone before the kill\n";
    exit_code = cli::kExitFailure;
  } else {
    killed_at_ns.store(Clock::now().time_since_epoch().count());
    ::kill(pid, SIGKILL);
    const auto give_up = Clock::now() + std::chrono::seconds(give_up_s);
    while (recovered_at_ns.load() == 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  if (exit_code != cli::kExitOk) return exit_code;
  if (recovered_at_ns.load() == 0) {
    io.err << command_path << ": writes did not resume within " << give_up_s << " s\n";
    return cli::kExitFailure;
  }
  const double ms = static_cast<double>(recovered_at_ns.load() - killed_at_ns.load()) / 1e6;
  io.err << "killed etcd leader (pid " << pid << ", term " << term_before_kill.load()
         << "), writes resumed after " << fixed(ms, 1) << " ms in term " << recovered_term.load()
         << "\n";
  io.out << ResultLine("etcd_failover")
                .add("writers", writers)
                .add("call_timeout_ms", call_timeout_ms)
                .add("old_term", term_before_kill.load())
                .add("new_term", recovered_term.load())
                .add("failover_ms", ms, 1)
                .add("put_errors", errors.load())
                .text()
         << "\n";
  return cli::kExitOk;
}

}  // namespace raftlog::bench

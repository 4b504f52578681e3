#include "testing/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "testing/test_certificates.h"

namespace raftlog::testing {

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  if (::access(options_.raftlogd_path.c_str(), X_OK) != 0) {
    throw std::runtime_error("raftlogd binary not executable: " + options_.raftlogd_path);
  }
  char pattern[] = "/tmp/raftlog-cluster-test.XXXXXX";
  const char* made = ::mkdtemp(pattern);
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = made;
  // All at once: picked one by one, two nodes could get the same port.
  const int nodes = options_.nodes;
  const std::vector<int> ports = distinct_free_loopback_ports(options_.metrics ? 2 * nodes : nodes);
  for (int id = 1; id <= nodes; ++id) {
    ports_[id] = ports[static_cast<std::size_t>(id - 1)];
    if (options_.metrics) metrics_ports_[id] = ports[static_cast<std::size_t>(nodes + id - 1)];
  }
  make_cluster_identity();
  if (options_.tls) make_certificates();
}

void LocalCluster::make_cluster_identity() {
  std::random_device random;
  const auto hex = [&random](int words) {
    std::string out;
    char word[9];
    for (int i = 0; i < words; ++i) {
      std::snprintf(word, sizeof(word), "%08x", static_cast<unsigned>(random()));
      out += word;
    }
    return out;
  };
  cluster_id_ = "local-" + hex(2);
  const std::string secret_path = peer_secret_file();
  {
    std::ofstream secret(secret_path);
    secret << hex(8) << "\n";
    if (!secret) throw std::runtime_error("cannot write " + secret_path);
  }
  // raftlogd refuses a secret other users could read.
  std::filesystem::permissions(
      secret_path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

void LocalCluster::make_certificates() {
  std::filesystem::create_directories(tls_dir());
  const CertificateFiles ca = make_certificate_authority(tls_dir(), "ca");
  const CertificateFiles rogue_ca = make_certificate_authority(tls_dir(), "rogue-ca");
  for (int id = 1; id <= options_.nodes; ++id) {
    const bool rogue = std::find(options_.tls_rogue_nodes.begin(), options_.tls_rogue_nodes.end(),
                                 id) != options_.tls_rogue_nodes.end();
    make_signed_certificate(rogue ? rogue_ca : ca, tls_dir(), "node" + std::to_string(id),
                            {"IP:127.0.0.1", "DNS:localhost"}, node_certificate_name(id));
  }
  make_signed_certificate(ca, tls_dir(), "client");
  // A rogue node trusts both CAs: it can check the real nodes' certificates and dial them, but has
  // no certificate the cluster CA signed.
  std::ofstream bundle(tls_dir() + "/rogue-trust.crt");
  for (const std::string& path : {rogue_ca.cert_path, ca.cert_path}) {
    std::ifstream in(path);
    bundle << in.rdbuf();
  }
}

std::vector<std::string> LocalCluster::tls_flags(int id) const {
  if (!options_.tls) return {};
  const std::string node = tls_dir() + "/node" + std::to_string(id);
  const bool rogue = std::find(options_.tls_rogue_nodes.begin(), options_.tls_rogue_nodes.end(),
                               id) != options_.tls_rogue_nodes.end();
  std::vector<std::string> flags = {
      "--tls-cert",      node + ".crt",
      "--tls-key",       node + ".key",
      "--peer-tls-cert", node + ".crt",
      "--peer-tls-key",  node + ".key",
      "--peer-tls-ca",   tls_dir() + (rogue ? "/rogue-trust.crt" : "/ca.crt")};
  if (options_.tls_client_certificates) {
    flags.push_back("--tls-ca");
    flags.push_back(tls_dir() + "/ca.crt");
  }
  return flags;
}

client::TlsOptions LocalCluster::client_tls() const {
  client::TlsOptions tls;
  if (!options_.tls) return tls;
  tls.enabled = true;
  tls.ca_file = tls_dir() + "/ca.crt";
  if (options_.tls_client_certificates) {
    tls.cert_file = tls_dir() + "/client.crt";
    tls.key_file = tls_dir() + "/client.key";
  }
  return tls;
}

namespace {

// The start of an AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer report in a node's
// log (a sanitizer writes to the process's stderr, which is the log), up to `max_bytes`; empty if
// there is none. No raftlogd message contains these phrases.
std::string sanitizer_report_in(const std::string& log_path, std::size_t max_bytes = 6000) {
  std::ifstream in(log_path);
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string log = contents.str();
  std::size_t first = std::string::npos;
  for (const char* marker :
       {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: "}) {
    first = std::min(first, log.find(marker));
  }
  if (first == std::string::npos) return "";
  const std::size_t line_start = log.rfind('\n', first);
  return log.substr(line_start == std::string::npos ? 0 : line_start + 1, max_bytes);
}

// LeakSanitizer checks a process only when it exits by itself, never after kill -9: in an ASan build
// (RAFTLOG_SANITIZE, which builds raftlogd alike) the nodes still running at the end are stopped with
// SIGTERM, so every test's nodes are checked for leaks and for errors on the shutdown path.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kStopNodesGracefullyAtTheEnd = true;
#else
constexpr bool kStopNodesGracefullyAtTheEnd = false;
#endif

}  // namespace

LocalCluster::~LocalCluster() {
  for (auto& [id, pid] : pids_) {
    if (pid > 0 && kStopNodesGracefullyAtTheEnd) {
      try {
        stop(id);  // kills the node if it does not stop in time
      } catch (...) {
        // No status client could be made: the node is killed below.
      }
    }
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // A sanitizer report in a node must fail the run, as one in the test process itself would: the
  // node may have died without the test noticing (a follower, or a node the test kills anyway), and
  // removing the directory would lose the report. The directory is kept for the whole log.
  bool reported = false;
  for (int id = 1; id <= options_.nodes; ++id) {
    const std::string report = sanitizer_report_in(log_file(id));
    if (report.empty()) continue;
    std::fprintf(stderr, "LocalCluster: node %d's log %s holds a sanitizer report:\n%s\n", id,
                 log_file(id).c_str(), report.c_str());
    reported = true;
  }
  if (reported) {
    std::fprintf(stderr, "LocalCluster: kept %s for the full logs\n", root_.c_str());
    std::abort();
  }
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string LocalCluster::address(int id) const {
  return "127.0.0.1:" + std::to_string(ports_.at(id));
}
std::string LocalCluster::metrics_address(int id) const {
  return "127.0.0.1:" + std::to_string(metrics_ports_.at(id));
}

std::string LocalCluster::endpoints() const {
  std::string out;
  // Appended piece by piece: `const char* + std::string&&` trips GCC 12's -Wrestrict false positive at
  // -O3 (GCC bug 105651), which would fail a Release build.
  for (const auto& [id, port] : ports_) {
    if (!out.empty()) out += ',';
    out += address(id);
  }
  return out;
}

std::string LocalCluster::data_dir(int id) const { return root_ + "/n" + std::to_string(id); }
std::string LocalCluster::log_file(int id) const {
  return root_ + "/n" + std::to_string(id) + ".log";
}

void LocalCluster::start_all() {
  for (int id = 1; id <= options_.nodes; ++id) start(id);
}

void LocalCluster::start(int id) {
  if (running(id)) throw std::runtime_error("node already running");
  std::string members;
  std::string join;  // a node beyond the founding members joins through them (raftlogd --join)
  const bool joins = options_.founding_members > 0 && id > options_.founding_members;
  for (const auto& [member, port] : ports_) {
    if (options_.founding_members > 0 && member > options_.founding_members) continue;
    const std::string item = std::to_string(member) + "=" + address(member);
    members += (members.empty() ? "" : ",") + item;
    join += (join.empty() ? "" : ",") + address(member);
  }
  if (joins) members = std::to_string(id) + "=" + address(id);
  std::vector<std::string> args = {
      options_.raftlogd_path,
      "--id",
      std::to_string(id),
      "--members",
      members,
      "--data-dir",
      data_dir(id),
      "--flush-mode",
      options_.flush_mode,
      "--segment-size",
      std::to_string(options_.segment_size_bytes),
      "--max-entry-size",
      std::to_string(options_.max_entry_size_bytes),
      "--cluster-id",
      cluster_id_,
  };
  if (joins && !without_join_.contains(id)) args.insert(args.end(), {"--join", join});
  const bool sole_founder = options_.nodes == 1 || options_.founding_members == 1;
  if (!joins && sole_founder && options_.bootstrap_flag_at_first_start &&
      started_once_.insert(id).second) {
    args.push_back("--bootstrap-new-cluster");
  }
  // With TLS the certificates authenticate the peers.
  if (!options_.tls) args.insert(args.end(), {"--peer-secret-file", peer_secret_file()});
  args.push_back("--disk-high-watermark=" + std::to_string(options_.disk_high_watermark));
  args.push_back("--disk-low-watermark=" + std::to_string(options_.disk_low_watermark));
  if (options_.metrics) args.push_back("--metrics-addr=" + metrics_address(id));
  const std::vector<std::string> tls = tls_flags(id);
  args.insert(args.end(), tls.begin(), tls.end());
  args.insert(args.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  if (auto it = node_flags_.find(id); it != node_flags_.end())
    args.insert(args.end(), it->second.begin(), it->second.end());
  const std::string log = log_file(id);
  // The child inherits the parent's unflushed stdio buffers, and its freopen below flushes them to
  // the parent's stdout: whatever the caller printed but had not flushed would appear twice.
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    FILE* out = std::freopen(log.c_str(), "a", stdout);
    if (out == nullptr) std::_Exit(127);
    ::dup2(::fileno(stdout), STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  pids_[id] = pid;
}

pid_t LocalCluster::pid(int id) const {
  auto it = pids_.find(id);
  return it != pids_.end() && it->second > 0 ? it->second : 0;
}

bool LocalCluster::running(int id) const {
  auto it = pids_.find(id);
  return it != pids_.end() && it->second > 0;
}

void LocalCluster::set_node_flags(int id, std::vector<std::string> flags) {
  node_flags_[id] = std::move(flags);
}

std::optional<int> LocalCluster::wait_for_exit(int id, std::chrono::milliseconds timeout) {
  if (!running(id)) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pids_[id], &status, WNOHANG);
    if (done == pids_[id]) {
      pids_[id] = 0;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void LocalCluster::kill(int id) {
  if (!running(id)) return;
  ::kill(pids_[id], SIGKILL);
  ::waitpid(pids_[id], nullptr, 0);
  pids_[id] = 0;
}

void LocalCluster::pause(int id) {
  if (running(id)) ::kill(pids_[id], SIGSTOP);
}

void LocalCluster::resume(int id) {
  if (running(id)) ::kill(pids_[id], SIGCONT);
}

int LocalCluster::stop(int id, std::chrono::milliseconds timeout) {
  if (!running(id)) return -1;
  const pid_t pid = pids_[id];
  ::kill(pid, SIGCONT);
  // A node that was just exec'd may not have installed its SIGTERM handler yet (it is still loading
  // its libraries); the signal would then kill it outright. Wait (bounded) until it answers.
  const auto up_deadline = std::chrono::steady_clock::now() +
                           std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(5));
  while (std::chrono::steady_clock::now() < up_deadline && !status(id).has_value()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pids_[id] = 0;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(id);
  return -1;
}

std::optional<client::NodeStatus> LocalCluster::status(int id) {
  client::Options options;
  options.endpoints = {address(id)};
  options.call_timeout_ms = 500;
  options.tls = client_tls();
  auto c = client::Client::create(options);
  if (!c.ok()) return std::nullopt;
  auto s = c.value()->status(address(id));
  if (!s.ok()) return std::nullopt;
  return s.value();
}

int LocalCluster::wait_for_leader(std::chrono::milliseconds timeout,
                                  const std::vector<int>& excluding) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::map<std::uint64_t, int> votes;  // leader id -> nodes naming it
    std::uint64_t self_leader = 0;
    for (int id = 1; id <= options_.nodes; ++id) {
      if (!running(id) || std::find(excluding.begin(), excluding.end(), id) != excluding.end())
        continue;
      auto s = status(id);
      if (!s) continue;
      if (s->leader_id != 0) ++votes[s->leader_id];
      if (s->role == client::Role::kLeader) self_leader = s->node_id;
    }
    if (self_leader != 0 && votes[self_leader] > options_.nodes / 2)
      return static_cast<int>(self_leader);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

bool LocalCluster::wait_for_commit(int id, std::uint64_t index, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = status(id);
    if (s && s->commit_index >= index) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::unique_ptr<client::Client> LocalCluster::client(client::Options options,
                                                     const std::vector<int>& only_ids) {
  options.endpoints.clear();
  if (!options.tls.enabled) options.tls = client_tls();
  for (int id = 1; id <= options_.nodes; ++id) {
    if (only_ids.empty() || std::find(only_ids.begin(), only_ids.end(), id) != only_ids.end()) {
      options.endpoints.push_back(address(id));
    }
  }
  auto c = client::Client::create(options);
  if (!c.ok()) throw std::runtime_error("client: " + c.status().message());
  return std::move(c).value();
}

std::vector<client::Entry> LocalCluster::read_all(int id) {
  client::Options options;
  options.retry_deadline_ms = 3000;
  auto c = client(options, {id});
  std::vector<client::Entry> out;
  // From the node's first retained index (retention may have trimmed the start).
  const auto first_retained = [&]() -> std::uint64_t {
    const auto node_status = status(id);
    return node_status.has_value() ? std::max<std::uint64_t>(1, node_status->first_index) : 1;
  };
  std::uint64_t next = first_retained();
  // A retention pass on the node may trim past `next` between the status call and the first read:
  // the read then answers OUT_OF_RANGE, and the read starts again from the new first index
  // (a bounded number of times; each pass deletes at least one whole segment).
  int restarts_left = 20;
  // Bounded: each round returns at least one entry or stops.
  for (int round = 0; round < 100000; ++round) {
    auto r = c->read(next, 0, 0, false);
    if (!r.ok() && r.status().code() == client::StatusCode::kOutOfRange && out.empty() &&
        restarts_left-- > 0) {
      next = first_retained();
      continue;
    }
    if (!r.ok() || r->entries.empty()) break;
    for (auto& e : r->entries) out.push_back(std::move(e));
    next = out.back().index + 1;
  }
  return out;
}

std::string LocalCluster::log_tail(int id, std::size_t max_bytes) const {
  std::ifstream in(log_file(id));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  if (all.size() > max_bytes) all = all.substr(all.size() - max_bytes);
  return all;
}

}  // namespace raftlog::testing

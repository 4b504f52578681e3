// raftlogd: one node of a raftlog cluster.
//
//   raftlogd --id 1 --members 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 --data-dir /var/lib/raftlog/1
//
// Every option can also come from a config file (--config FILE): one `name = value` per line, the
// names of the flags below without the leading dashes; `#` starts a comment. A flag given on the
// command line overrides the file. docs/configuration.md describes every option.
#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "allocator_policy.h"
#include "restart_form.h"
#include "cli/flags.h"
#include "raft/types.h"
#include "server/data_dir_lock.h"
#include "server/founding_check.h"
#include "server/join.h"
#include "server/node_config.h"
#include "server/node_identity.h"
#include "server/node_tls.h"
#include "server/server.h"
#include "util/build_info.h"
#include "util/host_port.h"

namespace {

std::atomic<int> g_signal{0};

void on_signal(int signal_number) { g_signal.store(signal_number); }

// --join: checks the flags, then takes the member list from DIR/JOIN (a restart) or from the
// members named (a first start on a directory without state), and records it (server/join.h).
// -1 to go on, else the exit code (2: bad flags or a directory that cannot join; 1: no member
// answered).
int prepare_join(const std::string& join_text, std::uint32_t timeout_ms,
                 raftlog::server::NodeConfig* config) {
  if (config->members.size() != 1 || !config->members.contains(config->node_id)) {
    std::cerr << "raftlogd: --join: --members must name this node alone (" << config->node_id
              << "=HOST:PORT, its own address); the others come from the cluster\n";
    return raftlog::cli::kExitUsage;
  }
  if (config->cluster_id == raftlog::server::NodeConfig::kSingleNodeDefaultClusterId) {
    std::cerr << "raftlogd: --join needs the cluster's --cluster-id\n";
    return raftlog::cli::kExitUsage;
  }
  std::vector<std::string> endpoints;
  std::size_t start = 0;
  while (endpoints.size() <= 64) {
    const std::size_t comma = join_text.find(',', start);
    const std::string item = join_text.substr(start, comma == std::string::npos ? comma : comma - start);
    if (std::string problem =
            raftlog::util::parse_host_port(item, raftlog::util::PortZero::kRefused, nullptr);
        !problem.empty()) {
      std::cerr << "raftlogd: --join: '" << item << "' " << problem << "\n";
      return raftlog::cli::kExitUsage;
    }
    if (item.size() > raftlog::raft::kMaxMemberAddressBytes) {
      std::cerr << "raftlogd: --join: '" << item << "' is longer than "
                << raftlog::raft::kMaxMemberAddressBytes << " bytes\n";
      return raftlog::cli::kExitUsage;
    }
    endpoints.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (endpoints.size() > 64) {
    std::cerr << "raftlogd: --join: at most 64 addresses\n";
    return raftlog::cli::kExitUsage;
  }
  if (std::string problem = raftlog::server::check_data_dir_identity(*config); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  auto recorded = raftlog::server::read_join_record(config->data_dir);
  if (!recorded.ok()) {
    std::cerr << "raftlogd: --join: " << recorded.status().to_string() << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (recorded->has_value()) {  // a restart: the seed asked at the first start, not --join's
    raftlog::server::apply_join_record(**recorded, config);
    return -1;
  }
  if (raftlog::server::data_dir_has_state(config->data_dir)) {
    std::cerr << "raftlogd: --join: " << config->data_dir
              << " holds a node's state but no JOIN record: it was not created by --join (start it "
                 "with its --members, or join with an empty directory)\n";
    return raftlog::cli::kExitUsage;
  }
  raftlog::server::NodeTls tls;
  if (std::string problem = raftlog::server::load_node_tls(*config, &tls); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  raftlog::server::JoinRecord record;
  bool refused = false;
  if (std::string problem = raftlog::server::fetch_join_record(
          endpoints, config->node_id, config->cluster_id, tls, timeout_ms, &record, &refused);
      !problem.empty()) {
    std::cerr << "raftlogd: --join: " << problem << "\n";
    return refused ? raftlog::cli::kExitUsage : raftlog::cli::kExitFailure;
  }
  raftlog::server::NodeConfig joined = *config;
  raftlog::server::apply_join_record(record, &joined);
  if (std::string problem = raftlog::server::validate(joined); !problem.empty()) {
    std::cerr << "raftlogd: --join: with the members the cluster listed: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (std::string problem = raftlog::server::write_join_record(config->data_dir, record);
      !problem.empty()) {
    std::cerr << "raftlogd: --join: " << problem << "\n";
    return raftlog::cli::kExitFailure;
  }
  raftlog::server::apply_join_record(record, config);
  return -1;
}

// Without --join: a directory a join created (DIR/JOIN) keeps its bootstrap configuration and seed,
// whatever --members says. Started from --members alone, such a node would take itself for a
// one-node cluster (initial configuration {self}), elect itself and accept writes: a fork. So the
// record is always applied, and --members naming other nodes alongside it is refused.
// -1 to go on, else the exit code (2).
int apply_recorded_join(raftlog::server::NodeConfig* config) {
  auto recorded = raftlog::server::read_join_record(config->data_dir);
  if (!recorded.ok()) {
    std::cerr << "raftlogd: " << config->data_dir << "/JOIN: " << recorded.status().to_string()
              << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (!recorded->has_value()) return -1;
  if (config->members.size() != 1 || !config->members.contains(config->node_id)) {
    std::cerr << "raftlogd: " << config->data_dir
              << " was created by --join (it holds a JOIN record): --members must name this node "
                 "alone ("
              << config->node_id << "=HOST:PORT); the others come from the record\n";
    return raftlog::cli::kExitUsage;
  }
  if (std::string problem = raftlog::server::check_data_dir_identity(*config); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  raftlog::server::apply_join_record(**recorded, config);
  return -1;
}

// Before a start that would found on an empty directory beside other members: asks them whether
// the cluster exists already (server/founding_check.h). -1 to go on, else the exit code (2).
int check_founding(const raftlog::server::NodeConfig& config, const raftlog::server::NodeTls& tls,
                   bool joins, bool skip) {
  if (!raftlog::server::founding_check_applies(config, joins)) {
    if (skip) {
      spdlog::warn("node {}: --skip-founding-check is ignored: this start founds nothing (it "
                   "joins, or {} holds a node's state, or --members names this node alone)",
                   config.node_id, config.data_dir);
    }
    return -1;
  }
  if (skip) {
    spdlog::critical("node {}: founding on the empty directory {} without asking the other members "
                     "whether the cluster exists (--skip-founding-check): if it does, this node "
                     "may elect in terms it used already and fork it; remove the flag from later "
                     "starts", config.node_id, config.data_dir);
    return -1;
  }
  std::vector<std::uint64_t> founders;  // sorted: config.members is a map
  for (const auto& member : config.members) founders.push_back(member.first);
  const auto started = std::chrono::steady_clock::now();
  std::vector<raftlog::server::FoundingAnswer> answers;
  raftlog::server::FoundingDecision decision;
  // A refusal that a new cluster's election could explain is asked again a few times, bounded
  // (kFoundingRetries, and none begun after kFoundingRetryBudget; a round takes at most
  // kFoundingProbeDeadline + 0.5 s).
  for (int attempt = 0;; ++attempt) {
    answers = raftlog::server::ask_other_members(config, tls, raftlog::server::kFoundingProbeDeadline);
    decision = raftlog::server::decide_founding(config.node_id, config.cluster_id, answers, founders);
    if (decision.refusal.empty() || !decision.ask_again ||
        attempt >= raftlog::server::kFoundingRetries ||
        std::chrono::steady_clock::now() - started > raftlog::server::kFoundingRetryBudget)
      break;
    std::this_thread::sleep_for(raftlog::server::kFoundingRetryWait);
  }
  std::string silent;
  for (const raftlog::server::FoundingAnswer& answer : answers) {
    if (answer.answered) continue;
    silent += " " + std::to_string(answer.member) + " (" + answer.failure + ")";
    if (answer.failure_is_loud) {
      spdlog::warn("node {}: founding check: member {} ({}) answered but not the question: {}; "
                   "counted as no answer",
                   config.node_id, answer.member, answer.address, answer.failure);
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  if (!decision.refusal.empty()) {
    std::cerr << "raftlogd: " << decision.refusal << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (!decision.note.empty()) {
    spdlog::warn("node {}: {}", config.node_id, decision.note);
    return -1;
  }
  spdlog::info("node {}: founding on an empty directory: asked {} other member(s) in {} ms, none "
               "holds this cluster's state{}{}",
               config.node_id, answers.size(), took.count(),
               silent.empty() ? "" : "; no answer from", silent);
  return -1;
}

// "1=host:port,2=host:port" -> members. Returns "" or a description of the problem.
std::string parse_members(const std::string& text, std::map<std::uint64_t, std::string>* members) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t eq = item.find('=');
    std::uint64_t id = 0;
    if (eq == std::string::npos || !raftlog::cli::parse_uint(item.substr(0, eq), &id) || id == 0 ||
        item.size() == eq + 1) {
      return "bad member '" + item + "': expected ID=HOST:PORT with a non-zero ID";
    }
    if (!members->emplace(id, item.substr(eq + 1)).second)
      return "member id " + std::to_string(id) + " given twice";
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "";
}

// Reads `name = value` lines into `--name=value` arguments, skipping names in `overridden`.
bool read_config_file(const std::string& path, const std::set<std::string>& overridden,
                      std::vector<std::string>* args, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read config file " + path;
    return false;
  }
  std::string line;
  int line_number = 0;
  while (std::getline(in, line) && line_number < 10000) {
    ++line_number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    auto trim = [](std::string s) {
      const auto b = s.find_first_not_of(" \t\r");
      if (b == std::string::npos) return std::string();
      return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
    };
    line = trim(line);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      *error = path + ":" + std::to_string(line_number) + ": expected 'name = value'";
      return false;
    }
    const std::string name = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    if (name == "config") {
      *error = path + ":" + std::to_string(line_number) + ": a config file cannot name another";
      return false;
    }
    // One-time actions: a supervisor reuses its config file at every start, and such a flag left
    // there would act again after a later loss: found a new cluster under this node's id
    // (server/join.h), or vote for a candidate that no longer holds the cluster's log
    // (raft::Config::unvouched_may_elect).
    if (name == "bootstrap-new-cluster" || name == "unvouched-may-elect" ||
        name == "skip-founding-check") {
      *error = path + ":" + std::to_string(line_number) + ": " + name +
               " cannot come from a config file: it is a one-time action, give it on the "
               "command line of the one start that needs it";
      return false;
    }
    if (overridden.contains(name)) continue;
    args->push_back("--" + name + "=" + value);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // First thing: a SIGTERM that arrives while the node is still recovering must lead to a clean
  // shutdown once it is up, not to the default action (death without closing the store).
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // gRPC's mutexes are absl::Mutex; Debian's Abseil checks every acquisition for lock-order cycles,
  // which took 1.3-2 % of the leader's CPU in the profile (docs/benchmarks.md). Our own locks are
  // std::mutex and covered by the TSan build instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  using raftlog::cli::FlagSet;
  using raftlog::cli::ParseStatus;
  namespace limits = raftlog::server::config_limits;
  constexpr std::uint32_t kUint32Max = std::numeric_limits<std::uint32_t>::max();
  raftlog::server::NodeConfig config;
  std::string members_text;
  std::string join_text;
  std::uint32_t join_timeout_ms = 30000;
  std::string config_path;
  std::string flush_mode = "sync";
  std::string log_level = "info";
  std::uint64_t max_append_bytes = 0;  // 0: max(8 MiB, --max-entry-size)
  std::uint64_t allocator_retain_bytes = std::uint64_t{256} << 20;

  // Every number is bound to its NodeConfig field with the field's own type and the range validate()
  // accepts, so nothing is narrowed after parsing and a bad value is refused naming its flag.
  FlagSet flags("raftlogd",
                "One node of a raftlog cluster: a Raft-replicated, durable, append-only log.");
  flags.uint_flag("id", &config.node_id, "ID", "this node's id (non-zero, one of --members)",
                  {1, std::numeric_limits<std::uint64_t>::max()});
  flags.require("id");
  flags.string_flag("members", &members_text, "ID=HOST:PORT,...",
                    "every member of the cluster with the address it serves clients and peers on");
  flags.require("members");
  flags.string_flag("join", &join_text, "HOST:PORT,...",
                    "join a running cluster through these members (an empty data directory: ask "
                    "them for the member list; then `raftlogctl members add` this node); "
                    "--members then names this node alone, with its own address");
  bool bootstrap_new_cluster = false;
  flags.bool_flag("bootstrap-new-cluster", &bootstrap_new_cluster,
                  "found a new cluster of this node alone (--members naming it alone) on an empty "
                  "data directory; without it such a start exits 2, because it cannot tell a new "
                  "cluster from a member whose disk was lost. First start only: ignored (with a "
                  "warning) once the directory holds the node");
  bool skip_founding_check = false;
  flags.bool_flag("skip-founding-check", &skip_founding_check,
                  "found on an empty data directory without asking the other --members whether "
                  "they hold this cluster's state (an operator's override when that check is "
                  "wrong; logged critical). First start only, never from a config file "
                  "(docs/operations.md, \"Membership\")");
  flags.uint_flag("unvouched-may-elect", &config.unvouched_may_elect, "ID",
                  "an operator's way out when a majority lost their logs and nobody can be "
                  "elected: while this node is unvouched it may vote for node ID by the ordinary "
                  "up-to-date rule. Only after checking that node ID holds the cluster's log "
                  "(docs/operations.md, \"Unvouched nodes\"); remove it once the node serves",
                  {1, std::numeric_limits<std::uint64_t>::max()});
  flags.uint_flag("join-timeout-ms", &join_timeout_ms, "MS",
                  "how long --join waits for a member to list the members", {100, 600000});
  flags.string_flag("data-dir", &config.data_dir, "DIR",
                    "where this node keeps its log and hard state");
  flags.require("data-dir");
  flags.host_port_flag("listen", &config.listen_address, "HOST:PORT",
                       "address to bind (default: this node's address in --members)");
  flags.string_flag("cluster-id", &config.cluster_id, "TOKEN",
                    "unique to this cluster (required with several members, e.g. `openssl rand "
                    "-hex 16`); peers and "
                    "data directories of another cluster are refused");
  flags.uint_flag("tick-ms", &config.tick_ms, "MS", "Raft tick length", {1, limits::kMaxTickMs});
  flags.uint_flag(
      "election-ticks", &config.election_ticks, "N",
      "election timeout in ticks, randomized in [N, 2N): 200-400 ms with the default ticks",
      {2, limits::kMaxElectionTicks});
  flags.uint_flag("heartbeat-ticks", &config.heartbeat_ticks, "N",
                  "leader heartbeat interval in ticks (below --election-ticks)",
                  {1, limits::kMaxElectionTicks - 1});
  flags.uint_flag("slow-round-log-ms", &config.slow_round_log_ms, "MS",
                  "log the parts of a Raft loop round that takes at least this long (0: half the "
                  "election timeout)",
                  {0, limits::kMaxSlowRoundLogMs});
  flags.uint_flag("derived-persist-slice-ms", &config.derived_persist_slice_ms, "MS",
                  "the topic/key indexes write and sync a persist's files at most this long "
                  "between two batches of entries they index (0: a whole persist at once, "
                  "indexing waits)",
                  {0, limits::kMaxDerivedPersistSliceMs});
  flags.string_flag(
      "flush-mode", &flush_mode, "sync|async",
      "sync: an entry counts toward commit once fsynced; async: once written to the mapped file");
  flags.uint_flag("flush-interval-ms", &config.store.flush_interval_ms, "MS",
                  "async mode: longest time an entry stays unflushed", {1, kUint32Max});
  flags.bool_flag(
      "zero-fill-segments", &config.store.zero_fill_segments,
      "write zeros over each new segment ahead of use, so that flushes never convert unwritten "
      "extents (faster syncs; costs one extra sequential write of every segment)");
  flags.bytes_flag("segment-size", &config.store.segment_size_bytes, "BYTES",
                   "size of each segment file (must hold the largest entry)",
                   {raftlog::store::Options::kMinSegmentSizeBytes,
                    raftlog::store::Options::kMaxSegmentSizeBytes});
  flags.bytes_flag("max-entry-size", &config.store.max_entry_size_bytes, "BYTES",
                   "largest entry payload accepted", {1, limits::kMaxAppendBytes});
  flags.uint_flag("max-entries-per-append", &config.max_entries_per_append, "N",
                  "most entries in one Append call", {1, limits::kMaxEntriesPerAppend});
  flags.bytes_flag("max-append-bytes", &max_append_bytes, "BYTES",
                   "most payload bytes in one Append call (0: max(8MiB, --max-entry-size))",
                   {0, limits::kMaxAppendBytes});
  flags.uint_flag("max-read-entries", &config.max_read_entries, "N",
                  "most entries in one Read response or Tail message",
                  {1, limits::kMaxReadEntries});
  flags.bytes_flag("max-read-bytes", &config.max_read_bytes, "BYTES",
                   "most payload bytes in one Read response or Tail message",
                   {1, limits::kMaxReadBytes});
  flags.uint_flag("max-tail-streams", &config.max_tail_streams, "N",
                  "concurrent Tail streams on this node", {1, limits::kMaxStreams});
  flags.uint_flag("max-append-streams", &config.max_append_streams, "N",
                  "concurrent AppendStream calls on this node", {1, limits::kMaxStreams});
  flags.uint_flag("max-appends-per-stream", &config.max_appends_per_stream, "N",
                  "appends one AppendStream may have unanswered before the node stops reading it",
                  {1, limits::kMaxStreams});
  flags.uint_flag("max-streams-per-connection", &config.max_concurrent_streams_per_connection, "N",
                  "concurrent RPCs one client connection may have open (HTTP/2 streams)",
                  {limits::kMinStreamsPerConnection, limits::kMaxStreamsPerConnection});
  flags.uint_flag("max-tail-streams-per-connection", &config.max_tail_streams_per_connection, "N",
                  "Tail streams one client connection may hold", {1, limits::kMaxStreams});
  flags.uint_flag("max-append-streams-per-connection", &config.max_append_streams_per_connection,
                  "N", "AppendStream calls one client connection may hold",
                  {1, limits::kMaxStreams});
  flags.uint_flag(
      "stream-stall-timeout-ms", &config.stream_stall_timeout_ms, "MS",
      "end a Tail, TailTopic or AppendStream whose reader has not taken a message for this long",
      {100, 3600000});
  flags.uint_flag("append-timeout-ms", &config.append_timeout_ms, "MS",
                  "an Append not committed by then fails with DEADLINE_EXCEEDED (outcome unknown)",
                  {1, kUint32Max});
  flags.uint_flag("shutdown-grace-ms", &config.shutdown_grace_ms, "MS",
                  "longest graceful shutdown on SIGTERM");
  flags.uint_flag("retention-max-age-s", &config.retention_max_age_s, "SECONDS",
                  "delete committed segments older than this (0: keep)",
                  {0, limits::kMaxRetentionMaxAgeS});
  flags.bytes_flag("retention-max-bytes", &config.retention_max_bytes, "BYTES",
                   "delete the oldest committed segments while the log takes more (0: no limit)");
  flags.uint_flag("retention-check-interval-ms", &config.retention_check_interval_ms, "MS",
                  "how often retention runs",
                  {limits::kMinRetentionCheckIntervalMs, limits::kMaxRetentionCheckIntervalMs});
  flags.uint_flag("retention-follower-grace-ms", &config.retention_follower_grace_ms, "MS",
                  "keep entries a follower needs unless it has been silent this long");
  flags.uint_flag("serving-lag-entries", &config.serving_lag_entries, "N",
                  "a follower whose log falls more than N entries behind the commit index its "
                  "leader named reports NOT_SERVING until it reaches that index",
                  {raftlog::replica::kMinServingLagEntries,
                   raftlog::replica::kMaxServingLagEntries});
  flags.uint_flag("dedup-rebuild-entries", &config.dedup_rebuild_entries, "N",
                  "at start, rebuild the idempotency table from the last N log entries (checked as "
                  "they are read)",
                  {0, limits::kMaxDedupRebuildEntries});
  flags.bytes_flag("scrub-bytes-per-second", &config.scrub_bytes_per_second, "BYTES",
                   "re-read durable entries at this rate and verify their checksums (0: off)",
                   {0, limits::kMaxScrubBytesPerSecond});
  flags.host_port_flag(
      "metrics-addr", &config.metrics_address, "HOST:PORT",
      "serve Prometheus metrics at http://HOST:PORT/metrics (default: off; port 0: any free port)",
      raftlog::util::PortZero::kAllowed);
  flags.double_flag("disk-high-watermark", &config.disk_high_watermark, "FRACTION",
                    "refuse appends while this much of the data disk is in use");
  flags.double_flag("disk-low-watermark", &config.disk_low_watermark, "FRACTION",
                    "accept appends again once disk use falls to this");
  flags.string_flag("tls-cert", &config.client_tls.cert_path, "FILE",
                    "PEM certificate the port presents (its SANs must name this node's --members "
                    "host); enables TLS");
  flags.string_flag("tls-key", &config.client_tls.key_path, "FILE",
                    "PEM private key of --tls-cert");
  flags.string_flag(
      "tls-ca", &config.client_tls.ca_path, "FILE",
      "clients must present a certificate signed by this CA (mutual TLS for clients); optional");
  flags.string_flag("peer-tls-cert", &config.peer_tls.cert_path, "FILE",
                    "PEM certificate this node presents to its peers (mutual TLS between peers)");
  flags.string_flag("peer-tls-key", &config.peer_tls.key_path, "FILE",
                    "PEM private key of --peer-tls-cert");
  flags.string_flag("peer-tls-ca", &config.peer_tls.ca_path, "FILE",
                    "the cluster CA: peers whose certificate it did not sign are refused");
  flags.string_flag("peer-secret-file", &config.peer_secret_path, "FILE",
                    "the secret every member shares (16..4096 bytes, mode 600); peer streams "
                    "without it are refused. "
                    "Required by a multi-node cluster without --peer-tls-*");
  flags.bytes_flag(
      "allocator-retain-bytes", &allocator_retain_bytes, "BYTES",
      "freed heap kept for reuse (large buffers come from the heap, not fresh mmaps); 0: glibc's "
      "defaults (docs/operations.md, memory)",
      {0, raftlog::raftlogd::kMaxRetainBytes});
  flags.string_flag("log-level", &log_level, "LEVEL", "trace, debug, info, warn, error");
  flags.string_flag(
      "config", &config_path, "FILE",
      "read options from FILE (name = value lines; required flags may come from it too)");
  bool show_version = false;
  flags.bool_flag("version", &show_version, "print the version and git revision, then exit");

  // The config file is found first (by hand), so the file's options and the command line are parsed
  // together, in one pass, with the command line winning.
  std::vector<std::string> args(argv + 1, argv + argc);
  // --version answers alone, before the required flags are checked (as --help does).
  if (std::find(args.begin(), args.end(), "--version") != args.end()) {
    std::cout << raftlog::util::version_line("raftlogd") << "\n";
    return raftlog::cli::kExitOk;
  }
  std::set<std::string> given_on_command_line;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) continue;
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    given_on_command_line.insert(name);
    if (name == "config")
      config_path =
          eq == std::string::npos ? (i + 1 < args.size() ? args[i + 1] : "") : arg.substr(eq + 1);
  }
  std::vector<std::string> merged;
  if (!config_path.empty()) {
    std::string error;
    if (!read_config_file(config_path, given_on_command_line, &merged, &error)) {
      std::cerr << "raftlogd: " << error << "\n";
      return raftlog::cli::kExitUsage;
    }
  }
  merged.insert(merged.end(), args.begin(), args.end());
  const ParseStatus status = flags.parse(merged);
  if (status == ParseStatus::kHelp) {
    std::cout << flags.usage();
    return raftlog::cli::kExitOk;
  }
  if (status == ParseStatus::kError) {
    // The problem and where to look, not 50 lines of usage that push it off the screen.
    std::cerr << "raftlogd: " << flags.error() << "\n";
    if (merged.empty()) {
      std::cerr << "A node needs at least: raftlogd --id 1 --members 1=127.0.0.1:7001 --data-dir "
                   "/var/lib/raftlog/1\n"
                   "(and --bootstrap-new-cluster at the first start of a node that is its own "
                   "cluster)\n"
                   "(or --config FILE with those options; docs/configuration.md).\n";
    }
    std::cerr << "Run 'raftlogd --help' for every flag.\n";
    return raftlog::cli::kExitUsage;
  }

  // spdlog maps an unknown name to "off": a typo would silence the node.
  static constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn", "error"};
  if (std::find(std::begin(kLogLevels), std::end(kLogLevels), log_level) == std::end(kLogLevels)) {
    std::cerr << "raftlogd: --log-level must be one of trace, debug, info, warn, error (got '"
              << log_level << "')\n";
    return raftlog::cli::kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  if (std::string problem = parse_members(members_text, &config.members); !problem.empty()) {
    std::cerr << "raftlogd: --members: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (flush_mode == "sync") {
    config.store.flush_mode = raftlog::store::FlushMode::kSync;
  } else if (flush_mode == "async") {
    config.store.flush_mode = raftlog::store::FlushMode::kAsync;
  } else {
    std::cerr << "raftlogd: --flush-mode must be sync or async\n";
    return raftlog::cli::kExitUsage;
  }
  config.max_append_bytes =
      max_append_bytes != 0
          ? max_append_bytes
          : std::max<std::uint64_t>(config.max_append_bytes, config.store.max_entry_size_bytes);
  // drills7 L3: the directory's IDENTITY and JOIN record speak before the member list is judged.
  if (std::string problem =
          raftlog::raftlogd::data_dir_restart_form_problem(config, !join_text.empty());
      !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  // Everything Server::start would refuse for configuration reasons, including the store options
  // (segment size vs entry size) and the derived Raft and transport settings, is refused here,
  // before the data directory is created.
  if (std::string problem = raftlog::server::validate(config); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  // The flag's contradictions that the command line shows, before the data directory is created
  // (decide_bootstrap below also sees a JOIN record's members).
  if (bootstrap_new_cluster && (!join_text.empty() || config.members.size() != 1)) {
    std::cerr << "raftlogd: "
              << raftlog::server::decide_bootstrap(config, !join_text.empty(), true).refusal
              << "\n";
    return raftlog::cli::kExitUsage;
  }
  // One process per data directory, before anything in it is read or written (JOIN, IDENTITY, the
  // log): held until this process exits (server/data_dir_lock.h).
  std::string lock_problem;
  const auto data_dir_lock = raftlog::server::DataDirLock::acquire(config.data_dir, &lock_problem);
  if (data_dir_lock == nullptr) {
    std::cerr << "raftlogd: " << lock_problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  if (!join_text.empty()) {
    if (int code = prepare_join(join_text, join_timeout_ms, &config); code >= 0) return code;
  } else if (int code = apply_recorded_join(&config); code >= 0) {
    return code;
  }
  // After the JOIN record: a joined node's configuration comes from it, not from --members.
  const raftlog::server::BootstrapDecision bootstrap =
      raftlog::server::decide_bootstrap(config, !join_text.empty(), bootstrap_new_cluster);
  if (!bootstrap.refusal.empty()) {
    std::cerr << "raftlogd: " << bootstrap.refusal << "\n";
    return raftlog::cli::kExitUsage;
  }
  // Certificate problems are configuration errors too: report them before touching the data.
  raftlog::server::NodeTls tls;
  if (std::string problem = raftlog::server::load_node_tls(config, &tls); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  std::string peer_secret;
  if (std::string problem = raftlog::server::load_peer_secret(config, &peer_secret);
      !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }
  // Another cluster's or another node's data directory: refused before anything in it is opened.
  if (std::string problem = raftlog::server::check_data_dir_identity(config); !problem.empty()) {
    std::cerr << "raftlogd: " << problem << "\n";
    return raftlog::cli::kExitUsage;
  }

  spdlog::info("{}: starting node {}", raftlog::util::version_line("raftlogd"), config.node_id);
  if (int code = check_founding(config, tls, !join_text.empty(), skip_founding_check); code >= 0)
    return code;
  if (!bootstrap.warning.empty()) spdlog::warn("node {}: {}", config.node_id, bootstrap.warning);
  if (bootstrap.founds) {
    spdlog::warn("node {}: founding a new cluster of this node alone in {} "
                 "(--bootstrap-new-cluster); remove the flag from later starts",
                 config.node_id, config.data_dir);
  }
  // Before Server::start creates the threads whose buffers it governs.
  if (std::string problem = raftlog::raftlogd::apply_allocator_policy(allocator_retain_bytes);
      !problem.empty()) {
    spdlog::warn("node {}: --allocator-retain-bytes: {}; glibc's defaults stay", config.node_id,
                 problem);
  }
  std::string error;
  auto server = raftlog::server::Server::start(config, &error);
  if (server == nullptr) {
    spdlog::critical("node {}: cannot start: {}", config.node_id, error);
    return raftlog::cli::kExitFailure;
  }
  // The main thread only waits: for a signal (graceful stop) or a node failure (exit non-zero so a
  // supervisor restarts it and recovery takes over).
  while (g_signal.load() == 0 && !server->failed()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool failed = server->failed();
  server->shutdown();
  return failed ? raftlog::cli::kExitFailure : raftlog::cli::kExitOk;
}

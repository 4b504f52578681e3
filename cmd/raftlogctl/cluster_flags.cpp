#include "cluster_flags.h"

#include <cstdlib>
#include <fstream>
#include <ostream>

namespace raftlog::ctl {
namespace {

constexpr const char* kDefaultClusterDir =
    "/tmp/raftlog-cluster";  // deploy/local/cluster's default
constexpr const char* kDefaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003";

// A `NAME=value` line of a local cluster's cluster.env (deploy/local/cluster writes it), or "".
std::string local_cluster_setting(const std::string& cluster_dir, const std::string& name) {
  std::ifstream env(cluster_dir + "/cluster.env");
  std::string line;
  for (int lines = 0; lines < 1000 && std::getline(env, line); ++lines) {
    if (line.rfind(name + "=", 0) == 0) return line.substr(name.size() + 1);
  }
  return "";
}

}  // namespace

std::string default_cluster_dir() {
  const char* dir = std::getenv("RAFTLOG_CLUSTER_DIR");
  return dir != nullptr && *dir != '\0' ? dir : kDefaultClusterDir;
}

void Common::add_to(cli::FlagSet& flags) {
  flags.string_flag(
      "endpoints", &endpoints, "HOST:PORT,...",
      "cluster client endpoints (default: the local cluster's in --cluster-dir, else " +
          std::string(kDefaultEndpoints) + ")");
  flags.string_flag(
      "cluster-dir", &cluster_dir, "DIR",
      "a local cluster started by deploy/local/cluster (default: $RAFTLOG_CLUSTER_DIR, else " +
          std::string(kDefaultClusterDir) + ")");
  flags.uint_flag("timeout-ms", &timeout_ms, "MS", "give up retrying after this long",
                  {1, cli::kUint32Range.max});
  flags.bool_flag("json", &json, "machine-readable output (one JSON object per line)");
  flags.bool_flag("no-headers", &no_headers, "text output without the column header line");
  flags.string_flag("tls-ca", &tls_ca, "FILE",
                    "speak TLS; trust the nodes' certificates signed by this CA (default: a "
                    "local cluster's, if up --tls)");
  flags.string_flag("tls-cert", &tls_cert, "FILE",
                    "speak TLS with this client certificate (nodes started with --tls-ca)");
  flags.string_flag("tls-key", &tls_key, "FILE", "private key of --tls-cert");
}

bool Common::resolve(const cli::FlagSet& flags, const cli::Io& io) {
  const std::string local_endpoints = local_cluster_setting(cluster_dir, "ENDPOINTS");
  if (flags.was_set("cluster-dir") && local_endpoints.empty()) {
    io.err << "--cluster-dir: no local cluster in " << cluster_dir << " (no ENDPOINTS in "
           << cluster_dir << "/cluster.env; start one with deploy/local/cluster up --dir "
           << cluster_dir << ")\n";
    return false;
  }
  if (endpoints.empty())
    endpoints = local_endpoints.empty() ? kDefaultEndpoints : local_endpoints;
  if (!flags.was_set("endpoints") && !flags.was_set("tls-ca"))
    tls_ca = local_cluster_setting(cluster_dir, "TLS_CA");
  return true;
}

std::unique_ptr<client::Client> Common::connect(const cli::Io& io) const {
  std::optional<client::Options> options = client_options(*this, io);
  if (!options) return nullptr;
  auto c = client::Client::create(*options);
  if (!c.ok()) {
    io.err << c.status().message() << "\n";
    return nullptr;
  }
  return std::move(c).value();
}

std::optional<client::Options> client_options(const Common& common, const cli::Io& io) {
  auto parsed = client::parse_endpoints(common.endpoints);
  if (!parsed.ok()) {
    io.err << "--endpoints: " << parsed.status().message() << "\n";
    return std::nullopt;
  }
  client::Options options;
  options.endpoints = parsed.value();
  options.retry_deadline_ms = common.timeout_ms;
  options.tls.enabled =
      !common.tls_ca.empty() || !common.tls_cert.empty() || !common.tls_key.empty();
  options.tls.ca_file = common.tls_ca;
  options.tls.cert_file = common.tls_cert;
  options.tls.key_file = common.tls_key;
  return options;
}

int parse_command(cli::FlagSet& flags, Common& common, std::string_view command_path,
                  std::span<const std::string> args, const cli::Io& io) {
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  return common.resolve(flags, io) ? -1 : cli::kExitUsage;
}

}  // namespace raftlog::ctl

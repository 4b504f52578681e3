// `raftlogctl status|leader|health|append|read|tail|transfer-leader|flush|trim`: commands against a
// running cluster, through the client library. Each takes --endpoints (default: the local cluster
// started by deploy/local/cluster, found through --cluster-dir / $RAFTLOG_CLUSTER_DIR), --timeout-ms,
// --json, --no-headers and the TLS flags --tls-ca/--tls-cert/--tls-key.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "client/client.h"

namespace raftlog::ctl {

int run_status(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_leader(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_health(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_append(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_read(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_tail(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_transfer_leader(std::string_view command_path, std::span<const std::string> args,
                        const cli::Io& io);
int run_flush(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_trim(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);

// For topic_commands.cpp: adds the shared cluster flags to `flags`, parses `args` and builds the
// client options. -1 when the command should go on, else its exit code.
int parse_cluster_command(cli::FlagSet& flags, std::string_view command_path,
                          std::span<const std::string> args, const cli::Io& io,
                          client::Options* options, bool* json);
// `tail -f` is the habit every operator has and the flag parser knows only long names: `args` with
// each "-f" made "--follow" (tail and topic tail).
std::vector<std::string> with_short_follow(std::span<const std::string> args);
// An entry as `read` prints it (text or JSON; topic, keys and timestamp when it has them).
void print_cluster_entry(const cli::Io& io, const client::Entry& entry, bool json);
// An endpoint that did not answer, in words: "DOWN (connection refused)" rather than gRPC's
// "failed to connect to all addresses; last error: UNKNOWN: ipv4:...: Connection refused"
// (status and health).
std::string unreachable_text(const client::Status& status);
// For the other command files (members_commands.cpp): adds the shared cluster flags to `flags`,
// parses `args`, and fills the client options from them. -1 when the command should go on, else
// its exit code (help, or a usage error already printed).
struct ClusterFlags {
  client::Options options;
  bool json = false;
  bool no_headers = false;
  std::uint32_t timeout_ms = 0;
  bool headers() const { return !json && !no_headers; }
};
int parse_cluster_flags(cli::FlagSet& flags, std::string_view command_path,
                        std::span<const std::string> args, const cli::Io& io, ClusterFlags* out);

}  // namespace raftlog::ctl

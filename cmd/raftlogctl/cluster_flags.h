// The flags every raftlogctl command that talks to a cluster shares (--endpoints, --cluster-dir,
// --timeout-ms, --json, --no-headers, --tls-*), their defaults from a local cluster's cluster.env,
// and the client options they make.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/flags.h"
#include "client/client.h"

namespace raftlog::ctl {

// $RAFTLOG_CLUSTER_DIR, else deploy/local/cluster's default directory.
std::string default_cluster_dir();

struct Common {
  std::string endpoints;  // "": the local cluster's (resolve())
  std::string cluster_dir = default_cluster_dir();
  std::uint32_t timeout_ms = 10000;
  bool json = false;
  bool no_headers = false;
  std::string tls_ca;  // "": a local cluster's CA when it was started with --tls (resolve())
  std::string tls_cert;
  std::string tls_key;

  void add_to(cli::FlagSet& flags);
  // After parsing: what was not given comes from the local cluster's cluster.env. A --cluster-dir
  // given explicitly must hold one (a typo would otherwise talk to the default ports).
  bool resolve(const cli::FlagSet& flags, const cli::Io& io);
  bool headers() const { return !json && !no_headers; }
  // nullptr (after printing why) when the endpoints are unusable.
  std::unique_ptr<client::Client> connect(const cli::Io& io) const;
};

// parse_or_exit() plus Common::resolve(): -1 when the command should go on, else its exit code.
int parse_command(cli::FlagSet& flags, Common& common, std::string_view command_path,
                  std::span<const std::string> args, const cli::Io& io);

// The client options of the parsed flags; nullopt after printing why (bad endpoints).
std::optional<client::Options> client_options(const Common& common, const cli::Io& io);

}  // namespace raftlog::ctl

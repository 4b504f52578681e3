// Which cluster and which node a data directory belongs to: DIR/IDENTITY, written at the directory's
// first start and checked at every start before anything else in the directory is opened, so a node
// given another cluster's directory (or another member's) refuses to start instead of serving that
// cluster's entries or voting with another node's term and vote. docs/storage-format.md
// ("IDENTITY") describes the file, docs/security.md why the cluster id is the operator's token.
//
// The file is small text, so `cat DIR/IDENTITY` tells an operator whose directory it is:
//   raftlog-identity 1\n
//   cluster-id <the --cluster-id>\n
//   node-id <the --id, decimal>\n
//   crc32c <8 lowercase hex digits: CRC32C of the three lines above, newlines included>\n
// Written as IDENTITY.tmp (fdatasync), renamed over IDENTITY, then the directory is fsynced, so a
// crash leaves either no IDENTITY or a complete one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/node_config.h"
#include "store/status.h"

namespace raftlog::server {

inline constexpr std::string_view kIdentityFileName = "IDENTITY";
// A valid file is far smaller (a 256-byte cluster id, a 20-digit node id); more is not an IDENTITY.
inline constexpr std::size_t kMaxIdentityFileBytes = 1024;

struct DataDirIdentity {
  std::string cluster_id;
  std::uint64_t node_id = 0;
  friend bool operator==(const DataDirIdentity&, const DataDirIdentity&) = default;
};

std::string encode_identity(const DataDirIdentity& identity);
// kCorruption naming the problem for anything but a file encode_identity() wrote (wrong magic,
// unknown version, layout, checksum, an empty or non-printable cluster id, node id 0).
store::Result<DataDirIdentity> decode_identity(std::string_view bytes);

// Read-only: "" when config.node_id may use config.data_dir (it does not exist, holds no IDENTITY
// yet, or its IDENTITY names config.cluster_id and config.node_id); otherwise a sentence saying whose
// directory it is or why IDENTITY cannot be read. raftlogd calls it before starting, to exit 2 with
// the directory untouched.
std::string check_data_dir_identity(const NodeConfig& config);

// check_data_dir_identity(), then, when the directory has no IDENTITY, writes one for this cluster
// and node: a fresh directory, or one from a raftlogd that predates identity files (it holds log/ or
// HARDSTATE; that is logged as a warning, since it is adopted unchecked). Node::open calls it before
// opening the store. Returns "" or the problem.
std::string establish_data_dir_identity(const NodeConfig& config);

}  // namespace raftlog::server

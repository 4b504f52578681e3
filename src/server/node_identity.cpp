#include "server/node_identity.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "store/env.h"
#include "server/text_record.h"

namespace raftlog::server {

namespace {

using text_record::crc_hex;
using text_record::take_line;

constexpr std::string_view kMagicLine = "raftlog-identity ";
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::string_view kClusterIdKey = "cluster-id ";
constexpr std::string_view kNodeIdKey = "node-id ";
constexpr std::string_view kCrcKey = "crc32c ";
constexpr std::size_t kMaxClusterIdBytes = 256;  // as --cluster-id (node_config.cpp)

bool parse_decimal(std::string_view text, std::uint64_t* value) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text.front() == '0')) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

bool printable_token(std::string_view text) {
  if (text.empty() || text.size() > kMaxClusterIdBytes) return false;
  for (const char c : text) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string identity_path(const NodeConfig& config) {
  return store::join_path(config.data_dir, std::string(kIdentityFileName));
}

// Nothing to check when the directory does not exist yet; anything else that is not a directory is
// refused here rather than half-created later.
bool directory_exists(const std::string& path, std::string* problem) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return false;
    *problem = "cannot stat data directory " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(info.st_mode))
    *problem = "data directory " + path + " exists but is not a directory";
  return true;
}

// Reads and decodes IDENTITY; *found = false (and "") when the directory has none.
std::string read_identity(const NodeConfig& config, bool* found, DataDirIdentity* identity) {
  *found = false;
  std::string problem;
  if (!directory_exists(config.data_dir, &problem)) return problem;
  if (!problem.empty()) return problem;
  store::Env* env = store::Env::posix();
  const std::string path = identity_path(config);
  if (!env->exists(path)) return "";
  *found = true;
  auto bytes = env->read_file(path, kMaxIdentityFileBytes);
  if (!bytes.ok()) return "cannot read " + path + ": " + bytes.status().message();
  auto decoded = decode_identity(*bytes);
  if (!decoded.ok()) {
    return path + " is damaged (" + decoded.status().message() +
           "); it records which cluster and node the directory belongs to. Restore it from a "
           "backup of this "
           "node, or, if this directory certainly is this node's, delete it: the next start "
           "records this "
           "node's identity again (docs/operations.md)";
  }
  *identity = std::move(decoded).value();
  return "";
}

}  // namespace

std::string encode_identity(const DataDirIdentity& identity) {
  std::string covered = std::string(kMagicLine) + std::to_string(kFormatVersion) + "\n" +
                        std::string(kClusterIdKey) + identity.cluster_id + "\n" +
                        std::string(kNodeIdKey) + std::to_string(identity.node_id) + "\n";
  return covered + std::string(kCrcKey) + crc_hex(covered) + "\n";
}

store::Result<DataDirIdentity> decode_identity(std::string_view bytes) {
  if (bytes.size() > kMaxIdentityFileBytes)
    return store::Status::corruption("larger than an identity file can be");
  std::string_view rest = bytes;
  std::string_view magic;
  if (!take_line(&rest, &magic) || magic.substr(0, kMagicLine.size()) != kMagicLine) {
    return store::Status::corruption("it does not start with \"raftlog-identity\"");
  }
  std::uint64_t version = 0;
  if (!parse_decimal(magic.substr(kMagicLine.size()), &version)) {
    return store::Status::corruption("its format version is not a number");
  }
  if (version != kFormatVersion) {
    return store::Status::corruption("unknown format version " + std::to_string(version) +
                                     " (written by a newer raftlogd?)");
  }
  std::string_view cluster_line;
  std::string_view node_line;
  std::string_view crc_line;
  if (!take_line(&rest, &cluster_line) || !take_line(&rest, &node_line) ||
      !take_line(&rest, &crc_line) || !rest.empty()) {
    return store::Status::corruption("it does not have exactly four lines");
  }
  if (cluster_line.substr(0, kClusterIdKey.size()) != kClusterIdKey ||
      node_line.substr(0, kNodeIdKey.size()) != kNodeIdKey ||
      crc_line.substr(0, kCrcKey.size()) != kCrcKey) {
    return store::Status::corruption("its lines are not cluster-id, node-id, crc32c");
  }
  const std::string_view covered = bytes.substr(0, bytes.size() - crc_line.size() - 1);
  if (crc_line.substr(kCrcKey.size()) != crc_hex(covered)) {
    return store::Status::corruption("its checksum does not match");
  }
  DataDirIdentity identity;
  const std::string_view cluster_id = cluster_line.substr(kClusterIdKey.size());
  if (!printable_token(cluster_id)) {
    return store::Status::corruption("its cluster id is empty, too long or not printable");
  }
  identity.cluster_id = std::string(cluster_id);
  if (!parse_decimal(node_line.substr(kNodeIdKey.size()), &identity.node_id) ||
      identity.node_id == 0) {
    return store::Status::corruption("its node id is not a non-zero number");
  }
  return identity;
}

std::string check_data_dir_identity(const NodeConfig& config) {
  bool found = false;
  DataDirIdentity identity;
  if (std::string problem = read_identity(config, &found, &identity); !problem.empty())
    return problem;
  if (!found) return "";
  const std::string path = identity_path(config);
  if (identity.cluster_id != config.cluster_id) {
    return "data directory " + config.data_dir + " belongs to cluster \"" + identity.cluster_id +
           "\" (" + path + "), but this node runs with --cluster-id \"" + config.cluster_id +
           "\": it is another cluster's directory, or the cluster id is mistyped; refusing to "
           "start, nothing was "
           "changed";
  }
  if (identity.node_id != config.node_id) {
    return "data directory " + config.data_dir + " belongs to node " +
           std::to_string(identity.node_id) + " of this cluster (" + path + "), but this is node " +
           std::to_string(config.node_id) +
           "; refusing to start, nothing was changed. To rebuild a node, replace it under a new id "
           "with an empty directory (raftlogctl members replace); never copy another member's "
           "HARDSTATE (its vote) or IDENTITY (docs/operations.md, \"Damaged data at startup\")";
  }
  return "";
}

std::string establish_data_dir_identity(const NodeConfig& config) {
  bool found = false;
  DataDirIdentity existing;
  if (std::string problem = read_identity(config, &found, &existing); !problem.empty())
    return problem;
  if (found) return check_data_dir_identity(config);

  store::Env* env = store::Env::posix();
  if (store::Status made = env->create_dir(config.data_dir); !made.ok()) {
    return "cannot create data directory " + config.data_dir + ": " + made.message();
  }
  const bool has_data = env->exists(store::join_path(config.data_dir, "log")) ||
                        env->exists(store::join_path(config.data_dir, "HARDSTATE"));
  if (has_data) {
    spdlog::warn(
        "node {}: data directory {} has data but no {} (a raftlogd from before identity files): "
        "recording "
        "it as node {} of cluster \"{}\"; check that this is the right directory",
        config.node_id, config.data_dir, kIdentityFileName, config.node_id, config.cluster_id);
  }
  const std::string path = identity_path(config);
  const std::string temporary = path + ".tmp";
  const std::string content = encode_identity(DataDirIdentity{config.cluster_id, config.node_id});
  store::Status status = env->write_file(temporary, content);
  if (status.ok()) status = env->rename(temporary, path);
  if (status.ok()) status = env->sync_dir(config.data_dir);
  if (!status.ok()) return "cannot write " + path + ": " + status.message();
  spdlog::info("node {}: recorded the data directory's identity in {} (cluster \"{}\", node {})",
               config.node_id, path, config.cluster_id, config.node_id);
  return "";
}

}  // namespace raftlog::server

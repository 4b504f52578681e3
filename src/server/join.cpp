#include "server/join.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "api_errors/error_info.h"
#include "raft/types.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "server/text_record.h"
#include "store/env.h"

namespace raftlog::server {

namespace {

using text_record::crc_hex;
using text_record::take_line;

constexpr std::string_view kMagicLine = "raftlog-join 1";
constexpr std::string_view kVotersKey = "bootstrap-voters ";
constexpr std::string_view kSeedKey = "seed ";
constexpr std::string_view kCrcKey = "crc32c ";
constexpr std::string_view kJoinFileName = "JOIN";

bool parse_id(std::string_view text, std::uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return value != 0;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  if (text.empty()) return items;
  std::size_t start = 0;
  while (items.size() <= raft::kMaxMembers) {  // bounded: one more than any valid record holds
    const std::size_t end = text.find(separator, start);
    items.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return items;
}

// "" when `voters` (sorted) are a valid bootstrap configuration: 1 to 64 distinct non-zero ids.
std::string bootstrap_voters_problem(const std::vector<std::uint64_t>& voters) {
  if (voters.empty() || voters.size() > raft::kMaxMembers || voters.front() == 0 ||
      !std::is_sorted(voters.begin(), voters.end()) ||
      std::adjacent_find(voters.begin(), voters.end()) != voters.end()) {
    return "the bootstrap voters are not 1 to 64 distinct non-zero ids";
  }
  return "";
}

std::string path_of(const std::string& data_dir) {
  return store::join_path(data_dir, std::string(kJoinFileName));
}

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> member_channel_credentials(const NodeTls& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls.peers_enabled ? tls.peer.ca_pem : tls.port.ca_pem;
  if (tls.peers_enabled) {
    ssl.pem_cert_chain = tls.peer.cert_pem;
    ssl.pem_private_key = tls.peer.key_pem;
  }
  return grpc::SslCredentials(ssl);
}

std::string encode_join_record(const JoinRecord& record) {
  std::string covered = std::string(kMagicLine) + "\n" + std::string(kVotersKey);
  for (std::size_t i = 0; i < record.bootstrap_voters.size(); ++i)
    covered += (i ? "," : "") + std::to_string(record.bootstrap_voters[i]);
  covered += "\n" + std::string(kSeedKey);
  bool first = true;
  for (const auto& [id, address] : record.seed) {
    covered += (first ? "" : ",") + std::to_string(id) + "=" + address;
    first = false;
  }
  covered += "\n";
  return covered + std::string(kCrcKey) + crc_hex(covered) + "\n";
}

store::Result<JoinRecord> decode_join_record(std::string_view bytes) {
  auto corrupt = [](const std::string& why) { return store::Status::corruption("JOIN: " + why); };
  if (bytes.size() > kMaxJoinFileBytes) return corrupt("larger than a join record");
  std::string_view rest = bytes;
  std::string_view magic, voters, seed, crc;
  if (!take_line(&rest, &magic) || !take_line(&rest, &voters) || !take_line(&rest, &seed) ||
      !take_line(&rest, &crc) || !rest.empty()) {
    return corrupt("not four lines");
  }
  if (magic != kMagicLine) return corrupt("unknown format (first line '" + std::string(magic) + "')");
  if (!voters.starts_with(kVotersKey) || !seed.starts_with(kSeedKey) || !crc.starts_with(kCrcKey))
    return corrupt("its lines are not bootstrap-voters, seed, crc32c");
  const std::string_view covered = bytes.substr(0, bytes.size() - crc.size() - 1);
  if (crc.substr(kCrcKey.size()) != crc_hex(covered)) return corrupt("checksum mismatch");
  JoinRecord record;
  for (std::string_view item : split(voters.substr(kVotersKey.size()), ',')) {
    std::uint64_t id = 0;
    if (!parse_id(item, &id)) return corrupt("bad voter id '" + std::string(item) + "'");
    record.bootstrap_voters.push_back(id);
  }
  if (!bootstrap_voters_problem(record.bootstrap_voters).empty() ||
      !std::is_sorted(record.bootstrap_voters.begin(), record.bootstrap_voters.end())) {
    return corrupt("the bootstrap voters are not 1 to 64 sorted ids");
  }
  for (std::string_view item : split(seed.substr(kSeedKey.size()), ',')) {
    const std::size_t eq = item.find('=');
    std::uint64_t id = 0;
    if (eq == std::string_view::npos || !parse_id(item.substr(0, eq), &id))
      return corrupt("bad seed entry '" + std::string(item) + "'");
    const std::string address(item.substr(eq + 1));
    if (!raft::check_member_address(address).empty() || !record.seed.emplace(id, address).second)
      return corrupt("bad seed entry '" + std::string(item) + "'");
  }
  if (record.seed.size() > raft::kMaxMembers) return corrupt("more than 64 seed members");
  // A join writes a record only once a member listed at least one other (fetch_join_record): an
  // empty seed would leave the node with no peer to learn the cluster from.
  if (record.seed.empty()) return corrupt("no seed member");
  return record;
}

store::Result<std::optional<JoinRecord>> read_join_record(const std::string& data_dir) {
  store::Env* env = store::Env::posix();
  const std::string path = path_of(data_dir);
  if (!env->exists(path)) return std::optional<JoinRecord>();
  auto bytes = env->read_file(path, kMaxJoinFileBytes + 1);
  if (!bytes.ok()) return bytes.status();
  auto record = decode_join_record(*bytes);
  if (!record.ok()) return store::Status::corruption(path + ": " + record.status().message());
  return std::optional<JoinRecord>(std::move(record).value());
}

std::string write_join_record(const std::string& data_dir, const JoinRecord& record) {
  store::Env* env = store::Env::posix();
  if (store::Status made = env->create_dir(data_dir); !made.ok())
    return "cannot create data directory " + data_dir + ": " + made.message();
  const std::string path = path_of(data_dir);
  const std::string temporary = path + ".tmp";
  store::Status status = env->write_file(temporary, encode_join_record(record));
  if (status.ok()) status = env->rename(temporary, path);
  if (status.ok()) status = env->sync_dir(data_dir);
  if (!status.ok()) return "cannot write " + path + ": " + status.message();
  return "";
}

bool data_dir_has_state(const std::string& data_dir) {
  store::Env* env = store::Env::posix();
  for (const char* name : {"HARDSTATE", "CONFSTATE"}) {
    if (env->exists(store::join_path(data_dir, name))) return true;
  }
  // An empty log/ is no state: a replaced disk whose provisioning recreates the directory (a
  // separate log volume's mount point) would otherwise pass for a node (review of bootstrap5, L10).
  auto files = env->list_dir(store::join_path(data_dir, "log"));
  return files.ok() && !files->empty();
}

BootstrapDecision decide_bootstrap(const NodeConfig& config, bool joins,
                                   bool bootstrap_new_cluster) {
  BootstrapDecision decision;
  const std::string id = std::to_string(config.node_id);
  if (bootstrap_new_cluster && joins) {
    decision.refusal = "--bootstrap-new-cluster and --join contradict each other: a joining node "
                       "founds nothing, it is added to a running cluster";
    return decision;
  }
  const bool alone = config.members.size() == 1 && config.members.contains(config.node_id) &&
                     (config.bootstrap_voters.empty() ||
                      config.bootstrap_voters == std::vector<std::uint64_t>{config.node_id});
  if (!alone) {
    // Several members: an empty directory among them is held back by the unvouched guard (it
    // votes for no candidate with entries until a leader caught it up), and the founders' first
    // start needs no flag. The flag would promise something this start does not do.
    if (bootstrap_new_cluster) {
      decision.refusal = "--bootstrap-new-cluster founds a cluster of this node alone, but this "
                         "start's configuration has " + std::to_string(config.members.size()) +
                         " members (from --members, or from the directory's JOIN record): remove "
                         "the flag";
    }
    return decision;
  }
  if (data_dir_has_state(config.data_dir)) {
    if (bootstrap_new_cluster) {
      decision.warning = "--bootstrap-new-cluster is ignored: " + config.data_dir +
                         " holds this node's state already. Remove the flag from the node's start "
                         "command: left there, a lost disk would found a new cluster under id " +
                         id + " without anyone noticing";
    }
    return decision;
  }
  if (bootstrap_new_cluster) {
    decision.founds = true;
    return decision;
  }
  decision.refusal =
      "node " + id + "'s configuration names it alone (--members " + id + "=" +
      config.members.begin()->second + ", no --join, no JOIN record) and " + config.data_dir +
      " holds no node state (no log/, HARDSTATE or CONFSTATE): that is the first start of a new "
      "single-node cluster, or a member whose data directory was lost, and nothing here tells them "
      "apart. Started, it would found a one-node cluster that acknowledges appends by itself (a "
      "fork, if it was a member). If node " + id + " was a member of a cluster, do not start it "
      "under this id: replace it under a new id (a new node with --join, then raftlogctl members "
      "replace " + id + " NEW_ID NEW_ADDRESS; docs/operations.md, \"Membership\"). If this is a "
      "new cluster, start it once with --bootstrap-new-cluster (and not at later starts)";
  return decision;
}

std::string join_identity_problem(const std::vector<std::uint64_t>& listed_member_ids,
                                  const std::vector<std::uint64_t>& bootstrap_voters,
                                  std::uint64_t self_id,
                                  const std::vector<std::uint64_t>& retired_ids) {
  const auto holds_self = [self_id](const std::vector<std::uint64_t>& ids) {
    return std::find(ids.begin(), ids.end(), self_id) != ids.end();
  };
  if (holds_self(listed_member_ids)) {
    return "the cluster lists node " + std::to_string(self_id) +
           " as a member already: an empty directory must not rejoin under a member's id (it "
           "would vote without its log); replace it under a new id (raftlogctl members replace)";
  }
  if (holds_self(retired_ids)) {
    return "node " + std::to_string(self_id) +
           " was removed from the cluster by a committed change: a removed id is never reused; "
           "join under a new id";
  }
  if (holds_self(bootstrap_voters)) {
    return "node " + std::to_string(self_id) +
           " is one of the cluster's bootstrap voters: a removed or lost id is never reused; join "
           "under a new id";
  }
  return "";
}

std::string join_cluster_id_problem(const std::string& answered_cluster_id,
                                    const std::string& own_cluster_id) {
  if (answered_cluster_id.empty() || answered_cluster_id == own_cluster_id) return "";
  return "the cluster answering is '" + answered_cluster_id +
         "', but this node runs with --cluster-id '" + own_cluster_id +
         "': it would bind its directory to the wrong cluster, whose members refuse its peer "
         "streams; start it with --cluster-id " +
         answered_cluster_id + " (nothing was written)";
}

std::string fetch_join_record(const std::vector<std::string>& endpoints, std::uint64_t self_id,
                              const std::string& cluster_id, const NodeTls& tls,
                              std::uint32_t timeout_ms, JoinRecord* out, bool* refused) {
  *refused = false;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = member_channel_credentials(tls);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string target = endpoints.front();
  std::size_t next = 1;
  std::string last_error = "no answer";
  // Bounded by the deadline; a redirect goes straight to the named leader, anything else waits
  // 200 ms and tries the next endpoint.
  for (int attempt = 0; std::chrono::steady_clock::now() < deadline && attempt < 1000; ++attempt) {
    auto stub = raftlog::v1::Membership::NewStub(grpc::CreateChannel(target, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    raftlog::v1::ListMembersResponse response;
    const grpc::Status status =
        stub->ListMembers(&context, raftlog::v1::ListMembersRequest(), &response);
    if (status.ok()) {
      if (std::string problem = join_cluster_id_problem(response.cluster_id(), cluster_id);
          !problem.empty()) {
        *refused = true;
        return target + ": " + problem;
      }
      if (response.cluster_id().empty()) {
        spdlog::warn(
            "node {}: joining: {} does not say its cluster id (a leader older than this version): "
            "--cluster-id '{}' is not checked; if it is wrong, the members refuse this node's peer "
            "streams",
            self_id, target, cluster_id);
      }
      JoinRecord record;
      record.bootstrap_voters.assign(response.bootstrap_voters().begin(),
                                     response.bootstrap_voters().end());
      std::sort(record.bootstrap_voters.begin(), record.bootstrap_voters.end());
      // The remote's answer, not this node's configuration: a failure to join (exit 1).
      if (std::string problem = bootstrap_voters_problem(record.bootstrap_voters);
          !problem.empty()) {
        return target + " answered a bad member list: " + problem;
      }
      std::vector<std::uint64_t> listed_ids;
      // A learner the leader never replicated to (match index 0) is a node added before it
      // started: joining under its id is the intended flow. A voter, or a learner that
      // acknowledged entries, had state this empty directory lacks.
      for (const raftlog::v1::Member& member : response.members()) {
        if (member.voter() || member.match_index() > 0) listed_ids.push_back(member.id());
      }
      const std::vector<std::uint64_t> retired(response.retired_ids().begin(),
                                               response.retired_ids().end());
      if (std::string problem =
              join_identity_problem(listed_ids, record.bootstrap_voters, self_id, retired);
          !problem.empty()) {
        *refused = true;
        return target + ": " + problem;
      }
      for (const raftlog::v1::Member& member : response.members()) {
        if (member.id() == self_id || member.address().empty()) continue;
        if (!raft::check_member_address(member.address()).empty()) continue;
        if (record.seed.size() < raft::kMaxMembers) record.seed.emplace(member.id(), member.address());
      }
      if (record.bootstrap_voters.empty() || record.seed.empty()) {
        return target + " answered an empty member list or no bootstrap configuration";
      }
      spdlog::info("node {}: joining: {} (leader {}) lists {} other member(s), bootstrap voters {}",
                   self_id, target, response.leader_id(), record.seed.size(),
                   record.bootstrap_voters.size());
      *out = std::move(record);
      return "";
    }
    last_error = target + ": " + status.error_message();
    const std::optional<api_errors::ErrorDetails> details = api_errors::error_details(context);
    if (details && !details->leader_address.empty() && details->leader_address != target) {
      target = details->leader_address;
      continue;
    }
    target = endpoints[next % endpoints.size()];
    ++next;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return "no member answered the member list within " + std::to_string(timeout_ms) +
         " ms (last: " + last_error + ")";
}

void apply_join_record(const JoinRecord& record, NodeConfig* config) {
  for (const auto& [id, address] : record.seed) {
    if (id != config->node_id) config->members.emplace(id, address);
  }
  config->bootstrap_voters = record.bootstrap_voters;
}

}  // namespace raftlog::server

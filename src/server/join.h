// Joining a running cluster (raftlogd --join, docs/operations.md "Membership"): a node started on an
// empty data directory asks a member for the member list (raftlog.v1.Membership/ListMembers,
// following the leader hint), and starts from the cluster's bootstrap configuration with the members'
// addresses as its seed. It is no voter of that configuration, so it never campaigns; it learns the
// log, and the configurations in it, from the leader once an operator adds it (`raftlogctl members
// add`, before or after it started).
//
// What it learnt is kept in DIR/JOIN, so a restart needs no member to answer (and a later --join's
// seed is ignored): small text, like IDENTITY,
//   raftlog-join 1\n
//   bootstrap-voters 1,2,3\n
//   seed 1=host:port,2=host:port\n
//   crc32c <8 lowercase hex digits: CRC32C of the lines above, newlines included>\n
// written as JOIN.tmp, renamed, directory fsynced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/node_config.h"
#include "server/node_tls.h"
#include "store/status.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace raftlog::server {

// How a node calls another member's client port outside the peer transport (--join's member list,
// the founding check, a leader's probe before AddMember): plaintext, or TLS trusting the peer CA
// (else the port's) with this node's peer certificate as client certificate.
std::shared_ptr<grpc::ChannelCredentials> member_channel_credentials(const NodeTls& tls);

struct JoinRecord {
  std::vector<std::uint64_t> bootstrap_voters;    // sorted, non-empty
  std::map<std::uint64_t, std::string> seed;      // members other than this node; at most 64
  friend bool operator==(const JoinRecord&, const JoinRecord&) = default;
};

inline constexpr std::size_t kMaxJoinFileBytes = 16384;

std::string encode_join_record(const JoinRecord& record);
// kCorruption for anything encode_join_record() did not write (magic, version, checksum, ids,
// addresses, bounds).
store::Result<JoinRecord> decode_join_record(std::string_view bytes);

// DIR/JOIN: nullopt when there is none, an error when it cannot be read or decoded.
store::Result<std::optional<JoinRecord>> read_join_record(const std::string& data_dir);
std::string write_join_record(const std::string& data_dir, const JoinRecord& record);

// True when DIR holds a node's state already (a log, hard state or configuration record).
bool data_dir_has_state(const std::string& data_dir);

// Whether this start founds a cluster of this node alone (raftlogd --bootstrap-new-cluster). A
// configuration that names only this node (--members ID=ADDR, no --join, no JOIN record) on a data
// directory without a node's state cannot tell the first start of a single-node cluster from a
// member whose disk was lost: outside test drills7 H5, a joined voter restarted by its supervisor in
// that form on a lost disk founded a one-node cluster and acknowledged appends at a member's address.
// So such a start founds only when told. `config` is the one the node would run (JOIN record
// applied); `joins`: --join was given.
struct BootstrapDecision {
  std::string refusal;  // non-empty: do not start (exit 2), for this reason
  std::string warning;  // non-empty: log it and start (a flag that has nothing to do)
  bool founds = false;  // a new one-member cluster is founded on an empty directory
};
BootstrapDecision decide_bootstrap(const NodeConfig& config, bool joins, bool bootstrap_new_cluster);

// Why a node may not join under `self_id`, or "": the cluster lists it as a member already (a
// voter, or a learner that acknowledged entries: fetch_join_record passes those; a learner added
// before it started and never replicated to is welcome), or it is one of the bootstrap voters, or
// the leader lists it as retired (removed by a committed change). Such a node started on an empty
// directory would take part in
// elections without the hard state and log its id once had (vote twice in a term, count as a
// replica of entries it never stored): acknowledged entries could be lost. A member whose disk
// was lost is replaced under a new id (`raftlogctl members replace`), never re-joined.
std::string join_identity_problem(const std::vector<std::uint64_t>& listed_member_ids,
                                  const std::vector<std::uint64_t>& bootstrap_voters,
                                  std::uint64_t self_id,
                                  const std::vector<std::uint64_t>& retired_ids = {});

// Why a node started with --cluster-id `own_cluster_id` may not join the cluster whose leader
// answered `answered_cluster_id`, or "": the ids differ. An empty answer (a leader older than the
// field) is not checked.
std::string join_cluster_id_problem(const std::string& answered_cluster_id,
                                    const std::string& own_cluster_id);

// Asks `endpoints` (tried in turn, following NOT_LEADER hints) for the member list, for at most
// timeout_ms. Plaintext, or TLS with `tls` (the node's own certificate as client certificate).
// "" and *out filled, else why not; *refused is set when the answer forbids joining: another
// cluster's id than `cluster_id` (join_cluster_id_problem), or this node's id
// (join_identity_problem): a configuration error, not an unreachable cluster.
std::string fetch_join_record(const std::vector<std::string>& endpoints, std::uint64_t self_id,
                              const std::string& cluster_id, const NodeTls& tls,
                              std::uint32_t timeout_ms, JoinRecord* out, bool* refused);

// Applies a join record to `config`: the seed as members (plus this node's own address, which
// config.members must hold alone) and the bootstrap voters.
void apply_join_record(const JoinRecord& record, NodeConfig* config);

}  // namespace raftlog::server

// The founding check (raftlogd, docs/raft.md "Membership changes", *Founding on an empty
// directory*): a node whose data directory holds no node state, started with --members naming
// other members and without --join or a JOIN record, founds the cluster at term 0 with the
// bootstrap configuration. That is right at a new cluster's first start, where every member is
// empty, and wrong when the cluster exists already: two retired founders re-created on empty disks
// (outside test drills7 H2), or two of three members restarted under their ids after their disks
// were lost (drills7 H3), elect each other in terms the cluster used already, and fork it.
//
// So before it founds, the node asks every other listed member (raftlog.v1.Membership/ProbeMember,
// in parallel, each call with a short deadline, over the port's TLS with this node's certificate
// when it has one, as --join asks) whether it holds this cluster's state, and refuses (exit 2) when
// one does, as etcd refuses a member of an `initial-cluster-state=new` start that the other members
// know bootstrapped already. A member that does not answer in time is taken for one that has not
// started yet: a new cluster's members start in any order, and none of them must wait for the
// others. What this leaves: a pair of empty members that reaches no member holding data (all down,
// or cut off) still founds (docs/design.md, "Known limits").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "server/node_config.h"
#include "server/node_tls.h"

namespace raftlog::server {

// One member's answer, checked (check_probe_answer) before anything reads it.
struct FoundingAnswer {
  std::uint64_t member = 0;  // the listed member that was asked
  std::string address;       // where (its --members address)
  bool answered = false;     // a valid answer came; else `failure` says why not
  std::string failure;
  // No answer, but not for want of one: a live process refused the question (authentication, TLS,
  // permission) or answered malformed. Still no answer (the start founds), but said at warn.
  bool failure_is_loud = false;
  std::uint64_t node_id = 0;
  std::string cluster_id;
  std::uint64_t term = 0;
  std::uint64_t last_index = 0;
  std::uint64_t config_index = 0;
  bool self_retired = false;  // the member lists the asking node as retired
  bool leader = false;
  std::uint64_t self_match_index = 0;  // a leader's match index for the asking node
  std::vector<std::uint64_t> bootstrap_voters;  // sorted; empty from a node older than the field
};

// Per call; the calls run in parallel, so the whole check takes about this at most.
inline constexpr std::chrono::milliseconds kFoundingProbeDeadline{2000};

// Whether this start would found on an empty directory alongside other members: several members,
// no --join (`joins`) and no JOIN record (config.bootstrap_voters empty: apply_join_record fills
// it), and no node state in the data directory (join.h, data_dir_has_state).
bool founding_check_applies(const NodeConfig& config, bool joins);

// "" when `answer` (already filled from the wire) may be read, else why it is no answer: node id 0,
// a cluster id empty or over 256 bytes, a term above the Raft core's bound, more than 64 bootstrap
// voters or a voter 0.
std::string check_probe_answer(const FoundingAnswer& answer);

struct FoundingDecision {
  std::string refusal;  // non-empty: do not start (exit 2), for this reason
  std::string note;     // non-empty: log it and found
  // The refusal rests on members of the unchanged bootstrap configuration holding state while no
  // leader answered: a new cluster may be electing (or its leader restarting) right now, and a late
  // founder would be let in by its leader. Worth asking again shortly (kFoundingRetries).
  bool ask_again = false;
};

// How often raftlogd asks again when a refusal says ask_again, and how long it waits before each.
inline constexpr int kFoundingRetries = 3;
inline constexpr std::chrono::milliseconds kFoundingRetryWait{500};
inline constexpr std::chrono::milliseconds kFoundingRetryBudget{3000};

// What the answers mean for node `self_id` of cluster `cluster_id` (pure; exposed for tests):
// - a member whose id or cluster id is not the one --members and --cluster-id name: refused (the
//   configuration is wrong, or another cluster runs there);
// - a member whose bootstrap voters (the founders) are not `founders` (this node's --members ids,
//   sorted; empty: not checked): refused, a node that is no founder joins with --join;
// - a member that lists this node as retired, or holds this cluster's state (a term above 0, an
//   entry, a changed configuration): refused, naming the member and what it holds; the remedy is
//   `raftlogctl members replace` (docs/operations.md, "Membership"),
// - except when the leader of the unchanged bootstrap configuration answers that it never
//   replicated an entry to this node in its term: a founder that starts after the others founded
//   (a slow host) is no danger, its empty log keeps it unvouched until that leader catches it up
//   (docs/raft.md, "Unvouched nodes"), and refusing it would make a new cluster's members depend on
//   their start order. Founded with a note.
// No answer at all, or only empty members: founds, as before.
FoundingDecision decide_founding(std::uint64_t self_id, const std::string& cluster_id,
                                 const std::vector<FoundingAnswer>& answers,
                                 const std::vector<std::uint64_t>& founders = {});

// Asks every member of config.members but this node, in parallel, each call bounded by `deadline`;
// one answer per member asked (in --members order), never more than 63.
std::vector<FoundingAnswer> ask_other_members(const NodeConfig& config, const NodeTls& tls,
                                              std::chrono::milliseconds deadline);

}  // namespace raftlog::server

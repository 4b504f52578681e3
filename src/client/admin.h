// raftlog::client::MembersClient: the membership admin API (raftlog.v1.Membership,
// proto/raftlog/v1/admin.proto) for raftlogctl's `members` commands and for tests. Same endpoints,
// TLS, leader discovery and retry bounds as Client (client.h). A change is not idempotent, so it is
// retried only where it surely did nothing: unreachable nodes, NOT_LEADER / NO_LEADER, and a new
// leader not ready yet (LEADER_NOT_READY); every other refusal (CONF_CHANGE_IN_PROGRESS,
// CONF_CHANGE_TIMEOUT included) is returned at once with its reason (docs/errors.md). A change one of
// whose attempts ended ambiguously (DEADLINE_EXCEEDED, UNAVAILABLE from the transport: the request
// may have reached the leader, but not a connection that was never made: nothing was sent;
// LEADERSHIP_LOST or CONF_CHANGE_TIMEOUT: the leader proposed it, and it may still commit) and that
// then fails with a timeout or with the refusal its own success would cause (a retried add answering
// ALREADY_A_MEMBER, a remove NOT_A_MEMBER, a promotion NOT_A_LEARNER) is checked against the member
// list, polled for up to retry_deadline_ms (the change may not show yet): when the list shows the
// wanted state committed (added with the wanted role, promoted, gone and retired: an id that never
// was a member is not confirmed as removed), that is success; otherwise the failure, its message
// saying the outcome is unknown. Any other refusal (WOULD_LOSE_QUORUM, ID_RETIRED, ...) is the
// answer as it is: the change's success could not have caused it (drills6 M1).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"

namespace raftlog::client {

struct Member {
  std::uint64_t id = 0;
  std::string address;
  bool voter = false;
  bool leader = false;
  std::uint64_t match_index = 0;
  std::uint64_t lag_entries = 0;
  std::uint64_t last_contact_ms = 0;
  bool caught_up = false;
  std::string unreachable;  // the leader's last error reaching it, while it cannot ("" otherwise)
};

struct MemberList {
  std::vector<Member> members;  // sorted by id
  std::uint64_t config_index = 0;
  bool config_committed = false;
  std::uint64_t leader_id = 0;
  std::uint64_t term = 0;
  std::uint64_t commit_index = 0;
  std::uint64_t last_index = 0;
  std::vector<std::uint64_t> bootstrap_voters;
  std::vector<std::uint64_t> retired_ids;  // removed by a committed change, as the leader knows
  std::string cluster_id;                  // the leader's --cluster-id ("" from older leaders)
  std::string served_by;  // the endpoint that answered (the leader's)

  const Member* find(std::uint64_t id) const;
};

struct MembershipChange {
  std::uint64_t config_index = 0;  // the committed configuration entry
  std::uint64_t term = 0;
  std::vector<std::uint64_t> voters;
  std::vector<std::uint64_t> learners;
};

class MembersClient {
 public:
  // Options as Client's; retry_deadline_ms bounds each call (a change's wait for its commit too).
  // Each attempt has its own deadline (call_timeout_ms; a change's attempt, which waits for the
  // commit, max(call_timeout_ms, 5 s)), after which the next endpoint is tried: a node that accepts
  // connections but never answers costs one attempt, not the whole budget.
  static Result<std::unique_ptr<MembersClient>> create(Options options);
  ~MembersClient();
  MembersClient(const MembersClient&) = delete;
  MembersClient& operator=(const MembersClient&) = delete;

  // Every call made after this one returns by `deadline` (steady clock), whatever its own budget
  // (retry_deadline_ms, timeout_ms): a command made of several calls (a change, its confirmation
  // from the member list, a wait for a learner, a promotion) is bounded as a whole. One exception:
  // a change whose outcome is unknown (an ambiguous failure) whose attempts spent `deadline` still
  // checks the member list once: one list call of up to call_timeout_ms past it.
  void bound_by(std::chrono::steady_clock::time_point deadline);

  Result<MemberList> list();
  Result<MembershipChange> add(std::uint64_t id, const std::string& address, bool learner);
  Result<MembershipChange> promote(std::uint64_t id);
  Result<MembershipChange> remove(std::uint64_t id);
  // Polls list() every poll_ms until `id` holds every committed entry (its match index reaches the
  // leader's commit index), for at most timeout_ms: DEADLINE_EXCEEDED (LEARNER_BEHIND) then,
  // naming its lag, or that it is not listed as a member.
  Status wait_caught_up(std::uint64_t id, std::uint32_t timeout_ms, std::uint32_t poll_ms = 100);
  // wait_caught_up, then promote; a promotion refused as LEARNER_BEHIND (under load the commit
  // index moves on between the two) waits and tries again, all within timeout_ms.
  Result<MembershipChange> promote_when_caught_up(std::uint64_t id, std::uint32_t timeout_ms);

  class Impl;

 private:
  explicit MembersClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::client

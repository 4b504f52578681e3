// `raftlogctl status` against a fake node (fake_log.h): the line it prints under a leader past its
// disk high watermark tells keeping leadership (no follower with room), waiting out the 10 s
// between two handovers, and handing leadership over apart (review of failover, L-4: the wait read
// "handing leadership to a follower with room"), a learner's row, a disk not probed yet, an unvouched
// node's line (what it lost), and a read
// that fails printing no table header.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "fake_log.h"
#include "shared/command_run.h"
#include "shared/loopback.h"

namespace raftlog::client {
namespace {

class CtlStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.node_id = 1;  // the leader
    server_ = raftlog::testing::start_server({&fake_});
  }
  void TearDown() override { server_.shutdown(); }
  // The leader's disk is past its high watermark; `keeping` and `wait_ms` as the node says.
  std::string status(bool keeping, std::uint64_t wait_ms, const std::string& flags = "") {
    fake_.on_status = [=](pb::StatusResponse* response) {
      response->set_disk_used_ratio(0.95);
      response->set_disk_high_watermark(0.90);
      response->set_disk_over_high_watermark(true);
      response->set_disk_keeping_leadership(keeping);
      response->set_disk_handover_wait_ms(wait_ms);
    };
    const raftlog::testing::CommandRun run = raftlog::testing::run_command(
        std::string(RAFTLOGCTL_PATH) + " status " + flags + " --endpoints " + server_.address() +
        " 2>&1");
    EXPECT_EQ(run.exit_code, 0) << run.out;
    return run.out;
  }
  FakeLog fake_;
  raftlog::testing::StartedServer server_;
};

constexpr const char* kHanding = "handing leadership to a follower with room";
constexpr const char* kKeeping =
    "no follower with room acknowledges this leader's appends: keeping leadership";

TEST_F(CtlStatusTest, ALeaderPastItsWatermarkSaysWhetherItKeepsWaitsOrHandsOver) {
  const std::string waiting = status(false, 4200);
  EXPECT_NE(waiting.find("a follower reports room: waiting 4200 ms before handing leadership to "
                         "it (at most one handover per 10 s)"),
            std::string::npos)
      << waiting;
  EXPECT_EQ(waiting.find(kHanding), std::string::npos) << waiting;
  EXPECT_EQ(waiting.find(kKeeping), std::string::npos) << waiting;

  const std::string handing = status(false, 0);
  EXPECT_NE(handing.find(kHanding), std::string::npos) << handing;
  EXPECT_EQ(handing.find("waiting"), std::string::npos) << handing;

  const std::string keeping = status(true, 0);
  EXPECT_NE(keeping.find(kKeeping), std::string::npos) << keeping;
  EXPECT_EQ(keeping.find(kHanding), std::string::npos) << keeping;

  const std::string json = status(false, 4200, "--json");
  EXPECT_NE(json.find("\"disk_keeping_leadership\":false,\"disk_handover_wait_ms\":4200"),
            std::string::npos)
      << json;
}

// drills6 L5/L6: a learner's own row said "follower" (only the learners list told), and a node that
// had not probed its disk yet showed "DISK 0%". The ROLE column says "learner" (--json keeps the
// Raft role and adds "learner"), and a disk not known yet (no watermark reported, as from an older
// node or before the first probe) is "-".
TEST_F(CtlStatusTest, ALearnersRowSaysLearnerAndADiskNotProbedYetSaysUnknown) {
  fake_.on_status = [](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->add_learners(1);
    response->set_disk_used_ratio(0.0);
    response->set_disk_high_watermark(0.0);
  };
  const raftlog::testing::CommandRun text = raftlog::testing::run_command(
      std::string(RAFTLOGCTL_PATH) + " status --no-headers --endpoints " + server_.address() +
      " 2>&1");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  std::istringstream row(text.out.substr(0, text.out.find('\n')));
  std::vector<std::string> columns;
  for (std::string column; row >> column;) columns.push_back(column);
  // ENDPOINT ID ROLE TERM LEADER FIRST LAST COMMIT FLUSHED MODE DISK VERSION...
  ASSERT_GE(columns.size(), 11u) << text.out;
  EXPECT_EQ(columns[2], "learner") << text.out;
  EXPECT_EQ(columns[10], "-") << text.out;

  const raftlog::testing::CommandRun json = raftlog::testing::run_command(
      std::string(RAFTLOGCTL_PATH) + " status --json --endpoints " + server_.address() + " 2>&1");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_NE(json.out.find("\"role\":\"follower\",\"learner\":true"), std::string::npos)
      << json.out;
}

// drills7 L1 (review of lagging6, #5): a follower catching up to its leader's commit index says so
// with the index and the gap, in text and JSON; a learner from a node older than field 78 sends
// only learner_catching_up_to_index, and its line has no gap.
TEST_F(CtlStatusTest, AFollowerCatchingUpToItsLeaderSaysTheIndexAndTheGap) {
  fake_.on_status = [](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->add_voters(1);
    response->set_catching_up_to_leader_commit(15189);
    response->set_behind_leader_commit_entries(15152);
    response->set_not_serving_reason("catching up to the commit index its leader named (...)");
  };
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " status --endpoints " + server_.address();
  raftlog::testing::CommandRun run = raftlog::testing::run_command(ctl + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("    CATCHING UP to the commit index 15189 its leader named, 15152 "
                         "entries behind: not serving yet"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("LEARNER"), std::string::npos) << run.out;
  run = raftlog::testing::run_command(ctl + " --json 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("\"catching_up_to_leader_commit\":15189,\"behind_leader_commit_entries\":"
                         "15152,\"not_serving_reason\":\"catching up to the commit index its "
                         "leader named (...)\""),
            std::string::npos)
      << run.out;

  fake_.on_status = [](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->add_learners(1);
    response->set_learner_catching_up_to_index(40);
  };
  run = raftlog::testing::run_command(ctl + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("    LEARNER CATCHING UP to the commit index 40 its leader named: not "
                         "serving yet"),
            std::string::npos)
      << run.out;

  fake_.on_status = [](pb::StatusResponse* response) { response->set_role(pb::ROLE_FOLLOWER); };
  run = raftlog::testing::run_command(ctl + " 2>&1");
  EXPECT_EQ(run.out.find("CATCHING UP"), std::string::npos) << run.out;
}

// amnesia2 review L4: the UNVOUCHED line said "started on an empty data directory" also for a node
// that lost only its log/. While it catches up it prints the node's own reason (storage_fault);
// before that, a sentence that names both losses.
TEST_F(CtlStatusTest, AnUnvouchedNodesLineSaysWhatItLost) {
  const std::string log_lost = "started with an empty log beside its kept HARDSTATE and CONFSTATE "
                               "(its log/ was lost): waiting for a leader to catch it up";
  fake_.on_status = [&](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->set_unvouched(true);
    response->set_catching_up(true);
    response->set_catching_up_to_index(42);
    response->set_storage_fault(log_lost);
  };
  const std::string command =
      std::string(RAFTLOGCTL_PATH) + " status --endpoints " + server_.address() + " 2>&1";
  raftlog::testing::CommandRun run = raftlog::testing::run_command(command);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("UNVOUCHED: " + log_lost + " (catching up to index 42)"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("empty data directory"), std::string::npos) << run.out;

  fake_.on_status = [](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->set_unvouched(true);
  };
  run = raftlog::testing::run_command(command);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("UNVOUCHED: started with an empty log (an empty data directory, or its "
                         "log/ lost)"),
            std::string::npos)
      << run.out;
}

// drills7 H4: a wedged unvouched node's status says it may be waiting for an operator, under its
// UNVOUCHED line and in --json (before, "no leader" alone read as an election in progress).
TEST_F(CtlStatusTest, AWedgedUnvouchedNodeSaysItMayBeWaitingForAnOperator) {
  const std::string hint = "no leader has caught it up, or moved its log, for 12 s: ... "
                           "waiting for an operator (docs/operations.md, ...)";
  fake_.on_status = [&](pb::StatusResponse* response) {
    response->set_role(pb::ROLE_FOLLOWER);
    response->set_unvouched(true);
    response->set_unvouched_hint(hint);
  };
  const std::string command =
      std::string(RAFTLOGCTL_PATH) + " status --endpoints " + server_.address() + " 2>&1";
  raftlog::testing::CommandRun run = raftlog::testing::run_command(command);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("UNVOUCHED: started with an empty log"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\n    " + hint + "\n"), std::string::npos) << run.out;
  run = raftlog::testing::run_command(command + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("\"unvouched_hint\":\"" + hint + "\""), std::string::npos) << run.out;
}

// drills6 L8: operations.md sends an operator to the derived-index and group fields of Status to
// see how far behind the indexes are; `status --json` printed none of them (only /metrics showed it).
TEST_F(CtlStatusTest, TheJsonViewHasTheDerivedIndexAndGroupFields) {
  fake_.on_status = [](pb::StatusResponse* response) {
    response->set_derived_indexed_through(900);
    response->set_derived_lag_entries(4596);
    response->set_groups_applied_through(880);
    response->set_groups_retention_hold(700);
  };
  const raftlog::testing::CommandRun json = raftlog::testing::run_command(
      std::string(RAFTLOGCTL_PATH) + " status --json --endpoints " + server_.address() + " 2>&1");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  for (const char* field :
       {"\"derived_indexed_through\":900", "\"derived_lag_entries\":4596", "\"derived_problem\":\"\"",
        "\"groups_applied_through\":880", "\"groups_retention_hold\":700"}) {
    EXPECT_NE(json.out.find(field), std::string::npos) << field << " in " << json.out;
  }
}

// drills6 L4: `raftlogctl read` of a trimmed range printed its table header and then the error:
// a script saw a table with no rows. A failing read prints no table; an empty one keeps its header.
TEST_F(CtlStatusTest, AReadThatFailsPrintsNoTableHeader) {
  fake_.on_read = [](grpc::ServerContext*, int, const pb::ReadRequest&, pb::ReadResponse*) {
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "index 500 is below the first retained "
                                                        "index 22113 (trimmed)");
  };
  // stdout alone (run_command adds 2>&1 to the outer command).
  const std::string read = "sh -c '" + std::string(RAFTLOGCTL_PATH) +
                           " read --from 500 --count 1 --endpoints " + server_.address() +
                           " 2>/dev/null'";
  const raftlog::testing::CommandRun failed = raftlog::testing::run_command(read);
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_EQ(failed.out, "") << "stdout must stay empty when the read fails";

  fake_.on_read = [](grpc::ServerContext*, int, const pb::ReadRequest&, pb::ReadResponse* out) {
    out->set_commit_index(0);
    return grpc::Status::OK;
  };
  const raftlog::testing::CommandRun empty = raftlog::testing::run_command(read);
  EXPECT_EQ(empty.exit_code, 0);
  EXPECT_EQ(empty.out, "INDEX\tTERM\tPAYLOAD\n");
}

}  // namespace
}  // namespace raftlog::client

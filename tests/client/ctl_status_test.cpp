// `raftlogctl status` against a fake node (fake_log.h): the line it prints under a leader past its
// disk high watermark tells keeping leadership (no follower with room), waiting out the 10 s
// between two handovers, and handing leadership over apart (review of failover, L-4: the wait read
// "handing leadership to a follower with room").
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace raftlog::client

// raftlog.v1.Groups on a real one-node Server in process, through client::Groups: commits fetched
// back (and after a restart), the commit entry in the log, and every refusal's reason word.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/groups.h"
#include "node/temp_dir.h"
#include "server/groups_service.h"
#include "server/server.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

std::string reason_of(const client::Status& status) {
  return status.details() ? status.details()->reason : "";
}

// A one-node cluster in this process over `dir` (kept across restarts), with its clients.
class GroupsNode {
 public:
  explicit GroupsNode(const std::string& dir, int port = 0,
                      std::uint64_t segment_size_bytes = 64ULL << 20) {
    config_.node_id = 1;
    config_.members[1] = loopback_address(port != 0 ? port : pick_free_loopback_port());
    config_.data_dir = dir;
    config_.store.flush_mode = store::FlushMode::kAsync;  // durability is not the point here
    config_.store.segment_size_bytes = segment_size_bytes;
    if (segment_size_bytes < (64ULL << 20)) config_.store.max_entry_size_bytes = 64 << 10;
    config_.disk_high_watermark = 1.0;
    config_.disk_low_watermark = 0.99;
    std::string error;
    server_ = server::Server::start(config_, &error);
    EXPECT_NE(server_, nullptr) << error;
    if (server_ == nullptr) return;
    client::Options options;
    options.endpoints = {server_->bound_address()};
    options.retry_deadline_ms = 5000;
    auto groups = client::Groups::create(options);
    EXPECT_TRUE(groups.ok());
    groups_ = std::move(groups).value();
    auto log = client::Client::create(options);
    EXPECT_TRUE(log.ok());
    log_ = std::move(log).value();
  }
  ~GroupsNode() {
    if (server_ != nullptr) server_->shutdown();
  }
  int port() const {
    return std::stoi(config_.members.at(1).substr(config_.members.at(1).rfind(':') + 1));
  }
  bool started() const { return server_ != nullptr; }
  client::Groups& groups() { return *groups_; }
  const std::string& address() const { return server_->bound_address(); }
  client::Client& log() { return *log_; }
  // Appends `count` entries to `topic`.
  void append_to(const std::string& topic, std::size_t count) {
    std::vector<std::string> payloads(count, "e");
    std::vector<client::EntryAttributes> attributes(count, client::EntryAttributes{topic, {}});
    auto appended = log_->append(payloads, attributes);
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  }

 private:
  server::NodeConfig config_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<client::Groups> groups_;
  std::unique_ptr<client::Client> log_;
};

TEST(GroupsService, CommitsAreFetchedBackListedInTheLogAndSurviveARestart) {
  server::testing::TempDir dir;
  int port = 0;
  std::uint64_t commit_index = 0;
  {
    GroupsNode node(dir.path());
    ASSERT_TRUE(node.started());
    port = node.port();
    ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 10));
    ASSERT_NO_FATAL_FAILURE(node.append_to("payments", 3));
    auto none = node.groups().fetch("billing");
    ASSERT_TRUE(none.ok()) << none.status().to_string();
    EXPECT_TRUE(none->offsets.empty());

    ASSERT_TRUE(node.groups().commit("billing", "orders", 4).ok());
    auto committed = node.groups().commit("billing", "orders", 7);  // last writer wins
    ASSERT_TRUE(committed.ok()) << committed.status().to_string();
    commit_index = committed->index;
    ASSERT_TRUE(node.groups().commit("billing", "payments", 3).ok());  // the end offset itself
    ASSERT_TRUE(node.groups().commit("audit", "orders", 0).ok());

    // Read-your-writes: right after the answers.
    auto fetched = node.groups().fetch("billing");
    ASSERT_TRUE(fetched.ok()) << fetched.status().to_string();
    ASSERT_EQ(fetched->offsets.size(), 2U);
    EXPECT_EQ(fetched->offsets[0].topic, "orders");
    EXPECT_EQ(fetched->offsets[0].offset, 7U);
    EXPECT_EQ(fetched->offsets[0].commit_index, commit_index);
    EXPECT_EQ(fetched->offsets[1].topic, "payments");
    EXPECT_EQ(fetched->offsets[1].offset, 3U);
    EXPECT_GE(fetched->read_index, commit_index);
    auto named = node.groups().fetch("billing", {"payments", "nothing-here"});
    ASSERT_TRUE(named.ok()) << named.status().to_string();
    ASSERT_EQ(named->offsets.size(), 1U);
    EXPECT_EQ(named->offsets[0].topic, "payments");
    auto listing = node.groups().list();
    ASSERT_TRUE(listing.ok()) << listing.status().to_string();
    ASSERT_EQ(listing->groups.size(), 2U);
    EXPECT_EQ(listing->groups[0].group, "audit");
    EXPECT_EQ(listing->groups[1].group, "billing");
    EXPECT_EQ(listing->groups[1].topics, 2U);
    EXPECT_TRUE(listing->complete);

    // The commit is an entry of the log, marked as such for readers.
    auto read = node.log().read(commit_index, 1, 0, true);
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    ASSERT_EQ(read->entries.size(), 1U);
    EXPECT_EQ(read->entries[0].type, client::EntryType::kGroupCommit);
    EXPECT_FALSE(read->entries[0].has_attributes);
  }
  GroupsNode restarted(dir.path(), port);
  ASSERT_TRUE(restarted.started());
  auto fetched = restarted.groups().fetch("billing", {"orders"});
  ASSERT_TRUE(fetched.ok()) << fetched.status().to_string();
  ASSERT_EQ(fetched->offsets.size(), 1U);
  EXPECT_EQ(fetched->offsets[0].offset, 7U);
  EXPECT_EQ(fetched->offsets[0].commit_index, commit_index);
}

TEST(GroupsService, EveryRefusalNamesItsReasonAndWritesNothing) {
  server::testing::TempDir dir;
  GroupsNode node(dir.path());
  ASSERT_TRUE(node.started());
  ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 5));
  client::Groups& groups = node.groups();

  EXPECT_EQ(reason_of(groups.commit("", "orders", 1).status()), "BAD_GROUP");
  EXPECT_EQ(reason_of(groups.commit(std::string(129, 'g'), "orders", 1).status()), "BAD_GROUP");
  EXPECT_EQ(reason_of(groups.commit("a/b", "orders", 1).status()), "BAD_GROUP");
  EXPECT_EQ(reason_of(groups.commit("-g", "orders", 1).status()), "BAD_GROUP");
  EXPECT_EQ(reason_of(groups.commit("g", "", 1).status()), "BAD_TOPIC");
  EXPECT_EQ(reason_of(groups.commit("g", "bad topic", 1).status()), "BAD_TOPIC");
  EXPECT_EQ(reason_of(groups.commit("g", "never-appended", 0).status()), "UNKNOWN_TOPIC");
  const client::Status beyond = groups.commit("g", "orders", 6).status();
  EXPECT_EQ(beyond.code(), client::StatusCode::kInvalidArgument);
  EXPECT_EQ(reason_of(beyond), "OFFSET_BEYOND_END");
  EXPECT_EQ(reason_of(groups.commit("g", "orders", ~std::uint64_t{0}).status()),
            "OFFSET_BEYOND_END");
  EXPECT_EQ(reason_of(groups.fetch("bad/group").status()), "BAD_GROUP");
  EXPECT_EQ(reason_of(groups.fetch("g", {"ok", "bad/topic"}).status()), "BAD_TOPIC");
  EXPECT_EQ(reason_of(groups.fetch("g", std::vector<std::string>(65, "t")).status()), "BAD_TOPIC");
  // Nothing of the above reached the log or the table.
  auto listing = groups.list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  EXPECT_TRUE(listing->groups.empty());

  // 64 topics per group.
  for (int t = 0; t < 65; ++t) ASSERT_NO_FATAL_FAILURE(node.append_to("t" + std::to_string(t), 1));
  for (int t = 0; t < 64; ++t) {
    auto committed = groups.commit("wide", "t" + std::to_string(t), 1);
    ASSERT_TRUE(committed.ok()) << t << ": " << committed.status().to_string();
  }
  const client::Status too_wide = groups.commit("wide", "t64", 1).status();
  EXPECT_EQ(too_wide.code(), client::StatusCode::kResourceExhausted);
  EXPECT_EQ(reason_of(too_wide), "TOO_MANY_GROUP_TOPICS");
  EXPECT_TRUE(groups.commit("wide", "t3", 0).ok());  // an existing slot still takes commits
  auto wide = groups.fetch("wide");
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->offsets.size(), 64U);
}

TEST(GroupsService, ATableRebuiltAfterRetentionSaysUnknownInsteadOfGuessing) {
  server::testing::TempDir dir;
  int port = 0;
  {
    GroupsNode node(dir.path(), 0, 256 << 10);
    ASSERT_TRUE(node.started());
    port = node.port();
    ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 3));
    ASSERT_TRUE(node.groups().commit("billing", "orders", 2).ok());
    std::vector<std::string> filler(8, std::string(16 << 10, 'f'));  // 128 KiB per append
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(node.log().append(filler).ok());
    auto last = node.log().append({"end"});
    ASSERT_TRUE(last.ok());
    // A slot change persists the table within 200 ms, moving the retention hold past the filler
    // (a boundary-only move would wait up to 10 s).
    ASSERT_TRUE(node.groups().commit("other", "orders", 1).ok());
    std::this_thread::sleep_for(600ms);
    // A trim answers after one round of the loop; on a loaded machine its durable steps spread
    // over more rounds (ReplicaConfig::trim_round_budget_ms), so ask again until it is done.
    auto trimmed = node.log().trim(node.address(), last->last_index);
    for (int attempt = 0; attempt < 100 && trimmed.ok() && trimmed->first_index <= 10; ++attempt) {
      std::this_thread::sleep_for(50ms);
      trimmed = node.log().trim(node.address(), last->last_index);
    }
    ASSERT_TRUE(trimmed.ok()) << trimmed.status().to_string();
    ASSERT_GT(trimmed->first_index, 10U) << "the commit entry must be trimmed";
    // The persisted table still has it.
    auto kept = node.groups().fetch("billing");
    ASSERT_TRUE(kept.ok());
    ASSERT_EQ(kept->offsets.size(), 1U);
  }
  // Losing derived/GROUPS now loses what only it held: the rebuilt table says so.
  std::filesystem::remove(std::filesystem::path(dir.path()) / "derived" / "GROUPS");
  GroupsNode node(dir.path(), port, 256 << 10);
  ASSERT_TRUE(node.started());
  const client::Status all = node.groups().fetch("billing").status();
  EXPECT_EQ(all.code(), client::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reason_of(all), "GROUP_OFFSETS_UNKNOWN");
  EXPECT_EQ(reason_of(node.groups().fetch("billing", {"orders"}).status()),
            "GROUP_OFFSETS_UNKNOWN");
  auto listing = node.groups().list();
  ASSERT_TRUE(listing.ok());
  EXPECT_FALSE(listing->complete);
  // A new commit makes the slot known again.
  ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 1));
  ASSERT_TRUE(node.groups().commit("billing", "orders", 1).ok());
  auto fetched = node.groups().fetch("billing", {"orders"});
  ASSERT_TRUE(fetched.ok()) << fetched.status().to_string();
  ASSERT_EQ(fetched->offsets.size(), 1U);
  EXPECT_EQ(fetched->offsets[0].offset, 1U);
}

TEST(GroupsService, TheNumberOfGroupsIsBounded) {
  server::testing::TempDir dir;
  GroupsNode node(dir.path());
  ASSERT_TRUE(node.started());
  ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 1));
  for (int g = 0; g < 1024; ++g) {
    auto committed = node.groups().commit("g" + std::to_string(g), "orders", 1);
    ASSERT_TRUE(committed.ok()) << g << ": " << committed.status().to_string();
  }
  const client::Status refused = node.groups().commit("one-more", "orders", 1).status();
  EXPECT_EQ(refused.code(), client::StatusCode::kResourceExhausted);
  EXPECT_EQ(reason_of(refused), "TOO_MANY_GROUPS");
  auto listing = node.groups().list();
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->groups.size(), 1024U);
}

// A node whose derived directory cannot be opened (here: the indexes cannot write their cursor)
// serves without a group table; retention must still stop at derived/GROUPS's boundary, so that
// the start that opens the table again finds every commit it has not applied in the log.
TEST(GroupsService, WithoutAGroupTableRetentionIsHeldAtTheFilesBoundary) {
  server::testing::TempDir dir;
  int port = 0;
  std::uint64_t last_first_run = 0;
  {
    GroupsNode node(dir.path(), 0, 256 << 10);
    ASSERT_TRUE(node.started());
    port = node.port();
    ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 3));
    ASSERT_TRUE(node.groups().commit("billing", "orders", 2).ok());
    auto end = node.log().append({"end"});
    ASSERT_TRUE(end.ok());
    last_first_run = end->last_index;
  }  // a clean stop persists the table, through at most last_first_run (+ a no-op)
  const std::filesystem::path derived = std::filesystem::path(dir.path()) / "derived";
  std::filesystem::remove(derived / "CURSOR");  // the indexes rebuild ...
  std::filesystem::create_directories(derived / "CURSOR.tmp" /
                                      "blocker");  // ... and cannot persist
  {
    GroupsNode node(dir.path(), port, 256 << 10);
    ASSERT_TRUE(node.started());
    // Enough to trim far past the table's boundary.
    std::vector<std::string> filler(8, std::string(16 << 10, 'f'));  // 128 KiB per append
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(node.log().append(filler).ok());
    auto last = node.log().append({"end"});
    ASSERT_TRUE(last.ok());
    auto trimmed = node.log().trim(node.address(), last->last_index);
    ASSERT_TRUE(trimmed.ok()) << trimmed.status().to_string();
    EXPECT_LE(trimmed->first_index, last_first_run + 2)
        << "retention passed the group table's boundary";
  }
  std::filesystem::remove_all(derived / "CURSOR.tmp");
  GroupsNode node(dir.path(), port, 256 << 10);
  ASSERT_TRUE(node.started());
  auto fetched = node.groups().fetch("billing");
  ASSERT_TRUE(fetched.ok()) << fetched.status().to_string();
  ASSERT_EQ(fetched->offsets.size(), 1U);
  EXPECT_EQ(fetched->offsets[0].offset, 2U);
}

// The Status RPC exports the group table: how far it applied, the retention hold, bad commits.
TEST(GroupsService, TheStatusRpcExportsTheGroupTable) {
  server::testing::TempDir dir;
  GroupsNode node(dir.path());
  ASSERT_TRUE(node.started());
  ASSERT_NO_FATAL_FAILURE(node.append_to("orders", 2));
  auto committed = node.groups().commit("billing", "orders", 1);
  ASSERT_TRUE(committed.ok()) << committed.status().to_string();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  client::NodeStatus status;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = node.log().status(node.address());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    status = got.value();
    if (status.groups_retention_hold > committed->index) break;  // persisted (a slot changed)
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(status.groups_applied_through, committed->index);
  EXPECT_GT(status.groups_retention_hold, committed->index);
  EXPECT_LE(status.groups_retention_hold, status.groups_applied_through + 1);
  EXPECT_EQ(status.groups_bad_commits, 0U);
  EXPECT_EQ(status.groups_refused_commits, 0U);
  // Entries that change no slot move the applied boundary, and the retention hold follows at the
  // next persist (Dispatcher::kGroupsHoldLagEntries = 1), so a trim right after appends waits at
  // most one persist interval; GROUPS is rewritten for it.
  const std::filesystem::path file = std::filesystem::path(dir.path()) / "derived" / "GROUPS";
  const auto written = std::filesystem::last_write_time(file);
  const std::uint64_t hold = status.groups_retention_hold;
  auto plain = node.log().append({"a", "b", "c"});
  ASSERT_TRUE(plain.ok());
  std::this_thread::sleep_for(800ms);
  auto after = node.log().status(node.address());
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->groups_applied_through, plain->last_index);
  EXPECT_GT(after->groups_retention_hold, hold);
  EXPECT_GT(after->groups_retention_hold, plain->last_index);
  EXPECT_NE(std::filesystem::last_write_time(file), written);
}

// Waits on the server end before the client's default call timeout, so a slow table is answered
// GROUPS_BEHIND (which the client retries) rather than cut off by the client's deadline.
TEST(GroupsService, TheApplyWaitEndsBeforeTheClientsDefaultCallTimeout) {
  EXPECT_LT(server::GroupsService::kApplyWaitMs, client::Options{}.call_timeout_ms);
}

}  // namespace
}  // namespace raftlog::testing

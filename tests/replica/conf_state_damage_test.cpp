// A damaged CONFSTATE (or HARDSTATE) never puts a node on a configuration (or a term and vote) that
// is no longer its own (outside test finding drills2 F2): a node whose log was trimmed past a
// membership change ran the founders' --members after its CONFSTATE was removed, zeroed or cut
// short, and formed a majority with a retired node. Such a directory is now refused with the
// reason; one that nothing contradicts (a directory from before membership changes) still opens and
// gets its record. Driven by hand as follower 2 of {1, 2, 3} over a stepped store.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "derived/envelope.h"
#include "replica/conf_state_file.h"
#include "replica/hard_state_file.h"
#include "replica/replica.h"
#include "replica/topic_state_file.h"
#include "stepped_follower_config.h"
#include "store/durable_record.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

using raft::ConfState;

constexpr std::uint64_t kEntries = 32;
// Entries 12, 13 and 14 replace node 3 by node 4: learner 4 added, promoted, then 3 removed.
constexpr std::uint64_t kFirstChange = 12;
constexpr std::uint64_t kLastChange = 14;

ConfState conf_after(std::uint64_t change_index) {
  if (change_index == 12) return ConfState{{1, 2, 3}, {4}};
  if (change_index == 13) return ConfState{{1, 2, 3, 4}};
  return ConfState{{1, 2, 4}};
}

enum class Damage { kRemoved, kZeroed, kCutTo100Bytes, kCutToOneSlot, kCutInSecondSlot };

std::string to_string(Damage damage) {
  switch (damage) {
    case Damage::kRemoved:
      return "removed";
    case Damage::kZeroed:
      return "zeroed";
    case Damage::kCutTo100Bytes:
      return "cut to 100 bytes";
    case Damage::kCutToOneSlot:
      return "cut to its first slot";
    case Damage::kCutInSecondSlot:
      return "cut inside its second slot";
  }
  return "?";
}

constexpr Damage kEveryDamage[] = {Damage::kRemoved, Damage::kZeroed, Damage::kCutTo100Bytes,
                                   Damage::kCutToOneSlot, Damage::kCutInSecondSlot};

class ConfStateDamageTest : public ::testing::Test {
 protected:
  std::unique_ptr<Replica> try_open(NodeError* error) {
    ReplicaConfig c = testing::stepped_follower_config(env_.get());
    c.raft.snapshots = true;
    if (adjust_) adjust_(&c);
    return Replica::open(std::move(c), testing::stepped_follower_deps(&sender_, &disk_), error);
  }
  void open() {
    NodeError error;
    replica_ = try_open(&error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  // Leader 1 of term 1 sends entries 1..32 (15 KiB each, several segments), all committed and
  // flushed; with `changes`, 12..14 replace node 3 by node 4.
  void build_log(bool changes) {
    open();
    for (std::uint64_t from = 1; from <= kEntries; from += 8) {
      std::vector<raft::Entry> entries;
      for (std::uint64_t index = from; index < from + 8; ++index) {
        raft::Entry entry =
            testing::client_entry(index, std::string(15 << 10, static_cast<char>('a' + index % 26)));
        if (envelopes_) {  // topic "orders", offset index - 1 (a version-2 envelope)
          const std::string body(15 << 10, static_cast<char>('a' + index % 26));
          std::string enveloped;
          derived::encode_envelope(1000 + index, "orders", {}, body, &enveloped);
          EXPECT_TRUE(derived::stamp_envelope(&enveloped, 1000 + index, index - 1));
          entry.payload = enveloped;
          entry.has_envelope = true;
        }
        if (changes && index >= kFirstChange && index <= kLastChange) {
          entry.type = raft::EntryType::kConfig;
          entry.client_id = 0;
          entry.sequence = 0;
          entry.payload = raft::encode_config(conf_after(index));
        }
        entries.push_back(std::move(entry));
      }
      replica_->step(testing::leader_append(from - 1, std::move(entries), kEntries));
      replica_->process();
      ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
      replica_->process();
    }
    ASSERT_TRUE(replica_->log().run_checkpoint().ok());
    ASSERT_EQ(replica_->commit_index(), kEntries);
  }
  void trim_below(std::uint64_t index) {
    const TrimResult trimmed = replica_->trim(index, "test:");
    ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  }
  void damage(const std::string& name, Damage how) {
    const std::string path = "/data/" + name;
    auto bytes = env_->read_file(path, 1 << 20);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    ASSERT_EQ(bytes->size(), store::DurableRecordFile::kFileBytes);
    ASSERT_TRUE(env_->remove(path).ok());
    switch (how) {
      case Damage::kRemoved:
        return;
      case Damage::kZeroed:
        ASSERT_TRUE(env_->write_file(path, std::string(bytes->size(), '\0')).ok());
        return;
      case Damage::kCutTo100Bytes:
        ASSERT_TRUE(env_->write_file(path, bytes->substr(0, 100)).ok());
        return;
      case Damage::kCutToOneSlot:
        ASSERT_TRUE(env_->write_file(path, bytes->substr(0, 4096)).ok());
        return;
      case Damage::kCutInSecondSlot:
        ASSERT_TRUE(env_->write_file(path, bytes->substr(0, 4096 + 30)).ok());
        return;
    }
  }
  // Closes the node, damages `name` and opens it again: the error when the open is refused, else
  // "" (the node is then open).
  std::string reopen_after(const std::string& name, Damage how) {
    replica_.reset();
    damage(name, how);
    if (::testing::Test::HasFatalFailure()) return "damage failed";
    NodeError error;
    replica_ = try_open(&error);
    return replica_ == nullptr ? error.message : "";
  }
  void start_over() {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
  }
  std::vector<raft::ConfRecord> recorded() {
    auto file = ConfStateFile::open("/data", env_.get());
    EXPECT_TRUE(file.ok()) << file.status().to_string();
    return file.ok() ? (*file)->current() : std::vector<raft::ConfRecord>{};
  }

  std::unique_ptr<store::MemoryEnv> env_ = std::make_unique<store::MemoryEnv>();
  bool envelopes_ = false;  // build_log's entries carry topic "orders"
  std::function<void(ReplicaConfig*)> adjust_;
  testing::RecordingSender sender_;
  testing::RoomyDisk disk_;
  std::unique_ptr<Replica> replica_;
};

// The finding: the log starts past the change entries, SNAPSHOT (the trim's) holds {1, 2, 4} at
// its point; without CONFSTATE the node ran {1, 2, 3}. Now refused, naming the file and a remedy.
TEST_F(ConfStateDamageTest, ALostRecordBesideALogTrimmedPastAChangeIsRefused) {
  for (Damage how : kEveryDamage) {
    const std::string where = "CONFSTATE " + to_string(how);
    start_over();
    ASSERT_NO_FATAL_FAILURE(build_log(/*changes=*/true));
    ASSERT_NO_FATAL_FAILURE(trim_below(24));
    ASSERT_GT(replica_->log().first_index(), kLastChange + 1) << "the trim passes the changes";
    ASSERT_EQ(replica_->core().conf(), conf_after(kLastChange));
    const std::string refused = reopen_after("CONFSTATE", how);
    ASSERT_NE(refused, "") << where << ": the node opened with configuration "
                           << raft::to_string(replica_->core().conf());
    EXPECT_NE(refused.find("CONFSTATE"), std::string::npos) << where << ": " << refused;
    EXPECT_NE(refused.find("docs/operations.md"), std::string::npos) << where << ": " << refused;
  }
}

// The change entries are still in the log (no trim): the bootstrap configuration is no longer the
// one in force either.
TEST_F(ConfStateDamageTest, ALostRecordBesideAConfigurationEntryInTheLogIsRefused) {
  for (Damage how : kEveryDamage) {
    const std::string where = "CONFSTATE " + to_string(how);
    start_over();
    ASSERT_NO_FATAL_FAILURE(build_log(/*changes=*/true));
    const std::string refused = reopen_after("CONFSTATE", how);
    ASSERT_NE(refused, "") << where << ": the node opened with configuration "
                           << raft::to_string(replica_->core().conf());
    // Removed or zeroed: no record, and the entry is the reason; cut short: the file's own damage.
    const bool no_record = how == Damage::kRemoved || how == Damage::kZeroed;
    EXPECT_NE(refused.find(no_record ? "configuration entry" : "CONFSTATE"), std::string::npos)
        << where << ": " << refused;
  }
}

// A directory whose configuration never changed, as one written before membership changes existed
// (no CONFSTATE record, a trimmed log): it opens with its bootstrap configuration as before, and
// its record is written, so that from now on a missing one is damage.
TEST_F(ConfStateDamageTest, ADirectoryWithoutChangesOpensAndGetsItsRecord) {
  ASSERT_NO_FATAL_FAILURE(build_log(/*changes=*/false));
  ASSERT_NO_FATAL_FAILURE(trim_below(24));
  const std::uint64_t first = replica_->log().first_index();
  ASSERT_GT(first, 1U);
  ASSERT_EQ(reopen_after("CONFSTATE", Damage::kRemoved), "");
  EXPECT_EQ(replica_->core().conf(), (ConfState{{1, 2, 3}}));
  EXPECT_EQ(replica_->log().first_index(), first);
  replica_.reset();
  const std::vector<raft::ConfRecord> record = recorded();
  ASSERT_EQ(record.size(), 1U);
  EXPECT_EQ(record.front().index, 0U);
  EXPECT_EQ(record.front().conf, (ConfState{{1, 2, 3}}));
}

// A new directory gets its record at its first open: the bootstrap configuration, entry 0.
TEST_F(ConfStateDamageTest, ANewDirectoryGetsTheBootstrapRecordAtOnce) {
  ASSERT_NO_FATAL_FAILURE(open());
  replica_.reset();
  const std::vector<raft::ConfRecord> record = recorded();
  ASSERT_EQ(record.size(), 1U);
  EXPECT_EQ(record.front().index, 0U);
  EXPECT_EQ(record.front().conf, (ConfState{{1, 2, 3}}));
  // A new directory that lost it before anything happened is still new: it opens.
  ASSERT_EQ(reopen_after("CONFSTATE", Damage::kZeroed), "");
}

// A record that still names the bootstrap configuration (entry 0) but another one is configured:
// a joined node that lost its JOIN file (it restarts with --members naming itself alone, so its
// bootstrap would be {2}), or --members edited. Refused instead of running {2} alone.
TEST_F(ConfStateDamageTest, ABootstrapRecordOtherThanTheConfiguredOneIsRefused) {
  ASSERT_NO_FATAL_FAILURE(open());
  replica_.reset();
  adjust_ = [](ReplicaConfig* c) {
    c->members = {{2, "n2"}};
    c->raft.initial_conf.voters = {2};
  };
  NodeError error;
  replica_ = try_open(&error);
  ASSERT_EQ(replica_, nullptr) << "opened with " << raft::to_string(replica_->core().conf());
  EXPECT_NE(error.message.find("bootstrap"), std::string::npos) << error.message;
}

// HARDSTATE cut short: the slot left may hold an older term and vote (a node that forgot its vote
// can vote twice in one term). Refused, whichever slot the cut leaves.
TEST_F(ConfStateDamageTest, AHardStateCutShortIsRefused) {
  for (Damage how : {Damage::kCutToOneSlot, Damage::kCutInSecondSlot, Damage::kCutTo100Bytes}) {
    start_over();
    ASSERT_NO_FATAL_FAILURE(build_log(/*changes=*/false));
    // Term 2 seen after the entries of term 1: slot 0 holds term 1, slot 1 term 2, so a cut that
    // keeps only the first slot brings back term 1.
    raft::Message heartbeat = testing::leader_append(kEntries, {}, kEntries);
    heartbeat.term = 2;
    heartbeat.type = raft::MessageType::kHeartbeat;
    replica_->step(heartbeat);
    replica_->process();
    ASSERT_EQ(replica_->core().term(), 2U);
    const std::string refused = reopen_after("HARDSTATE", how);
    EXPECT_NE(refused, "") << "HARDSTATE " << to_string(how) << ": opened with term "
                           << replica_->core().term();
  }
}

// TOPICSTATE lost beside a log trimmed past entries of version 2 (offsets the leader assigned):
// the trim's SNAPSHOT holds the topic table as of the log's first index - 1, and the table is
// rebuilt from it and the log, exactly. It was refused (remedy: copy a peer's directory).
TEST_F(ConfStateDamageTest, ALostTopicStateBesideATrimmedLogIsRebuiltFromSnapshot) {
  envelopes_ = true;
  ASSERT_NO_FATAL_FAILURE(build_log(/*changes=*/false));
  ASSERT_NO_FATAL_FAILURE(trim_below(24));
  ASSERT_GT(replica_->log().first_index(), 1U);
  ASSERT_EQ(replica_->topic_offsets().next_offset("orders"), kEntries);
  replica_.reset();
  ASSERT_TRUE(env_->remove("/data/TOPICSTATE").ok());
  NodeError error;
  replica_ = try_open(&error);
  ASSERT_NE(replica_, nullptr) << error.message;
  EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), kEntries);
  replica_.reset();
  auto saved = read_topic_state(env_.get(), "/data");
  ASSERT_TRUE(saved.ok() && saved->has_value()) << "written again at the open";
  EXPECT_EQ((*saved)->topics, (std::vector<TopicOffsets::TopicNext>{{"orders", kEntries}}));
}

// The warning lines logged while `open` runs (the library's default logger).
std::string warnings_during(const std::function<void()>& open) {
  std::ostringstream lines;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines);
  sink->set_level(spdlog::level::warn);
  spdlog::default_logger()->sinks().push_back(sink);
  const spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::info);
  open();
  spdlog::set_level(level);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  return lines.str();
}

// A flipped byte in HARDSTATE's (or CONFSTATE's) newer slot fell back to the older slot without a
// log line (outside test L2): the open still uses the older slot, and says so once, naming the file
// and the slot (docs/operations.md, "Damaged data at startup").
TEST(TwoSlotFallback, ADamagedNewerSlotOfHardStateOrConfStateIsUsedNoMoreAndSaidSo) {
  store::MemoryEnv env;
  {
    auto file = HardStateFile::open("/data", &env);
    ASSERT_TRUE(file.ok()) << file.status().message();
    ASSERT_TRUE((*file)->write(raft::HardState{1, 0}).ok());  // slot 0
    ASSERT_TRUE((*file)->write(raft::HardState{2, 3}).ok());  // slot 1
    auto conf = ConfStateFile::open("/data", &env);
    ASSERT_TRUE(conf.ok()) << conf.status().message();
    ASSERT_TRUE((*conf)->write({raft::ConfRecord{0, 0, ConfState{{1, 2, 3}}}}).ok());
    ASSERT_TRUE((*conf)->write({raft::ConfRecord{14, 1, conf_after(14)}}).ok());
  }
  // A byte of each slot 1's payload (after its 24-byte header).
  const std::uint64_t in_slot_1 = store::DurableRecordFile::kSlotStrideBytes + 30;
  ASSERT_TRUE(env.corrupt_byte("/data/HARDSTATE", in_slot_1, 2).ok());
  ASSERT_TRUE(env.corrupt_byte("/data/CONFSTATE", in_slot_1, 2).ok());

  raft::HardState hard_state;
  std::vector<raft::ConfRecord> records;
  const std::string log = warnings_during([&] {
    auto file = HardStateFile::open("/data", &env);
    ASSERT_TRUE(file.ok()) << file.status().message();
    hard_state = (*file)->current();
    auto conf = ConfStateFile::open("/data", &env);
    ASSERT_TRUE(conf.ok()) << conf.status().message();
    records = (*conf)->current();
  });
  EXPECT_EQ(hard_state.term, 1U);
  EXPECT_EQ(hard_state.vote, 0U);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].index, 0U);
  EXPECT_EQ(records[0].conf, (ConfState{{1, 2, 3}}));
  for (const std::string file : {"/data/HARDSTATE", "/data/CONFSTATE"}) {
    const std::string line = file + ": slot 1 is damaged";
    const std::size_t at = log.find(line);
    EXPECT_NE(at, std::string::npos) << file << ":\n" << log;
    EXPECT_EQ(log.find(line, at + 1), std::string::npos) << "more than once:\n" << log;
  }
  EXPECT_NE(log.find("using the older record of slot 0"), std::string::npos) << log;
}

}  // namespace
}  // namespace raftlog::replica

// Membership changes through the replica: proposing one (answered once committed, or refused with
// its reason), the CONFSTATE record that keeps the configuration, and what an open recovers from it.
// The store is stepped over a MemoryEnv in sync flush mode: nothing commits until the test runs a
// flush cycle, so a change can be held uncommitted.
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stepped_follower_config.h"
#include "replica/conf_state_file.h"
#include "replica/replica.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

using raft::ConfChangeType;
using raft::ConfState;
using std::chrono::milliseconds;

struct DroppingSender final : MessageSender {
  void send(raft::Message) override {}
};

using testing::RoomyDisk;  // stepped_follower_config.h

class ReplicaMembershipTest : public ::testing::Test {
 protected:
  void open(const std::vector<raft::NodeId>& voters = {1}) {
    ReplicaConfig c;
    c.node_id = 1;
    for (raft::NodeId id : voters) c.members[id] = "n" + std::to_string(id);
    c.data_dir = "/data";
    c.store.flush_mode = store::FlushMode::kSync;
    c.store.background_work = store::BackgroundWork::kStepped;
    c.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    c.store.preallocate_next_segment = false;
    c.store.max_entry_size_bytes = 16 << 10;
    c.store.env = &env_;
    c.raft.id = 1;
    c.raft.initial_conf = ConfState{voters};
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    deps.clock = [this] { return now_; };
    NodeError error;
    replica_ = Replica::open(std::move(c), std::move(deps), &error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  void reopen() {
    replica_.reset();
    open();
  }
  void flush() {
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
    replica_->process();
  }
  void become_leader() {
    for (int tick = 0; tick < 100 && replica_->role() != raft::Role::kLeader; ++tick) {
      replica_->tick();
      replica_->process();
      flush();
    }
    ASSERT_EQ(replica_->role(), raft::Role::kLeader);
  }
  // Proposes `type` of `node`; the answer, once process() produced one (nullopt: still pending).
  std::optional<MembershipResult> propose(ConfChangeType type, raft::NodeId node,
                                          std::optional<MembershipResult>* later = nullptr) {
    auto answer = std::make_shared<std::optional<MembershipResult>>();
    replica_->propose_conf_change(
        Replica::MembershipRequest{raft::ConfChange{type, node},
                                   [answer, later](MembershipResult result) {
                                     if (later != nullptr) *later = result;
                                     *answer = std::move(result);
                                   },
                                   now_ + milliseconds(5000)});
    replica_->process();
    return *answer;
  }

  store::MemoryEnv env_;
  DroppingSender sender_;
  RoomyDisk disk_;
  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
  std::unique_ptr<Replica> replica_;
};

TEST_F(ReplicaMembershipTest, AChangeIsAnsweredOnceCommittedAndKeptAcrossAReopen) {
  open();
  become_leader();
  std::optional<MembershipResult> answer;
  EXPECT_FALSE(propose(ConfChangeType::kAddLearner, 2, &answer).has_value())
      << "not committed before its entry is flushed";
  EXPECT_EQ(replica_->conf(), (ConfState{{1}, {2}})) << "in force once appended";
  std::optional<MembershipResult> second = propose(ConfChangeType::kAddLearner, 3);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->error.reason, kReasonConfChangeInProgress);
  flush();
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->error.ok()) << answer->error.message;
  EXPECT_EQ(answer->conf, (ConfState{{1}, {2}}));
  EXPECT_EQ(answer->index, replica_->commit_index());
  EXPECT_TRUE(env_.exists("/data/CONFSTATE"));
  reopen();
  EXPECT_EQ(replica_->conf(), (ConfState{{1}, {2}}));
}

// The retired ids a status round reports (cached: Replica::retired_ids) follow every change: an
// uncommitted removal is not reported, a committed one is, at once, and the next one adds to it.
TEST_F(ReplicaMembershipTest, TheStatusRetiredIdsFollowEveryCommittedChange) {
  open();
  become_leader();
  using Ids = std::vector<std::uint64_t>;
  EXPECT_EQ(replica_->status().retired_ids, Ids{});
  for (raft::NodeId id : {2, 3}) {
    EXPECT_FALSE(propose(ConfChangeType::kAddLearner, id).has_value());
    flush();
    EXPECT_EQ(replica_->status().retired_ids, Ids{}) << "after adding " << id;
  }
  EXPECT_FALSE(propose(ConfChangeType::kRemoveNode, 2).has_value());
  EXPECT_EQ(replica_->status().retired_ids, Ids{}) << "not committed yet";
  flush();
  EXPECT_EQ(replica_->status().retired_ids, Ids{2});
  EXPECT_EQ(replica_->status().retired_ids, Ids{2}) << "the cached answer";
  EXPECT_FALSE(propose(ConfChangeType::kRemoveNode, 3).has_value());
  EXPECT_EQ(replica_->status().retired_ids, Ids{2});
  flush();
  EXPECT_EQ(replica_->status().retired_ids, (Ids{2, 3}));
  reopen();
  EXPECT_EQ(replica_->status().retired_ids, (Ids{2, 3})) << "after a reopen";
}

// An id a committed change removed is never added again: a node under it with an empty directory
// could vote without the memory its old votes relied on. The tombstone outlives a reopen.
TEST_F(ReplicaMembershipTest, ARemovedIdIsRetiredAndNeverAddedAgain) {
  open();
  become_leader();
  EXPECT_FALSE(propose(ConfChangeType::kAddLearner, 2).has_value());
  flush();
  EXPECT_FALSE(propose(ConfChangeType::kRemoveNode, 2).has_value());
  flush();
  ASSERT_EQ(replica_->conf(), (ConfState{{1}}));
  EXPECT_EQ(replica_->retired_ids(), (std::vector<raft::NodeId>{2}));
  std::optional<MembershipResult> again = propose(ConfChangeType::kAddVoter, 2);
  ASSERT_TRUE(again.has_value()) << "accepted: a retired id was added again";
  EXPECT_EQ(again->error.reason, kReasonIdRetired);
  EXPECT_EQ(propose(ConfChangeType::kAddLearner, 2)->error.reason, kReasonIdRetired);
  reopen();
  become_leader();
  EXPECT_EQ(replica_->status().retired_ids, (std::vector<std::uint64_t>{2}));
  ASSERT_TRUE(propose(ConfChangeType::kAddLearner, 2).has_value()) << "after a reopen";
  EXPECT_EQ(propose(ConfChangeType::kAddLearner, 2)->error.reason, kReasonIdRetired);
  EXPECT_FALSE(propose(ConfChangeType::kAddLearner, 3).has_value()) << "a new id is welcome";
}

TEST_F(ReplicaMembershipTest, RefusalsNameTheirReason) {
  open();
  std::optional<MembershipResult> not_leader = propose(ConfChangeType::kAddLearner, 2);
  ASSERT_TRUE(not_leader.has_value());
  EXPECT_EQ(not_leader->error.code, ErrorCode::kNoLeader);
  become_leader();
  EXPECT_EQ(propose(ConfChangeType::kPromoteLearner, 9)->error.reason, kReasonNotAMember);
  EXPECT_EQ(propose(ConfChangeType::kRemoveNode, 9)->error.reason, kReasonNotAMember);
  EXPECT_EQ(propose(ConfChangeType::kAddLearner, 1)->error.reason, kReasonAlreadyAMember);
  EXPECT_EQ(propose(ConfChangeType::kRemoveNode, 1)->error.reason, kReasonWouldLoseQuorum)
      << "the last voter";
  EXPECT_EQ(propose(ConfChangeType::kAddVoter, 2)->error.reason, kReasonWouldLoseQuorum)
      << "voters {1, 2} with node 2 never heard from";
  EXPECT_EQ(propose(ConfChangeType::kAddLearner, 0)->error.reason, kReasonBadMember);
}

TEST_F(ReplicaMembershipTest, APendingChangeFailsWhenTheNodeStops) {
  open();
  become_leader();
  std::optional<MembershipResult> answer;
  EXPECT_FALSE(propose(ConfChangeType::kAddLearner, 2, &answer).has_value());
  replica_->fail_all(ErrorCode::kUnavailable, "shutting down");
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error.reason, kReasonShuttingDown);
}

TEST_F(ReplicaMembershipTest, APendingChangeExpires) {
  open();
  become_leader();
  std::optional<MembershipResult> answer;
  EXPECT_FALSE(propose(ConfChangeType::kAddLearner, 2, &answer).has_value());
  replica_->expire_pending(now_ + milliseconds(6000));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error.reason, kReasonConfChangeTimeout);
}

// CONFSTATE is written before its entries reach the store: a crash in between leaves records whose
// entries are not in the log, and the open rolls back to the last one still there.
TEST_F(ReplicaMembershipTest, ARecordWhoseEntryIsGoneRollsBackAtOpen) {
  open();
  become_leader();
  std::optional<MembershipResult> added;
  ASSERT_FALSE(propose(ConfChangeType::kAddLearner, 2, &added).has_value());
  flush();
  ASSERT_TRUE(added.has_value() && added->error.ok());
  const raft::Index learner_entry = added->index;
  replica_.reset();
  {
    auto file = ConfStateFile::open("/data", &env_);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    const std::vector<raft::ConfRecord> history = {
        raft::ConfRecord{0, 0, ConfState{{1}}},
        raft::ConfRecord{learner_entry, added->term, ConfState{{1}, {2}}},
        raft::ConfRecord{learner_entry + 100, added->term, ConfState{{1}, {2, 3}}},
        raft::ConfRecord{learner_entry + 101, added->term, ConfState{{1, 3}, {2}}}};
    ASSERT_TRUE((*file)->write(history).ok());
  }
  open();
  EXPECT_EQ(replica_->conf(), (ConfState{{1}, {2}}));
  become_leader();
  // The rolled-back record is rewritten at the next batch; the next reopen agrees.
  ASSERT_FALSE(propose(ConfChangeType::kRemoveNode, 2).has_value());
  flush();
  reopen();
  EXPECT_EQ(replica_->conf(), (ConfState{{1}}));
}

// The open rewrites CONFSTATE without the records whose entries are gone, at once. Kept until the
// next configuration change, a record would outlive its index: once the log holds another entry
// there and a trim removes it, the next open takes the record for a trimmed, so committed,
// configuration (the simulator's retention runs found a node running a configuration that never
// committed).
TEST_F(ReplicaMembershipTest, ARecordWhoseEntryIsGoneIsForgottenOnDiskAtOpen) {
  open();
  become_leader();
  const raft::Index last = replica_->log().last_index();
  replica_.reset();
  {
    auto file = ConfStateFile::open("/data", &env_);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    // A learner added at an index a power cut took from the log.
    ASSERT_TRUE((*file)
                    ->write({raft::ConfRecord{0, 0, ConfState{{1}}},
                             raft::ConfRecord{last + 1, 1, ConfState{{1}, {2}}}})
                    .ok());
  }
  open();
  EXPECT_EQ(replica_->conf(), (ConfState{{1}}));
  replica_.reset();  // closed cleanly: nothing else rewrites the record
  auto file = ConfStateFile::open("/data", &env_);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ((*file)->current().size(), 1U) << "the lost record is still on disk";
  EXPECT_EQ((*file)->current().front().index, 0U);
}

// A new directory runs the bootstrap configuration (--members) and records it at once (entry 0),
// so that a record missing later is damage, not history (drills2 F2; conf_state_damage_test).
TEST_F(ReplicaMembershipTest, NoRecordMeansTheBootstrapConfiguration) {
  open({1, 2, 3});
  EXPECT_EQ(replica_->conf(), (ConfState{{1, 2, 3}}));
  replica_.reset();
  auto file = ConfStateFile::open("/data", &env_);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ((*file)->current().size(), 1U);
  EXPECT_EQ((*file)->current().front().index, 0U);
  EXPECT_EQ((*file)->current().front().conf, (ConfState{{1, 2, 3}}));
}

// A follower whose configuration entry is corrupt on disk: the open does not refuse (it would keep the
// node down for good); recovery cuts the log at the bad entry and the node catches up from the leader
// (the storage-fault path). The dedup window is made to miss the entry, so that the configuration
// check is the one that reads it. Committed or not, the configuration rolls back to the one before
// it (the newest its log still holds); the leader sends the entry again.
void corrupt_configuration_entry_then_reopen(raft::Index commit, const ConfState& expected) {
  store::MemoryEnv env;
  DroppingSender sender;
  RoomyDisk disk;
  auto open = [&]() {
    ReplicaConfig c = testing::stepped_follower_config(&env);
    c.dedup_rebuild_entries = 2;
    NodeError error;
    std::unique_ptr<Replica> replica =
        Replica::open(std::move(c), testing::stepped_follower_deps(&sender, &disk), &error);
    EXPECT_NE(replica, nullptr) << error.message;
    return replica;
  };
  const std::string learner_conf = raft::encode_config(ConfState{{1, 2, 3}, {4}});
  {
    std::unique_ptr<Replica> replica = open();
    ASSERT_NE(replica, nullptr);
    std::vector<raft::Entry> entries;
    for (raft::Index index = 1; index <= 8; ++index) {
      raft::Entry entry;
      entry.index = index;
      entry.term = 1;
      entry.type = index == 1 ? raft::EntryType::kNoop : raft::EntryType::kNormal;
      entry.payload = "entry " + std::to_string(index);
      if (index == 2) {
        entry.type = raft::EntryType::kConfig;
        entry.payload = learner_conf;
      }
      entries.push_back(entry);
    }
    replica->step(testing::leader_append(0, std::move(entries), commit));
    replica->process();
    ASSERT_EQ(replica->conf(), (ConfState{{1, 2, 3}, {4}}));
    ASSERT_TRUE(replica->log().run_flush_cycle().ok());
    replica->process();
    ASSERT_TRUE(replica->log().run_checkpoint().ok());
    ASSERT_EQ(replica->log().flushed_index(), 8u);
  }
  // Flip a byte of the configuration's payload where it is stored.
  auto files = env.list_dir("/data/log");
  ASSERT_TRUE(files.ok());
  bool damaged = false;
  for (const std::string& name : *files) {
    const std::string path = "/data/log/" + name;
    auto bytes = env.read_file(path, 1 << 20);
    ASSERT_TRUE(bytes.ok());
    const std::size_t at = bytes->find(learner_conf);
    if (at == std::string::npos) continue;
    std::string changed = *bytes;
    changed[at + 6] = static_cast<char>(changed[at + 6] ^ 0x04);
    ASSERT_TRUE(env.write_file(path, changed).ok());
    damaged = true;
  }
  ASSERT_TRUE(damaged) << "the configuration entry was not found in the segment files";
  std::unique_ptr<Replica> reopened = open();
  ASSERT_NE(reopened, nullptr);
  EXPECT_LT(reopened->log().last_index(), 2u) << "cut at the corrupt entry";
  EXPECT_EQ(reopened->conf(), expected);
  EXPECT_TRUE(reopened->status().catching_up) << "it may have acknowledged what it lost";
}

TEST(ReplicaMembershipRecovery, ACorruptUncommittedConfigurationEntryRollsBackAndIsRepaired) {
  corrupt_configuration_entry_then_reopen(1, ConfState{{1, 2, 3}});
}

// Committed and flushed, the entry became CONFSTATE's base: it stays in force without its entry (it
// is the cluster's configuration), and the node catches up, receiving the entry again.
TEST(ReplicaMembershipRecovery, ACorruptCommittedConfigurationEntryStaysInForceAndIsRepaired) {
  corrupt_configuration_entry_then_reopen(8, ConfState{{1, 2, 3}, {4}});
}

TEST(ConfStateFile, EncodingRoundTripsAndRefusesGarbage) {
  const std::vector<raft::ConfRecord> three = {raft::ConfRecord{4, 2, ConfState{{1, 2, 3}}},
                                               raft::ConfRecord{9, 3, ConfState{{1, 2, 3}, {4}}},
                                               raft::ConfRecord{12, 3, ConfState{{1, 2, 3, 4}}}};
  auto encoded = ConfStateFile::encode(three);
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  auto decoded = ConfStateFile::decode(*encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, three);
  const std::vector<raft::ConfRecord> one = {raft::ConfRecord{0, 0, ConfState{{7}}}};
  EXPECT_EQ(*ConfStateFile::decode(*ConfStateFile::encode(one)), one);
  // What the record cannot hold is refused, not written half.
  EXPECT_FALSE(ConfStateFile::encode({}).ok());
  EXPECT_FALSE(ConfStateFile::encode({raft::ConfRecord{4, 2, ConfState{{1}}},
                                      raft::ConfRecord{9, 3, ConfState{{1, 2, 3}}}})
                   .ok())
      << "two changes apart";
  EXPECT_FALSE(ConfStateFile::encode({raft::ConfRecord{9, 2, ConfState{{1}}},
                                      raft::ConfRecord{9, 3, ConfState{{1}, {2}}}})
                   .ok())
      << "indexes must increase";
  std::vector<raft::ConfRecord> too_many = {raft::ConfRecord{1, 1, ConfState{{1}}}};
  for (raft::NodeId id = 2; id <= ConfStateFile::kMaxPendingRecords + 2; ++id) {
    raft::ConfState next = too_many.back().conf;
    next.learners.push_back(id);
    too_many.push_back(raft::ConfRecord{id, 1, next});
  }
  EXPECT_FALSE(ConfStateFile::encode(too_many).ok());
  too_many.pop_back();
  EXPECT_TRUE(ConfStateFile::encode(too_many).ok());
  for (std::size_t cut = 0; cut < encoded->size(); ++cut) {
    EXPECT_FALSE(ConfStateFile::decode(encoded->substr(0, cut)).ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(ConfStateFile::decode(*encoded + "x").ok());
  std::string bad_version = *encoded;
  bad_version[0] = 9;
  EXPECT_FALSE(ConfStateFile::decode(bad_version).ok());
  std::string bad_role = *encoded;
  bad_role.back() = 7;
  EXPECT_FALSE(ConfStateFile::decode(bad_role).ok());
}

TEST(ConfStateFile, ADamagedFileIsRefusedNotForgotten) {
  store::MemoryEnv env;
  {
    auto file = ConfStateFile::open("/d", &env);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->write({raft::ConfRecord{3, 1, ConfState{{1, 2}}}}).ok());
  }
  auto bytes = env.read_file("/d/CONFSTATE", store::DurableRecordFile::kFileBytes);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[20] = static_cast<char>(damaged[20] ^ 0x10);
  ASSERT_TRUE(env.write_file("/d/CONFSTATE", damaged).ok());
  auto reopened = ConfStateFile::open("/d", &env);
  EXPECT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), store::StatusCode::kCorruption);
}

TEST(ConfStateFile, Version2KeepsTheBaseAddressesAndTheLaterRecordsRoles) {
  ConfState base{{1, 2, 3}};
  base.addresses = {{1, "h1:7001"}, {2, "h2:7001"}, {3, "h3:7001"}};
  ConfState added = base;
  added.learners = {4};
  added.addresses.push_back({4, "h4:7001"});
  ConfState removed = added;
  removed.voters = {1, 3};
  removed.addresses = {{1, "h1:7001"}, {3, "h3:7001"}, {4, "h4:7001"}};
  const std::vector<raft::ConfRecord> records = {raft::ConfRecord{5, 2, base},
                                                 raft::ConfRecord{9, 2, added},
                                                 raft::ConfRecord{11, 2, removed}};
  auto encoded = ConfStateFile::encode(records);
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  EXPECT_EQ((*encoded)[0], 3) << "format version 3";
  auto decoded = ConfStateFile::decode(*encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  ASSERT_EQ(decoded->size(), 3U);
  EXPECT_EQ((*decoded)[0], records[0]) << "the base keeps its addresses";
  // Later records keep their roles; their addresses are the ones in their log entries (read at
  // open), here the previous record's for the members that stay.
  for (std::size_t i = 1; i < 3; ++i) EXPECT_TRUE(raft::same_members((*decoded)[i].conf, records[i].conf));
  EXPECT_EQ(raft::address_of((*decoded)[2].conf, 2), nullptr);
  for (std::size_t cut = 0; cut < encoded->size(); ++cut) {
    EXPECT_FALSE(ConfStateFile::decode(encoded->substr(0, cut)).ok()) << "cut at " << cut;
  }
  // A record with the largest configuration fits the file.
  ConfState large{{1}};
  for (raft::NodeId id = 2; id <= 22; ++id) large.learners.push_back(id);
  for (raft::NodeId id = 1; id <= 22; ++id)
    large.addresses.push_back({id, std::string(110, 'a') + std::to_string(id) + ":1"});
  ASSERT_TRUE(raft::is_valid_conf(large)) << raft::encode_config(large).size();
  store::MemoryEnv env;
  auto file = ConfStateFile::open("/big", &env);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->write({raft::ConfRecord{3, 1, large}}).ok());
  auto reopened = ConfStateFile::open("/big", &env);
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->current().front().conf, large);
}

// CONFSTATE's bytes, byte for byte as the format (conf_state_file.h) lays them out: a base with
// its members' addresses, two later records (learner 4 added, voter 2 removed) and two retired ids.
// Written before the encoder moved to store/byte_io.h: a change of the format must be a new version.
TEST(ConfStateFile, TheEncodingIsTheFormatsByteForByte) {
  ConfState base{{1, 2, 3}};
  base.addresses = {{1, "h1:7001"}, {2, "h2:7001"}, {3, "h3:7001"}};
  ConfState added = base;
  added.learners = {4};
  ConfState removed = added;
  removed.voters = {1, 3};
  removed.addresses = {{1, "h1:7001"}, {3, "h3:7001"}};
  const std::vector<raft::ConfRecord> records = {raft::ConfRecord{5, 2, base},
                                                 raft::ConfRecord{9, 2, added},
                                                 raft::ConfRecord{0x0102030405060708, 3, removed}};
  auto encoded = ConfStateFile::encode(records, {7, 0x1122334455667788});
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  const std::string conf = raft::encode_config(base);
  std::string expected;
  auto bytes = [&](std::initializer_list<int> values) {
    for (int value : values) expected.push_back(static_cast<char>(value));
  };
  bytes({3, 0, 0, 0});                            // format version 3
  bytes({5, 0, 0, 0, 0, 0, 0, 0});                // base index
  bytes({2, 0, 0, 0, 0, 0, 0, 0});                // base term
  bytes({static_cast<int>(conf.size()), 0, 0, 0});  // its configuration's length
  expected += conf;
  bytes({2, 0, 0, 0});                            // two later records
  bytes({9, 0, 0, 0, 0, 0, 0, 0});                // index 9
  bytes({2, 0, 0, 0, 0, 0, 0, 0});                // term 2
  bytes({4, 0, 0, 0, 0, 0, 0, 0});                // node 4
  bytes({2});                                     // a learner
  bytes({8, 7, 6, 5, 4, 3, 2, 1});                // index 0x0102030405060708
  bytes({3, 0, 0, 0, 0, 0, 0, 0});                // term 3
  bytes({2, 0, 0, 0, 0, 0, 0, 0});                // node 2
  bytes({0});                                     // no longer a member
  bytes({2, 0, 0, 0});                            // two retired ids
  bytes({7, 0, 0, 0, 0, 0, 0, 0});
  bytes({0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11});
  EXPECT_EQ(*encoded, expected);
  auto decoded = ConfStateFile::decode_all(expected);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->records[0], records[0]);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(raft::same_members(decoded->records[i].conf, records[i].conf)) << i;
    EXPECT_EQ(decoded->records[i].index, records[i].index);
    EXPECT_EQ(decoded->records[i].term, records[i].term);
  }
  EXPECT_EQ(decoded->retired, (std::vector<raft::NodeId>{7, 0x1122334455667788}));
}

TEST(ConfStateFile, Version3KeepsRetiredIdsAndVersion2StillReads) {
  const std::vector<raft::ConfRecord> records = {raft::ConfRecord{5, 2, ConfState{{1, 2, 3}}},
                                                 raft::ConfRecord{9, 2, ConfState{{1, 2, 3}, {7}}}};
  auto encoded = ConfStateFile::encode(records, {4, 6});
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  auto decoded = ConfStateFile::decode_all(*encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->records, records);
  EXPECT_EQ(decoded->retired, (std::vector<raft::NodeId>{4, 6}));
  EXPECT_FALSE(ConfStateFile::encode(records, {2}).ok()) << "a member is not retired";
  // Version 2: the same records without the retired ids.
  std::string version2 = encoded->substr(0, encoded->size() - 4 - 2 * 8);
  version2[0] = 2;
  auto old = ConfStateFile::decode_all(version2);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->records, records);
  EXPECT_TRUE(old->retired.empty());
  std::string duplicate = *encoded;
  duplicate.replace(duplicate.size() - 8, 8, duplicate.substr(duplicate.size() - 16, 8));
  EXPECT_FALSE(ConfStateFile::decode_all(duplicate).ok()) << "an id retired twice";
  // The file carries them forward: the previous base's members that the new base drops retire.
  store::MemoryEnv env;
  auto file = ConfStateFile::open("/d", &env);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->write({raft::ConfRecord{5, 2, ConfState{{1, 2, 3}}}}).ok());
  ASSERT_TRUE((*file)->write({raft::ConfRecord{9, 2, ConfState{{1, 3}}}},
                             {ConfState{{1, 3}, {8}}})
                  .ok());
  EXPECT_EQ((*file)->retired(), (std::vector<raft::NodeId>{2, 8}));
  ASSERT_TRUE((*file)->write({raft::ConfRecord{12, 2, ConfState{{1, 3, 4}}}}).ok());
  auto reopened = ConfStateFile::open("/d", &env);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->retired(), (std::vector<raft::NodeId>{2, 8}));
}

// A storage fault lost entries below the base, and the leader resent an older configuration entry:
// the base is replaced by it (persist_conf). The old base's members that it lacks (9, maybe the
// leader) were not removed: they must not be written as retired.
TEST(ConfStateFile, ABaseReplacedByAnOlderEntryRetiresNoOne) {
  store::MemoryEnv env;
  auto file = ConfStateFile::open("/d", &env);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->write({raft::ConfRecord{100, 3, ConfState{{1, 2, 3, 9}}}}).ok());
  ASSERT_TRUE((*file)->write({raft::ConfRecord{60, 2, ConfState{{1, 2, 3}}}}).ok());
  EXPECT_TRUE((*file)->retired().empty()) << "a live member was retired";
  auto reopened = ConfStateFile::open("/d", &env);
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->retired().empty());
}

}  // namespace
}  // namespace raftlog::replica

// Unit tests for the core's building blocks: config codec, MemoryLog, quorum arithmetic, progress and
// in-flight window, the unstable tail (RaftLog), and Config validation.
#include <gtest/gtest.h>

#include <limits>

#include "raft/memory_log.h"
#include "raft/progress.h"
#include "raft/quorum.h"
#include "raft/raft.h"
#include "raft/raft_log.h"
#include "raft/types.h"
#include "test_cluster.h"
#include "util/crc32c.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;

TEST(ConfCodec, RoundTripsAndRejectsEveryCorruption) {
  const ConfState conf{{1, 2, 3, 0xFFFFFFFFFFull}};
  const std::string encoded = encode_config(conf);
  ASSERT_EQ(decode_config(encoded), conf);
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    std::string corrupt = encoded;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x01);
    EXPECT_FALSE(decode_config(corrupt).has_value())
        << "flipped bit in byte " << i << " went unnoticed";
  }
  EXPECT_FALSE(decode_config(encoded.substr(0, encoded.size() - 1)).has_value());
  EXPECT_FALSE(decode_config(encoded + "x").has_value());
  EXPECT_FALSE(decode_config("").has_value());
}

// ConfState payloads live in every node's log, so their bytes (checksum included) are a stored format.
// Version 1 (voters only) was recorded from the core's own CRC32C before it was replaced by src/util's;
// it still decodes. Version 2 adds the learners.
TEST(ConfCodec, EncodingOfKnownConfigurationsIsUnchanged) {
  const std::string four_voters_v1(
      "\x01\x04\x00\x00\x00"
      "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"
      "\x03\x00\x00\x00\x00\x00\x00\x00\xFF\xFF\xFF\xFF\xFF\x00\x00\x00"
      "\x9B\x9D\xC1\x54",
      41);
  EXPECT_EQ(decode_config(four_voters_v1), (ConfState{{1, 2, 3, 0xFFFFFFFFFFull}}));
  const std::string one_voter_v1(
      "\x01\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\xB5\x4C\xA1\x47", 17);
  EXPECT_EQ(decode_config(one_voter_v1), ConfState{{7}});
  const std::string one_voter(
      "\x02\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
      "\x39\x3A\x7D\x01",
      21);
  EXPECT_EQ(encode_config(ConfState{{7}}), one_voter);
  EXPECT_EQ(decode_config(one_voter), ConfState{{7}});
  const std::string three_voters_one_learner(
      "\x02\x03\x00\x00\x00"
      "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"
      "\x03\x00\x00\x00\x00\x00\x00\x00"
      "\x01\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00"
      "\xBC\xC0\xEF\x10",
      45);
  EXPECT_EQ(encode_config(ConfState{{1, 2, 3}, {4}}), three_voters_one_learner);
  EXPECT_EQ(decode_config(three_voters_one_learner), (ConfState{{1, 2, 3}, {4}}));
}

// A payload that passes its checksum but breaks a configuration rule is refused too: a configuration
// decoded from a log or a message is never trusted.
TEST(ConfCodec, RefusesWellChecksummedInvalidConfigurations) {
  auto forge = [](std::vector<NodeId> voters, std::vector<NodeId> learners) {
    // encode_config() refuses invalid configurations: the bytes are built by hand.
    std::string out(1, '\x02');
    auto put = [&out](std::uint64_t value, int bytes) {
      for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
    };
    put(voters.size(), 4);
    for (NodeId v : voters) put(v, 8);
    put(learners.size(), 4);
    for (NodeId l : learners) put(l, 8);
    put(util::crc32c::value(out.data(), out.size()), 4);
    return out;
  };
  ASSERT_TRUE(decode_config(forge({1, 2}, {3})).has_value()) << "the forger is right";
  EXPECT_FALSE(decode_config(forge({}, {3})).has_value()) << "no voter";
  EXPECT_FALSE(decode_config(forge({0, 2}, {})).has_value()) << "node 0";
  EXPECT_FALSE(decode_config(forge({2, 1}, {})).has_value()) << "unsorted";
  EXPECT_FALSE(decode_config(forge({1, 2}, {2})).has_value()) << "learner is a voter";
  std::vector<NodeId> many;
  for (NodeId id = 1; id <= kMaxMembers; ++id) many.push_back(id);
  EXPECT_FALSE(decode_config(forge(many, {kMaxMembers + 1})).has_value()) << "too many members";
  std::string bad_version = forge({1}, {});
  bad_version[0] = 3;
  EXPECT_FALSE(decode_config(bad_version).has_value());
}

TEST(ConfChange, SingleChangesAndTheirProblems) {
  const ConfState conf{{1, 2, 3}, {4}};
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kAddVoter, 5}), ConfChangeProblem::kNone);
  EXPECT_EQ(apply_conf_change(conf, {ConfChangeType::kAddVoter, 5}),
            (ConfState{{1, 2, 3, 5}, {4}}));
  EXPECT_EQ(apply_conf_change(conf, {ConfChangeType::kAddLearner, 5}),
            (ConfState{{1, 2, 3}, {4, 5}}));
  EXPECT_EQ(apply_conf_change(conf, {ConfChangeType::kPromoteLearner, 4}),
            (ConfState{{1, 2, 3, 4}, {}}));
  EXPECT_EQ(apply_conf_change(conf, {ConfChangeType::kRemoveNode, 2}), (ConfState{{1, 3}, {4}}));
  EXPECT_EQ(apply_conf_change(conf, {ConfChangeType::kRemoveNode, 4}), (ConfState{{1, 2, 3}, {}}));
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kAddVoter, 0}),
            ConfChangeProblem::kInvalidNode);
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kAddLearner, 2}),
            ConfChangeProblem::kAlreadyMember);
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kPromoteLearner, 2}),
            ConfChangeProblem::kNotLearner);
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kPromoteLearner, 9}),
            ConfChangeProblem::kNotMember);
  EXPECT_EQ(check_conf_change(conf, {ConfChangeType::kRemoveNode, 9}),
            ConfChangeProblem::kNotMember);
  EXPECT_EQ(check_conf_change(ConfState{{1}, {2}}, {ConfChangeType::kRemoveNode, 1}),
            ConfChangeProblem::kNoVotersLeft);
  std::vector<NodeId> full;
  for (NodeId id = 1; id <= kMaxMembers; ++id) full.push_back(id);
  EXPECT_EQ(check_conf_change(ConfState{full}, {ConfChangeType::kAddLearner, 100}),
            ConfChangeProblem::kTooManyMembers);
}

TEST(ConfChange, SingleChangeBetweenFindsExactlyOne) {
  const ConfState conf{{1, 2, 3}, {4}};
  EXPECT_EQ(single_change_between(conf, ConfState{{1, 2, 3, 4}}),
            (ConfChange{ConfChangeType::kPromoteLearner, 4}));
  EXPECT_EQ(single_change_between(conf, ConfState{{1, 2}, {4}}),
            (ConfChange{ConfChangeType::kRemoveNode, 3}));
  EXPECT_EQ(single_change_between(conf, ConfState{{1, 2, 3}, {4, 5}}),
            (ConfChange{ConfChangeType::kAddLearner, 5}));
  EXPECT_EQ(single_change_between(conf, ConfState{{1, 2, 3, 5}, {4}}),
            (ConfChange{ConfChangeType::kAddVoter, 5}));
  EXPECT_FALSE(single_change_between(conf, conf)) << "no change";
  EXPECT_FALSE(single_change_between(conf, ConfState{{1, 2}, {}})) << "two changes";
  EXPECT_FALSE(single_change_between(conf, ConfState{{1, 2}, {3, 4}})) << "a demotion";
}

TEST(ConfCodec, ValidatesVoterSets) {
  EXPECT_TRUE(is_valid_conf(ConfState{{1}}));
  EXPECT_FALSE(is_valid_conf(ConfState{{}}));
  EXPECT_FALSE(is_valid_conf(ConfState{{2, 1}}));
  EXPECT_FALSE(is_valid_conf(ConfState{{1, 1}}));
  EXPECT_FALSE(is_valid_conf(ConfState{{0, 1}}));
  std::vector<NodeId> too_many;
  for (NodeId id = 1; id <= kMaxMembers + 1; ++id) too_many.push_back(id);
  EXPECT_FALSE(is_valid_conf(ConfState{too_many}));
}

TEST(MemoryLog, AppendTruncateAndTrimKeepTheTrimTerm) {
  MemoryLog log;
  EXPECT_EQ(log.first_index(), 1u);
  EXPECT_EQ(log.last_index(), 0u);
  EXPECT_EQ(log.term_at(0), Term{0});
  log.append(make_entries(1, {1, 1, 2, 3}));
  EXPECT_EQ(log.last_index(), 4u);
  EXPECT_EQ(log.term_at(3), Term{2});
  EXPECT_FALSE(log.term_at(5).has_value());
  log.truncate_suffix(4);
  EXPECT_EQ(log.last_index(), 3u);
  log.truncate_prefix(3);
  EXPECT_EQ(log.first_index(), 3u);
  EXPECT_EQ(log.term_at(2), Term{1});  // trim point term kept
  EXPECT_FALSE(log.term_at(1).has_value());
  EXPECT_EQ(log.entry(3).term, 2u);
}

TEST(MemoryLog, EntriesAreByteBoundedButNeverEmpty) {
  MemoryLog log;
  log.append(make_entries(1, {1, 1, 1, 1}));
  const std::size_t one = log.entry(1).byte_size();
  EXPECT_EQ(log.entries(1, 4, 1).size(), 1u);  // budget below one entry: still one
  EXPECT_EQ(log.entries(1, 4, 2 * one).size(), 2u);
  EXPECT_EQ(log.entries(1, 4, 2 * one + 1).size(), 2u);
  EXPECT_EQ(log.entries(2, 4, std::numeric_limits<std::size_t>::max()).size(), 3u);
}

TEST(MemoryLogDeathTest, RejectsGapsAndDecreasingTerms) {
  MemoryLog log;
  log.append(make_entries(1, {2}));
  EXPECT_DEATH(log.append(make_entries(3, {2})), "contiguous");
  EXPECT_DEATH(log.append(make_entries(2, {1})), "never decrease");
}

TEST(Quorum, MajorityValues) {
  EXPECT_EQ(quorum_size(1), 1u);
  EXPECT_EQ(quorum_size(3), 2u);
  EXPECT_EQ(quorum_size(4), 3u);
  EXPECT_EQ(quorum_size(5), 3u);
  EXPECT_EQ(quorum_value({5, 3, 9}), 5u);
  EXPECT_EQ(quorum_value({7}), 7u);
  EXPECT_EQ(quorum_value({1, 2, 3, 4, 5}), 3u);
  EXPECT_EQ(quorum_value({9, 9, 0, 0, 0}), 0u);
  EXPECT_EQ(tally_votes(3, 2, 0), VoteOutcome::kWon);
  EXPECT_EQ(tally_votes(3, 1, 1), VoteOutcome::kPending);
  EXPECT_EQ(tally_votes(3, 1, 2), VoteOutcome::kLost);
  EXPECT_EQ(tally_votes(5, 2, 2), VoteOutcome::kPending);
  EXPECT_EQ(tally_votes(5, 2, 3), VoteOutcome::kLost);
}

TEST(Progress, ProbeSendsOneMessageReplicateFillsTheWindow) {
  Progress pr(2, 1 << 20);
  pr.next = 5;
  EXPECT_FALSE(pr.is_paused());
  pr.on_entries_sent(5, 100);
  EXPECT_TRUE(pr.is_paused());  // probe: one outstanding
  EXPECT_TRUE(pr.on_ack(5));
  pr.become_replicate();
  EXPECT_EQ(pr.next, 6u);
  pr.on_entries_sent(6, 100);
  pr.on_entries_sent(7, 100);
  EXPECT_TRUE(pr.is_paused());  // window of 2 full
  EXPECT_EQ(pr.next, 8u);
  EXPECT_TRUE(pr.on_ack(6));
  pr.inflights.free_up_to(6);
  EXPECT_FALSE(pr.is_paused());
}

TEST(Progress, RejectionsMoveNextBackAndStaleOnesAreIgnored) {
  Progress pr(4, 1 << 20);
  pr.next = 11;  // probe: prev index 10 outstanding
  EXPECT_FALSE(pr.on_reject(7, 3)) << "a rejection of an append we did not just send is stale";
  EXPECT_TRUE(pr.on_reject(10, 3));
  EXPECT_EQ(pr.next, 4u);  // match hint 3 -> next 4
  pr.match = 6;
  pr.become_replicate();
  pr.on_entries_sent(9, 100);
  EXPECT_FALSE(pr.on_reject(5, 0)) << "at or below match: stale";
  EXPECT_TRUE(pr.on_reject(8, 0));
  EXPECT_EQ(pr.next, 7u);
}

TEST(Progress, TheWindowIsFullOnceItsAppendsReachTheByteBound) {
  Progress pr(64, 1000);
  pr.become_replicate();
  pr.on_entries_sent(3, 600);
  EXPECT_FALSE(pr.is_paused()) << "600 of 1000 bytes in flight";
  pr.on_entries_sent(5, 500);
  EXPECT_TRUE(pr.is_paused()) << "1100 bytes reach the bound long before 64 messages";
  EXPECT_EQ(pr.inflights.bytes(), 1100u);
  pr.inflights.free_up_to(3);
  EXPECT_EQ(pr.inflights.bytes(), 500u);
  EXPECT_FALSE(pr.is_paused());
  pr.inflights.free_first();  // a heartbeat answer's freed slot frees its bytes too
  EXPECT_EQ(pr.inflights.bytes(), 0u);
  pr.on_entries_sent(9, 1000);
  pr.become_probe();
  EXPECT_EQ(pr.inflights.bytes(), 0u) << "a reset window holds no bytes";
}

TEST(InflightsDeathTest, OverflowIsAnInvariantViolation) {
  Inflights window(1, 1 << 20);
  window.add(3, 10);
  EXPECT_DEATH(window.add(4, 10), "overflow");
  Inflights bytes_window(8, 100);
  bytes_window.add(3, 100);
  EXPECT_DEATH(bytes_window.add(4, 10), "overflow");
}

TEST(RaftLog, UnstableTailShadowsTheReaderUntilPersisted) {
  MemoryLog reader;
  reader.append(make_entries(1, {1, 1, 1}));
  RaftLog log(reader, 1);
  EXPECT_EQ(log.persisted_index(), 3u);
  log.append(make_entries(3, {2, 2}));  // overwrites index 3 (uncommitted) in the durable part
  EXPECT_EQ(log.persisted_index(), 2u);
  EXPECT_EQ(log.term_at(3), Term{2});  // the tail shadows the reader's stale entry 3
  RaftLog::Handout handout = log.take_handout();
  ASSERT_TRUE(handout.truncate_from.has_value());
  EXPECT_EQ(*handout.truncate_from, 3u);
  ASSERT_EQ(handout.entries.size(), 2u);
  EXPECT_FALSE(log.has_handout());
  // The driver has not applied the batch yet: the core still answers from its tail.
  EXPECT_EQ(log.entries(2, 4, 1 << 20).back().term, 2u);
  EXPECT_FALSE(log.stable_to(4, 1)) << "a report with the wrong term is stale";
  EXPECT_FALSE(log.stable_to(5, 2)) << "never handed out";
  reader.truncate_suffix(3);
  reader.append(handout.entries);
  EXPECT_TRUE(log.stable_to(4, 2));
  EXPECT_EQ(log.persisted_index(), 4u);
  EXPECT_EQ(log.entries(1, 4, 1 << 20).size(), 4u);
}

TEST(RaftLogDeathTest, NeverTruncatesACommittedEntry) {
  MemoryLog reader;
  reader.append(make_entries(1, {1, 1, 1}));
  RaftLog log(reader, 2);
  EXPECT_DEATH(log.append(make_entries(2, {2})), "committed entry must never be truncated");
}

TEST(RaftLog, FindConflictByTermSkipsWholeTerms) {
  MemoryLog reader;
  reader.append(make_entries(1, {1, 2, 2, 2, 5, 5}));
  RaftLog log(reader, 0);
  EXPECT_EQ(log.find_conflict_by_term(6, 4), (std::pair<Index, Term>{4, 2}));
  EXPECT_EQ(log.find_conflict_by_term(6, 5), (std::pair<Index, Term>{6, 5}));
  EXPECT_EQ(log.find_conflict_by_term(4, 1), (std::pair<Index, Term>{1, 1}));
  EXPECT_EQ(log.find_conflict_by_term(4, 0), (std::pair<Index, Term>{0, 0}));
}

TEST(Config, ValidationNamesTheProblem) {
  Config config;
  config.id = 1;
  config.initial_conf.voters = {1, 2, 3};
  EXPECT_EQ(validate_config(config), "");
  Config bad = config;
  bad.id = kNoNode;
  EXPECT_NE(validate_config(bad), "");
  bad = config;
  bad.election_ticks = bad.heartbeat_ticks;
  EXPECT_NE(validate_config(bad).find("election_ticks"), std::string::npos);
  bad = config;
  bad.max_uncommitted_entries = bad.max_entries_per_message - 1;
  EXPECT_NE(validate_config(bad).find("max_uncommitted_entries"), std::string::npos);
  bad = config;
  bad.initial_conf.voters = {3, 1};
  EXPECT_NE(validate_config(bad), "");
}

TEST(Ready, EmptyMeansNothingToDo) {
  Ready rd;
  EXPECT_TRUE(rd.empty());
  rd.commit_index = 3;
  EXPECT_FALSE(rd.empty());
  Ready with_message;
  with_message.messages_after_persist.push_back(Message{});
  EXPECT_FALSE(with_message.empty());
}

TEST(ToString, NamesEveryEnumerator) {
  EXPECT_STREQ(to_string(MessageType::kTimeoutNow), "TimeoutNow");
  EXPECT_STREQ(to_string(Role::kPreCandidate), "PreCandidate");
  EXPECT_STREQ(to_string(ProposeStatus::kInvalidEntry), "InvalidEntry");
  EXPECT_STREQ(to_string(ReadIndexStatus::kTooManyPending), "TooManyPending");
  EXPECT_STREQ(to_string(TransferStatus::kUnknownTarget), "UnknownTarget");
}

}  // namespace
}  // namespace raftlog::raft

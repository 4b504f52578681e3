// The replica's topic table (src/replica/topic_offsets.h) and its saved form TOPICSTATE
// (src/replica/topic_state_file.h): recording, undoing a cut tail, the table as of the commit
// index, and a file that refuses damage.
#include "replica/topic_offsets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "derived/envelope.h"
#include "node/temp_dir.h"
#include "replica/replica.h"
#include "replica/topic_state_file.h"
#include "trim_to_end.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

using Table = std::vector<TopicOffsets::TopicNext>;

TEST(TopicOffsets, VersionTwoOffsetsAreTakenAndVersionOneEntriesCounted) {
  TopicOffsets topics;
  EXPECT_TRUE(topics.record(1, "a", std::nullopt));  // version 1: counted, offset 0
  EXPECT_TRUE(topics.record(2, "a", std::nullopt));  // offset 1
  EXPECT_TRUE(topics.record(3, "", std::nullopt));   // no topic
  EXPECT_TRUE(topics.record(4, "a", 2));             // version 2 continues the count
  EXPECT_TRUE(topics.record(5, "b", 7));             // whatever the entry carries
  EXPECT_FALSE(topics.record(5, "b", 8));            // covered already: ignored
  EXPECT_EQ(topics.next_offset("a"), 3U);
  EXPECT_EQ(topics.next_offset("b"), 8U);
  EXPECT_EQ(topics.next_offset("c"), 0U);
  EXPECT_EQ(topics.through(), 5U);
}

TEST(TopicOffsets, ACutTailIsUndoneExactlyAndItsOffsetsAreHandedOutAgain) {
  TopicOffsets topics;
  topics.record(1, "a", 0);
  topics.record(2, "a", 1);
  topics.committed(2);
  topics.record(3, "a", 2);
  topics.record(4, "b", 0);  // a topic only the cut tail holds
  topics.record(5, "a", 3);
  EXPECT_EQ(topics.journal_size(), 3U);
  const Table at_commit = topics.table_at(2);
  ASSERT_TRUE(topics.truncate_from(3));
  EXPECT_EQ(topics.table_at(topics.through()), at_commit);
  EXPECT_EQ(topics.next_offset("a"), 2U);
  EXPECT_FALSE(topics.knows("b"));
  EXPECT_EQ(topics.through(), 2U);
  // The new leader's entries take the same offsets: no hole in what commits.
  EXPECT_TRUE(topics.record(3, "a", 2));
  EXPECT_EQ(topics.next_offset("a"), 3U);
  // Committed entries are never undone.
  topics.committed(3);
  EXPECT_FALSE(topics.truncate_from(3));
  EXPECT_EQ(topics.next_offset("a"), 3U);
  EXPECT_EQ(topics.journal_size(), 0U);
}

TEST(TopicOffsets, TheTableAsOfTheCommitIndexLeavesTheTailOut) {
  TopicOffsets topics;
  topics.record(1, "a", 0);
  topics.committed(1);
  topics.record(2, "a", 1);
  topics.record(3, "z", 0);
  EXPECT_EQ(topics.table_at(1), (Table{{"a", 1}}));
  EXPECT_EQ(topics.table_at(3), (Table{{"a", 2}, {"z", 1}}));
  topics.reset(10, Table{{"q", 4}});
  EXPECT_EQ(topics.through(), 10U);
  EXPECT_EQ(topics.next_offset("q"), 4U);
  EXPECT_FALSE(topics.record(9, "q", 9));  // re-received committed entry: already counted
  EXPECT_FALSE(topics.truncate_from(10));  // what reset() loaded is committed
}

TEST(TopicOffsets, AtMostMaxTopicsAreTracked) {
  TopicOffsets topics;
  for (std::size_t i = 0; i < TopicOffsets::kMaxTopics; ++i) {
    ASSERT_TRUE(topics.record(i + 1, "t" + std::to_string(i), 0));
  }
  EXPECT_FALSE(topics.record(TopicOffsets::kMaxTopics + 1, "one-more", 0));
  EXPECT_FALSE(topics.knows("one-more"));
  EXPECT_TRUE(topics.record(TopicOffsets::kMaxTopics + 2, "t0", 1));  // known ones go on
  EXPECT_EQ(topics.topic_count(), TopicOffsets::kMaxTopics);
}

// Review finding 7: a forged committed offset of kMaxTopicOffset, then a version-1 entry of the
// same topic, made the next offset kMaxTopicOffset + 2, which TOPICSTATE's decoder refuses: a
// trimmed node then could not start. The table saturates at what the file accepts.
TEST(TopicOffsets, AForgedMaximalOffsetSaturatesAtWhatTopicStateAccepts) {
  TopicOffsets topics;
  ASSERT_TRUE(topics.record(1, "t", derived::kMaxTopicOffset));
  ASSERT_TRUE(topics.record(2, "t", std::nullopt));  // version 1: counted on from there
  ASSERT_TRUE(topics.record(3, "t", std::nullopt));
  EXPECT_EQ(topics.next_offset("t"), TopicOffsets::kMaxNextOffset);
  topics.committed(3);
  const auto decoded = decode_topic_state(encode_topic_state(TopicState{3, 1, topics.table_at(3)}));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->topics, (Table{{"t", TopicOffsets::kMaxNextOffset}}));
  // A leader cannot stamp past the envelope's bound: the topic is full, never wrapped.
  std::string payload;
  derived::encode_envelope(0, "t", {}, "x", &payload);
  EXPECT_FALSE(derived::stamp_envelope(&payload, 1, topics.next_offset("t")));
}

TEST(TopicStateFile, RoundTripsAndIsReplacedAtomically) {
  store::MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/d").ok());
  auto none = read_topic_state(&env, "/d");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  const TopicState state{42, 1'764'000'000'000, Table{{"a", 3}, {"orders", 1'000'001}}};
  ASSERT_TRUE(write_topic_state(&env, "/d", state).ok());
  ASSERT_TRUE(write_topic_state(&env, "/d", TopicState{43, 5, Table{}}).ok());
  ASSERT_TRUE(write_topic_state(&env, "/d", state).ok());
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
  auto read = read_topic_state(&env, "/d");
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, state);
}

TEST(TopicStateFile, EveryTruncationAndEveryBitFlipIsRefused) {
  const std::string bytes = encode_topic_state(TopicState{9, 77, Table{{"a", 1}, {"b.c", 12}}});
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(decode_topic_state(bytes.substr(0, size)).ok()) << size;
  }
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit));
      EXPECT_FALSE(decode_topic_state(flipped).ok()) << at << ":" << bit;
    }
  }
  ASSERT_TRUE(decode_topic_state(bytes).ok());
}

// The largest table (kMaxTopics topics of the longest name), some of it above the commit index:
// table_at() as of the commit index and the file written and read back give exactly the table
// the journal describes. Prints how long the save takes (docs/benchmarks.md).
TEST(TopicStateFile, AFullTableAsOfTheCommitIndexRoundTrips) {
  TopicOffsets topics;
  std::uint64_t index = 0;
  auto name = [](std::size_t i) {
    std::string topic = "t" + std::to_string(i);
    return topic + std::string(derived::kMaxTopicBytes - topic.size(), 'x');
  };
  constexpr std::size_t kCommitted = TopicOffsets::kMaxTopics - 1;  // the tail adds the last
  for (std::size_t i = 0; i < kCommitted; ++i) ASSERT_TRUE(topics.record(++index, name(i), i));
  const std::uint64_t commit = index;
  topics.committed(commit);
  // An uncommitted tail: raises ten topics, adds one; table_at(commit) must leave all of it out.
  for (std::size_t i = 0; i < 10; ++i) ASSERT_TRUE(topics.record(++index, name(i * 7), 1'000'000));
  ASSERT_TRUE(topics.record(++index, "zz-new", 0));
  server::testing::TempDir dir;
  std::filesystem::create_directories(dir.path());
  const auto started = std::chrono::steady_clock::now();
  const TopicState state{commit, 1, topics.table_at(commit)};
  const auto built = std::chrono::steady_clock::now();
  ASSERT_TRUE(write_topic_state(nullptr, dir.path(), state).ok());
  const auto written = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("TOPICSTATE save: topics=%zu table_at_ms=%.1f write_ms=%.1f bytes=%zu\n",
              state.topics.size(), ms(built - started), ms(written - built),
              encode_topic_state(state).size());
  ASSERT_EQ(state.topics.size(), kCommitted);
  for (std::size_t i = 0; i < kCommitted; i += 7) {
    const auto it = std::lower_bound(state.topics.begin(), state.topics.end(), name(i),
                                     [](const TopicOffsets::TopicNext& entry,
                                        const std::string& topic) { return entry.topic < topic; });
    ASSERT_NE(it, state.topics.end());
    ASSERT_EQ(it->topic, name(i));
    ASSERT_EQ(it->next_offset, i + 1) << name(i);
  }
  auto read = read_topic_state(nullptr, dir.path());
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, state);
}

struct NullSender final : MessageSender {
  void send(raft::Message) override {}
};
struct RoomyDisk final : DiskProbe {
  std::optional<DiskSpace> probe() override { return DiskSpace{1ULL << 40, 0.10}; }
};

// One single-voter replica in a temporary directory whose wall clock the test sets.
class TimestampFloorTest : public ::testing::Test {
 protected:
  void open() {
    NodeError error;
    replica_ = try_open(&error);
    ASSERT_NE(replica_, nullptr) << error.message;
    for (int tick = 0; tick < 100 && replica_->role() != raft::Role::kLeader; ++tick) {
      replica_->tick();
      replica_->process();
    }
    ASSERT_EQ(replica_->role(), raft::Role::kLeader);
  }
  std::unique_ptr<Replica> try_open(NodeError* error) {
    ReplicaConfig c;
    c.node_id = 1;
    c.members = {{1, "127.0.0.1:1"}};
    c.data_dir = dir_.path();
    c.store.flush_mode = store::FlushMode::kAsync;
    c.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    c.store.preallocate_next_segment = false;
    c.store.max_entry_size_bytes = 16 << 10;
    c.raft.id = 1;
    c.raft.initial_conf.voters = {1};
    c.dedup_rebuild_entries = 4;  // the window the floor used to come from
    // A trim here runs whole in one call: the round budget (real time) must not split it when a
    // loaded machine's syncs are slow (TrimRoundTest covers the split).
    c.trim_round_budget_ms = 60'000;
    if (save_entries_ != 0) c.topic_state_save_entries = save_entries_;
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    deps.wall_clock = [this] { return wall_; };
    return Replica::open(std::move(c), std::move(deps), error);
  }
  // Appends `count` entries (with envelopes of topic "t" when `topic`) and returns the last index.
  std::uint64_t append(bool topic, int count = 1, std::size_t body_bytes = 1) {
    Replica::AppendRequest request;
    for (int i = 0; i < count; ++i) {
      std::string payload(std::max<std::size_t>(body_bytes, 5), 'p');
      if (topic) {
        payload.clear();
        derived::encode_envelope(0, "t", {}, std::string(body_bytes, 'x'), &payload);
      }
      request.payloads.push_back(payload);
    }
    request.has_envelopes = topic;
    std::optional<AppendResult> answer;
    request.done = [&answer](AppendResult result) { answer = std::move(result); };
    request.deadline = Clock::now() + std::chrono::hours(1);
    replica_->append(std::move(request));
    replica_->process();
    EXPECT_TRUE(answer.has_value() && answer->error.ok());
    return answer.has_value() ? answer->last_index : 0;
  }
  derived::EnvelopeHeader header_at(std::uint64_t index) {
    auto batch = replica_->log().read(index, 1, 1 << 20);
    EXPECT_TRUE(batch.ok() && !batch->entries.empty());
    derived::EnvelopeHeader header;
    EXPECT_EQ(derived::decode_envelope_header(batch->entries.at(0).payload, &header),
              derived::EnvelopeDecode::kOk);
    return header;
  }

  server::testing::TempDir dir_;
  NullSender sender_;
  RoomyDisk disk_;
  std::chrono::system_clock::time_point wall_ =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1'900'000'000'000));
  std::unique_ptr<Replica> replica_;
  std::uint64_t save_entries_ = 0;  // 0: the default interval
};

// Issue 16, defect 3: the floor at open came only from the dedup rebuild's window, so with the
// newest envelope further back, a clock stepped back made timestamps go backwards.
TEST_F(TimestampFloorTest, TheFloorAtOpenHoldsWhateverTheDistanceToTheNewestEnvelope) {
  ASSERT_NO_FATAL_FAILURE(open());
  const std::uint64_t stamped = header_at(append(true)).timestamp_ms;
  EXPECT_EQ(stamped, 1'900'000'000'000U);
  for (int i = 0; i < 3; ++i) append(false, 5);  // 15 entries: the envelope is out of the window
  replica_.reset();
  wall_ -= std::chrono::hours(1);  // the clock was stepped back while the node was down
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_EQ(replica_->timestamp_floor_ms(), stamped);
  const derived::EnvelopeHeader next = header_at(append(true));
  EXPECT_GE(next.timestamp_ms, stamped);
  EXPECT_EQ(next.topic_offset, 1U);
  // Without TOPICSTATE (a log from before it existed) the open scan reads the whole log instead
  // (its timestamps bounded by the clock at open: here the clock is right again).
  replica_.reset();
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "TOPICSTATE");
  wall_ += std::chrono::hours(1);
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_GE(replica_->timestamp_floor_ms(), stamped);
  EXPECT_EQ(header_at(append(true)).topic_offset, 2U);
}

// Issue 16, defect 2, at open: an entry stamped far in the future (by a node whose clock was, or
// forged) raises the recovered floor only up to the skew bound.
TEST_F(TimestampFloorTest, AFarFutureTimestampInTheLogRaisesTheFloorOnlyUpToTheSkewBound) {
  const auto real = wall_;
  wall_ += std::chrono::hours(24 * 365 * 100);
  ASSERT_NO_FATAL_FAILURE(open());
  append(true);
  replica_.reset();
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "TOPICSTATE");
  wall_ = real;
  ASSERT_NO_FATAL_FAILURE(open());
  const std::uint64_t real_ms = 1'900'000'000'000;
  EXPECT_EQ(replica_->timestamp_floor_ms(), real_ms + Replica::kMaxTimestampSkewMs);
  EXPECT_LE(header_at(append(true)).timestamp_ms, real_ms + Replica::kMaxTimestampSkewMs);
}

// Retention removed every entry of topic "t": TOPICSTATE, saved before the trim, still knows its
// next offset; without it SNAPSHOT's table as of the first index - 1 (the trim saved it) does; without
// both the node refuses to start (a guess could hand out an offset twice).
TEST_F(TimestampFloorTest, ATrimmedLogNeedsTopicStateOrSnapshotForItsTopicsNextOffsets) {
  ASSERT_NO_FATAL_FAILURE(open());
  const std::uint64_t last = append(true, 12, 15 << 10);   // about 4 entries per 64 KiB segment
  const std::uint64_t after = append(false, 5, 15 << 10);  // the entries that stay
  const TrimResult trimmed = testing::trim_to_end(*replica_, after);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_GT(replica_->log().first_index(), last) << "the trim should remove every entry of t";
  replica_.reset();
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_EQ(replica_->topic_offsets().next_offset("t"), 12U);
  EXPECT_EQ(header_at(append(true)).topic_offset, 12U);
  replica_.reset();
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "TOPICSTATE");
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_EQ(replica_->topic_offsets().next_offset("t"), 13U);
  EXPECT_EQ(header_at(append(true)).topic_offset, 13U);
  replica_.reset();
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "TOPICSTATE");
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "SNAPSHOT");
  NodeError error;
  EXPECT_EQ(try_open(&error), nullptr);
  EXPECT_NE(error.message.find("TOPICSTATE"), std::string::npos) << error.message;
}

// Review finding 2: a failed periodic save moved the saved point on to throttle retries, so a
// trim then believed TOPICSTATE reached the trim point, skipped the save and trimmed: the next
// start refused (TOPICSTATE older than the log's first index).
TEST_F(TimestampFloorTest, AFailedPeriodicSaveDoesNotLetATrimRunWithoutTopicState) {
  save_entries_ = 4;
  ASSERT_NO_FATAL_FAILURE(open());
  // A directory where the save writes its temporary file: every save fails until it is removed.
  const std::filesystem::path blocker = std::filesystem::path(dir_.path()) / "TOPICSTATE.tmp";
  std::filesystem::create_directory(blocker);
  const std::uint64_t last = append(true, 12, 15 << 10);  // periodic saves due, and failing
  const std::uint64_t after = append(false, 5, 15 << 10);
  // The failure is the answer of the round that saves TOPICSTATE (after the flusher's flush).
  const TrimResult refused = testing::trim_to_end(*replica_, after);
  EXPECT_FALSE(refused.error.ok()) << "trimmed without a TOPICSTATE that reaches the trim point";
  EXPECT_EQ(replica_->log().first_index(), 1U);
  EXPECT_FALSE(replica_->trim_in_progress()) << "a failed trim stops";
  std::filesystem::remove(blocker);
  const TrimResult trimmed = testing::trim_to_end(*replica_, after);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_GT(replica_->log().first_index(), last);
  replica_.reset();
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_EQ(replica_->topic_offsets().next_offset("t"), 12U);
}

// Review finding 4: a TOPICSTATE saved beyond the log (async flush mode used to save as of a
// commit index the flushed log had not reached; a cluster-wide power cut then lost the entries
// it counted; or a storage fault that cut the log, outside test F3) is not trusted beyond the log:
// rebuilt from a whole log, or on a trimmed one from SNAPSHOT's table as of the first index - 1
// and the retained log; refused on a trimmed one without that table.
TEST_F(TimestampFloorTest, ATopicStateAheadOfTheLogIsRebuiltFromTheLogAndSnapshotOrRefused) {
  ASSERT_NO_FATAL_FAILURE(open());
  append(true, 3);
  const std::uint64_t last = replica_->log().last_index();
  replica_.reset();
  ASSERT_TRUE(
      write_topic_state(nullptr, dir_.path(), TopicState{last + 5, 7, Table{{"t", 100}}}).ok());
  ASSERT_NO_FATAL_FAILURE(open());
  ASSERT_EQ(replica_->topic_offsets().next_offset("t"), 3U);  // not the file's 100
  EXPECT_EQ(header_at(append(true)).topic_offset, 3U);
  // A trimmed log: the offsets of the removed entries are in SNAPSHOT's table as of the first
  // index - 1, and only there.
  const std::uint64_t kept = append(false, 12, 15 << 10);
  ASSERT_TRUE(testing::trim_to_end(*replica_, kept).error.ok());
  ASSERT_GT(replica_->log().first_index(), 1U);
  const std::uint64_t first = replica_->log().first_index();
  append(true, 2);  // two more entries of "t" in the retained log: offsets 4 and 5
  const std::uint64_t retained_end = replica_->log().last_index();
  replica_.reset();
  ASSERT_TRUE(write_topic_state(nullptr, dir_.path(),
                                TopicState{retained_end + 5, 7, Table{{"t", 100}}})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(open());
  EXPECT_EQ(replica_->log().first_index(), first);
  EXPECT_EQ(replica_->topic_offsets().next_offset("t"), 6U);  // not the file's 100
  EXPECT_EQ(header_at(append(true)).topic_offset, 6U);
  const std::uint64_t end = replica_->log().last_index();
  replica_.reset();
  ASSERT_TRUE(
      write_topic_state(nullptr, dir_.path(), TopicState{end + 5, 7, Table{{"t", 100}}}).ok());
  std::filesystem::remove(std::filesystem::path(dir_.path()) / "SNAPSHOT");
  NodeError error;
  EXPECT_EQ(try_open(&error), nullptr);
  EXPECT_NE(error.message.find("ends at"), std::string::npos) << error.message;
}

// A damaged TOPICSTATE of a log that still starts at index 1 is rebuilt from the whole log (one of
// a trimmed log is refused: a guess could hand out an offset twice).
TEST(TopicStateOpen, ADamagedFileOfAWholeLogIsRebuiltFromIt) {
  server::testing::TempDir dir;
  std::filesystem::create_directories(dir.path());
  {
    std::ofstream damaged(std::filesystem::path(dir.path()) / "TOPICSTATE", std::ios::binary);
    damaged << "not a topic state";
  }
  NullSender sender;
  RoomyDisk disk;
  ReplicaConfig c;
  c.node_id = 1;
  c.members = {{1, "127.0.0.1:1"}};
  c.data_dir = dir.path();
  c.store.flush_mode = store::FlushMode::kAsync;
  c.raft.id = 1;
  c.raft.initial_conf.voters = {1};
  NodeError error;
  ReplicaDeps deps;
  deps.sender = &sender;
  deps.disk = &disk;
  // The log starts at index 1: rebuilt from it (and rewritten).
  auto replica = Replica::open(c, deps, &error);
  ASSERT_NE(replica, nullptr) << error.message;
  replica.reset();
  auto reread = read_topic_state(nullptr, dir.path());
  ASSERT_TRUE(reread.ok()) << reread.status().to_string();
}

}  // namespace
}  // namespace raftlog::replica

// After a trim whose first retained entry is plain (no topic, no timestamp), a node answers what a
// node rebuilt from the trimmed log answers (docs/design.md, "Time lookups after a trim"): a time
// lookup (the Topics FindByTime RPC, `read --since`) the answer of the untrimmed log clamped to the
// log's start, so the plain first entry when a trimmed entry was stamped at or after the time (it
// was appended after that one: review of dispatch3, M3); a topic whose entries the trim removed
// whole is listed on both (it was unknown to the rebuilt node only, which then refused a group
// commit the other admitted). On a real one-node Server in process: first the node that indexed the
// entries before the trim, then the same node with derived/ removed (its indexes rebuilt from the
// trimmed log, seeded from SNAPSHOT: the topic table and the running max stamp as of its start).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "raftlog/v1/client.grpc.pb.h"
#include "raftlog/v1/groups.grpc.pb.h"
#include "raftlog/v1/topics.grpc.pb.h"
#include "replica/snapshot_data.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

// The index FindByTime answers for `timestamp_ms` over the whole log (0 when none), nullopt on an
// error.
std::optional<std::uint64_t> find_by_time(const InProcessNode& node, std::uint64_t timestamp_ms) {
  auto stub = v1::Topics::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::FindByTimeRequest request;
  request.set_timestamp_ms(timestamp_ms);
  v1::FindByTimeResponse response;
  const grpc::Status status = stub->FindByTime(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (!status.ok()) return std::nullopt;
  return response.found() ? response.index() : 0;
}

// The topic's [first, end) offsets as ListTopics answers them; nullopt when it is not listed.
std::optional<std::pair<std::uint64_t, std::uint64_t>> listed(const InProcessNode& node,
                                                              const std::string& topic) {
  auto stub = v1::Topics::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListTopicsResponse response;
  const grpc::Status status = stub->ListTopics(&context, v1::ListTopicsRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (const v1::TopicInfo& info : response.topics()) {
    if (info.topic() == topic) return std::make_pair(info.first_offset(), info.end_offset());
  }
  return std::nullopt;
}

// A group commit of `topic` at `offset` (the leader admits only a topic its indexes know).
grpc::Status commit_offset(const InProcessNode& node, const std::string& topic,
                           std::uint64_t offset) {
  auto stub = v1::Groups::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::CommitOffsetRequest request;
  request.set_group("g");
  request.set_topic(topic);
  request.set_offset(offset);
  v1::CommitOffsetResponse response;
  return stub->CommitOffset(&context, request, &response);
}

// Restarts the node with derived/ removed: its indexes rebuilt from the trimmed log, seeded from
// SNAPSHOT, as a follower's after a snapshot install; waits until they reach `last`.
void rebuild_indexes(InProcessNode& node, std::uint64_t last) {
  node.shutdown();
  std::filesystem::remove_all(node.data_dir() + "/derived");
  ASSERT_TRUE(node.restart());
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last; }, 10s));
}

// The timestamp the entry at `index` carries (0 for a plain one); the test fails when it cannot be
// read.
std::uint64_t stamp_of(const InProcessNode& node, std::uint64_t index) {
  auto stub = v1::Log::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ReadRequest request;
  request.set_from_index(index);
  request.set_max_entries(1);
  v1::ReadResponse response;
  const grpc::Status status = stub->Read(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.entries_size(), 1);
  return status.ok() && response.entries_size() == 1 ? response.entries(0).timestamp_ms() : 0;
}

// A log whose first retained entry is plain after a trim: "old" (4 stamped entries) trimmed whole,
// then 30 plain entries of 8,000 bytes over several 64 KiB segments (the trim leaves one of them
// first), then "new" (3 stamped entries) in a later millisecond.
struct PlainStart {
  std::uint64_t last_old = 0;
  std::uint64_t first = 0;      // the log's first index after the trim (a plain entry)
  std::uint64_t first_new = 0;  // the first stamped entry after it
  std::uint64_t last_new = 0;
  std::uint64_t old_stamp = 0;  // the last trimmed stamp
  std::uint64_t new_stamp = 0;  // first_new's
};

void make_plain_start(InProcessNode& node, PlainStart* out) {
  out->last_old = node.append_to_topic("old", 4, 8000);
  ASSERT_NE(out->last_old, 0u);
  out->old_stamp = stamp_of(node, out->last_old);
  const std::uint64_t last_plain = node.append(30, 8000);
  ASSERT_NE(last_plain, 0u);
  std::this_thread::sleep_for(5ms);  // "new" in a later millisecond than "old"
  out->last_new = node.append_to_topic("new", 3, 8000);
  ASSERT_NE(out->last_new, 0u);
  out->first_new = last_plain + 1;
  out->new_stamp = stamp_of(node, out->first_new);
  ASSERT_GT(out->new_stamp, out->old_stamp);
  out->first = node.trim_before(last_plain, out->last_old, 10s);
  ASSERT_GT(out->first, out->last_old) << "the log starts at " << out->first;
  ASSERT_LE(out->first, last_plain) << "the first retained entry must be a plain one";
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= out->last_new; }, 10s));
}

// Review of dispatch3, M3 (the lead took its rule): a time at or before a trimmed stamp is answered
// with the plain first entry F, appended after that stamp, on the node that indexed the trimmed
// entries and on a rebuilt one, which knows the trimmed stamp only from SNAPSHOT's running max.
// Failed before (both answered the first stamped entry, first_new, for times 0, 1 and old_stamp:
// the plain entries F..first_new-1 were left out once the trim ran).
TEST(TimeLookupTrim, APlainFirstEntryIsAnsweredAlikeByTheNodeThatIndexedItAndARebuiltOne) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  PlainStart log;
  ASSERT_NO_FATAL_FAILURE(make_plain_start(node, &log));
  const auto expect_answers = [&](const char* which) {
    EXPECT_EQ(find_by_time(node, 0), log.first) << which << "; the log starts at " << log.first;
    EXPECT_EQ(find_by_time(node, 1), log.first) << which;
    EXPECT_EQ(find_by_time(node, log.old_stamp), log.first) << which;
    EXPECT_EQ(find_by_time(node, log.old_stamp + 1), log.first_new) << which;
    EXPECT_EQ(find_by_time(node, log.new_stamp), log.first_new) << which;
    EXPECT_EQ(find_by_time(node, log.new_stamp + 100'000), 0u) << which;
  };
  // The node that indexed "old" before the trim (its time records below the log's start span it).
  expect_answers("indexed before the trim");
  EXPECT_EQ(listed(node, "old"), std::make_pair(std::uint64_t{4}, std::uint64_t{4}));
  const grpc::Status committed = commit_offset(node, "old", 4);
  EXPECT_TRUE(committed.ok()) << committed.error_message();

  // The same log, its indexes rebuilt from the trimmed log.
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, log.last_new));
  expect_answers("rebuilt");
  EXPECT_EQ(listed(node, "old"), std::make_pair(std::uint64_t{4}, std::uint64_t{4}))
      << "a topic trimmed whole is known to the rebuilt node too";
  const grpc::Status recommitted = commit_offset(node, "old", 4);
  EXPECT_TRUE(recommitted.ok()) << "a group commit of a topic trimmed whole is admitted after the "
                                   "rebuild too: "
                                << recommitted.error_message();
}

// Flips one payload byte of the entry at `index`, the first of its segment file, in place (the
// store maps the file shared, so reads see it at once): its checksum fails from then on.
void damage_first_entry_of_segment(const InProcessNode& node, std::uint64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "%020llu.seg", static_cast<unsigned long long>(index));
  std::string path;
  for (const auto& file : std::filesystem::recursive_directory_iterator(node.data_dir())) {
    if (file.path().filename() == name) path = file.path().string();
  }
  ASSERT_FALSE(path.empty()) << "no segment file " << name;
  std::fstream segment(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string head(64 << 10, '\0');
  segment.read(head.data(), static_cast<std::streamsize>(head.size()));
  // The plain entries' payloads are runs of 'e': the segment's first run is its first entry's.
  const std::size_t run = head.find(std::string(100, 'e'));
  ASSERT_NE(run, std::string::npos);
  segment.clear();
  segment.seekp(static_cast<std::streamoff>(run + 50));
  segment.put('x');
  segment.flush();
  ASSERT_TRUE(segment.good());
}

// Review of dispatch3, L3: a time lookup reads the indexes only, never the log's first entry, so
// a damaged first entry does not fail a lookup whose answer lies above it (nor one at it: the
// index knows that a trimmed entry reached the time). Failed before: DATA_LOSS for every lookup
// (the node read the first entry to learn whether it was stamped).
TEST(TimeLookupTrim, ALookupDoesNotReadTheLogsFirstEntry) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  PlainStart log;
  ASSERT_NO_FATAL_FAILURE(make_plain_start(node, &log));
  ASSERT_NO_FATAL_FAILURE(damage_first_entry_of_segment(node, log.first));
  {
    auto stub = v1::Log::NewStub(node.new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ReadRequest request;
    request.set_from_index(log.first);
    request.set_max_entries(1);
    v1::ReadResponse response;
    EXPECT_EQ(stub->Read(&context, request, &response).error_code(), grpc::StatusCode::DATA_LOSS)
        << "the first entry must be damaged for this test";
  }
  EXPECT_EQ(find_by_time(node, log.new_stamp), log.first_new);
  EXPECT_EQ(find_by_time(node, 0), log.first);
}

// Rewrites the node's SNAPSHOT (and a SNAPSHOT.next a trim left) as a binary from before version 5
// wrote it: the same content, without the running max stamp (version 3). The node must be down.
void rewrite_snapshots_without_stamp(const InProcessNode& node) {
  for (const replica::SnapshotFile which :
       {replica::SnapshotFile::kCurrent, replica::SnapshotFile::kNext}) {
    auto saved = replica::read_snapshot_file(nullptr, node.data_dir(), which);
    ASSERT_TRUE(saved.ok()) << saved.status().to_string();
    if (!saved->has_value()) continue;
    replica::SnapshotData old = **saved;
    ASSERT_TRUE(old.stamp_at_index) << "a trim of this version writes version 5";
    old.stamp_at_index = false;
    old.stamp_max_ms = 0;
    const std::string path =
        node.data_dir() + (which == replica::SnapshotFile::kNext ? "/SNAPSHOT.next" : "/SNAPSHOT");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << replica::encode_snapshot_data(old);
    ASSERT_TRUE(out.good());
  }
}

// A log first trimmed by an older binary (its SNAPSHOT of version 3 carries no running max), then
// trimmed again by this one: the second trim's SNAPSHOT carries the largest stamp it passed (the
// running max from there on, stamps not stepping back), and a rebuilt node answers a time those
// trimmed entries reached with the plain first entry, as the node that indexed them does. Failed
// before version 5 (both answered the first stamped entry after the start).
TEST(TimeLookupTrim, AfterASnapshotOfAnOlderVersionTheNextTrimCarriesTheStampsItPassed) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  const std::uint64_t last_a = node.append_to_topic("a", 4, 8000);
  const std::uint64_t last_plain = node.append(30, 8000);
  ASSERT_NE(last_a, 0u);
  ASSERT_NE(last_plain, 0u);
  const std::uint64_t a_stamp = stamp_of(node, last_a);
  const std::uint64_t first_old = node.trim_before(last_plain, last_a, 10s);
  ASSERT_GT(first_old, last_a);
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last_plain; }, 10s));
  node.shutdown();
  ASSERT_NO_FATAL_FAILURE(rewrite_snapshots_without_stamp(node));
  ASSERT_TRUE(node.restart());

  // The second trim: "old" (stamped) trimmed whole, then a plain start, then "new".
  PlainStart log;
  ASSERT_NO_FATAL_FAILURE(make_plain_start(node, &log));
  ASSERT_GT(log.first, first_old);
  auto saved = replica::read_snapshot_file(nullptr, node.data_dir(), replica::SnapshotFile::kNext);
  ASSERT_TRUE(saved.ok());
  if (!saved->has_value() || (*saved)->index + 1 != log.first) {
    saved = replica::read_snapshot_file(nullptr, node.data_dir(), replica::SnapshotFile::kCurrent);
  }
  ASSERT_TRUE(saved.ok() && saved->has_value()) << "no SNAPSHOT";
  EXPECT_EQ((*saved)->index + 1, log.first);
  EXPECT_TRUE((*saved)->stamp_at_index);
  EXPECT_EQ((*saved)->stamp_max_ms, log.old_stamp) << "the largest stamp the second trim passed";

  const auto expect_answers = [&](const char* which) {
    EXPECT_EQ(find_by_time(node, 0), log.first) << which;
    EXPECT_EQ(find_by_time(node, a_stamp), log.first) << which;
    EXPECT_EQ(find_by_time(node, log.old_stamp), log.first) << which;
    EXPECT_EQ(find_by_time(node, log.old_stamp + 1), log.first_new) << which;
  };
  expect_answers("indexed before the trim");
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, log.last_new));
  expect_answers("rebuilt");
}

// The running max travels from trim to trim through SNAPSHOT: a restart (the replica reads it
// back), then a second trim that deletes plain entries only (it reads no stamp of its own), and a
// node rebuilt after it still answers a time the first trim's entries reached with the log's
// plain start.
TEST(TimeLookupTrim, TheRunningMaxSurvivesARestartAndATrimOfPlainEntriesOnly) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  const std::uint64_t last_old = node.append_to_topic("old", 4, 8000);
  ASSERT_NE(last_old, 0u);
  const std::uint64_t old_stamp = stamp_of(node, last_old);
  const std::uint64_t last_plain = node.append(60, 8000);  // about 8 segments of 64 KiB
  ASSERT_NE(last_plain, 0u);
  std::this_thread::sleep_for(5ms);
  const std::uint64_t last_new = node.append_to_topic("new", 3, 8000);
  ASSERT_NE(last_new, 0u);
  const std::uint64_t first_new = last_plain + 1;
  const std::uint64_t first = node.trim_before(last_old + 12, last_old, 10s);
  ASSERT_GT(first, last_old);
  ASSERT_LT(first + 20, last_plain) << "the second trim needs plain segments left";
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last_new; }, 10s));
  node.shutdown();
  ASSERT_TRUE(node.restart());
  const std::uint64_t second = node.trim_before(last_plain, first, 10s);
  ASSERT_GT(second, first);
  ASSERT_LE(second, last_plain) << "the second trim must leave a plain start";
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, last_new));
  EXPECT_EQ(find_by_time(node, old_stamp), second) << "rebuilt after the second trim";
  EXPECT_EQ(find_by_time(node, old_stamp + 1), first_new);
}

// drills6 M4's case, through the node (review of dispatch3, M2): the log's start after the trim is
// a stamped entry in the millisecond of the trimmed entry before it (one Append: one stamp), so the
// time index holds no record of it. A trimmed entry reached the time, so the start is the answer,
// before the trim's rebuild and after (the rebuilt node knows it from SNAPSHOT's running max).
TEST(TimeLookupTrim, AStampedFirstEntryInTheTrimmedMillisecondIsTheAnswerOnEveryNode) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  constexpr std::size_t kBatch = 30;  // 8,000 bytes each: several 64 KiB segments, one stamp
  const std::uint64_t batch_last = node.append_to_topic("same", kBatch, 8000, kBatch);
  ASSERT_NE(batch_last, 0u);
  const std::uint64_t batch_first = batch_last - kBatch + 1;
  std::this_thread::sleep_for(5ms);  // a later millisecond: a time record past the batch
  const std::uint64_t later = node.append_to_topic("later", 1, 10);
  ASSERT_NE(later, 0u);
  const std::uint64_t first = node.trim_before(batch_last, batch_first, 10s);
  ASSERT_GT(first, batch_first) << "the trim must cut the batch";
  ASSERT_LE(first, batch_last);
  // The start and the batch's last entry carry the batch's one stamp.
  {
    auto stub = v1::Log::NewStub(node.new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ReadRequest request;
    request.set_from_index(first);
    request.set_max_entries(static_cast<std::uint32_t>(batch_last - first + 1));
    v1::ReadResponse response;
    ASSERT_TRUE(stub->Read(&context, request, &response).ok());
    ASSERT_EQ(response.entries_size(), static_cast<int>(batch_last - first + 1));
    EXPECT_EQ(response.entries(0).timestamp_ms(),
              response.entries(response.entries_size() - 1).timestamp_ms());
  }
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= later; }, 10s));
  EXPECT_EQ(find_by_time(node, 0), first) << "indexed before the trim";
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, later));
  EXPECT_EQ(find_by_time(node, 0), first) << "rebuilt";
}

}  // namespace
}  // namespace raftlog::testing

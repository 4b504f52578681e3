// The dispatcher hands the derived indexes the topic table as of the log's first index - 1 from the
// replica's SNAPSHOT (src/server/dispatcher.h, seed_topics_from_snapshot), so that version-1
// entries (written by a binary from before topic offsets) after the log's start are numbered on
// from the table, as the leader numbers them, not from 0. On a real one-node Server in process: a
// topic whose entries a trim removed whole, then version-1 entries of it written to the log
// offline (as an older binary wrote them), and the indexes rebuilt at the log's start (derived/
// removed: a follower's indexes after a snapshot install start there in the same way).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "raftlog/v1/client.grpc.pb.h"
#include "raftlog/v1/topics.grpc.pb.h"
#include "replica/snapshot_data.h"
#include "replica/store_log_reader.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"
#include "shared/v1_envelope.h"
#include "store/commit_log.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

TEST(DispatcherSeed, VersionOneEntriesAfterATrimmedTopicContinueItsOffsets) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  // "old": 4 entries, all trimmed below; "keep" fills segments after them.
  const std::uint64_t last_old = node.append_to_topic("old", 4, 8000);
  ASSERT_NE(last_old, 0u);
  const std::uint64_t last_keep = node.append_to_topic("keep", 30, 8000);
  ASSERT_NE(last_keep, 0u);
  const std::uint64_t first = node.trim_before(last_keep, last_old + 1, 10s);
  ASSERT_GT(first, last_old + 1) << "the log starts at " << first;
  node.shutdown();
  const std::string dir = node.data_dir();
  auto saved = replica::read_snapshot_file(nullptr, dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  ASSERT_EQ((*saved)->index + 1, first);
  ASSERT_TRUE((*saved)->topics_at_index);

  // Two version-1 entries of "old" after the log's end, as an older binary wrote them, and the
  // derived indexes gone: they are rebuilt from the log's first index.
  std::uint64_t v1_first = 0;
  {
    store::Options options = node.config().store;
    auto log = store::CommitLog::open(dir + "/log", options);
    ASSERT_TRUE(log.ok()) << log.status().to_string();
    v1_first = (*log)->last_index() + 1;
    const std::uint64_t term = *(*log)->term_at((*log)->last_index());
    const std::string payload = v1_envelope("old", "v1");
    std::vector<store::EntryToAppend> batch;
    for (std::uint64_t i = 0; i < 2; ++i) {
      store::EntryMeta meta;
      meta.index = v1_first + i;
      meta.term = term;
      meta.flags = replica::kEntryFlagEnvelope;
      batch.push_back(store::EntryToAppend{meta, payload});
    }
    ASSERT_TRUE((*log)->append(batch).ok());
    ASSERT_TRUE((*log)->flush().ok());
    ASSERT_TRUE((*log)->close().ok());
  }
  std::filesystem::remove_all(dir + "/derived");
  ASSERT_TRUE(node.restart());

  // The leader's numbering: the table as of the first index - 1 says 4 entries of "old" so far,
  // so the version-1 entries are offsets 4 and 5 (not 0 and 1, this node's own count).
  auto topics = ::raftlog::v1::Topics::NewStub(node.new_connection());
  ::raftlog::v1::ReadTopicResponse read;
  std::string last_answer;
  const bool found = eventually(
      [&] {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 2s);
        ::raftlog::v1::ReadTopicRequest request;
        request.set_topic("old");
        request.set_from_offset(4);
        read.Clear();
        const grpc::Status status = topics->ReadTopic(&context, request, &read);
        last_answer = status.ok() ? "offsets [" + std::to_string(read.first_offset()) + ", " +
                                        std::to_string(read.end_offset()) + "), indexed through " +
                                        std::to_string(read.indexed_through())
                                  : status.error_message();
        return status.ok() && read.entries_size() == 2;
      },
      10s);
  ASSERT_TRUE(found) << "the version-1 entries are not at offsets 4 and 5: " << last_answer;
  EXPECT_EQ(read.entries(0).offset(), 4u);
  EXPECT_EQ(read.entries(0).entry().index(), v1_first);
  EXPECT_EQ(read.entries(1).offset(), 5u);
  EXPECT_EQ(read.entries(1).entry().index(), v1_first + 1);
}

}  // namespace
}  // namespace raftlog::testing

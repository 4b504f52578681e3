// reset_for_reuse(): a peer stream element that held a large batch is replaced by a fresh one, so
// its objects and payload capacity are freed; one that held a small batch is only cleared (its
// objects are reused, which is what keeps ordinary batches cheap).
#include "server/batch_reuse.h"

#include <gtest/gtest.h>

#include <string>

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;

void fill(pb::RaftMessageBatch& batch, int messages, int entries_each, std::size_t payload_bytes) {
  for (int m = 0; m < messages; ++m) {
    pb::RaftMessage* message = batch.add_messages();
    for (int e = 0; e < entries_each; ++e)
      message->add_entries()->set_payload(std::string(payload_bytes, 'p'));
  }
}

TEST(BatchReuse, ALargeBatchIsReplacedAndItsMemoryFreed) {
  pb::RaftMessageBatch batch;
  fill(batch, 64, 64, 1024);  // a catch-up batch: about 4 MiB of payload
  const std::size_t held = batch.SpaceUsedLong();
  ASSERT_GT(held, 4U << 20);
  EXPECT_GT(held_bytes(batch), kMaxReusedElementBytes);
  EXPECT_TRUE(reset_for_reuse(batch));
  EXPECT_EQ(batch.messages_size(), 0);
  // Cleared instead, it would still hold all of it (what the transport did before).
  EXPECT_LT(batch.SpaceUsedLong(), 1024U);
  pb::RaftMessageBatch cleared;
  fill(cleared, 64, 64, 1024);
  cleared.Clear();
  EXPECT_GT(cleared.SpaceUsedLong(), 4U << 20)
      << "protobuf no longer keeps cleared objects: the bound is moot";
}

TEST(BatchReuse, ASmallBatchIsClearedAndKeepsItsObjectsForTheNextUse) {
  pb::RaftMessageBatch batch;
  fill(batch, 4, 8, 1024);
  EXPECT_LE(held_bytes(batch), kMaxReusedElementBytes);
  EXPECT_FALSE(reset_for_reuse(batch));
  EXPECT_EQ(batch.messages_size(), 0);
  fill(batch, 4, 8, 1024);
  EXPECT_EQ(batch.messages_size(), 4);
  EXPECT_EQ(batch.messages(3).entries_size(), 8);
}

TEST(BatchReuse, OneLargeMessageCountsLikeABatch) {
  pb::RaftMessage message;
  message.add_entries()->set_payload(std::string(kMaxReusedElementBytes + 1, 'x'));
  EXPECT_TRUE(reset_for_reuse(message));
  EXPECT_EQ(message.entries_size(), 0);
  EXPECT_LT(message.SpaceUsedLong(), 1024U);
}

}  // namespace
}  // namespace raftlog::server

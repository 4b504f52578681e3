#include "store/durable_record.h"

#include <gtest/gtest.h>

#include "store/memory_env.h"

namespace raftlog::store {
namespace {

TEST(DurableRecord, WritesAlternateSlotsAndSurviveReopen) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/d").ok());
  {
    auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
    ASSERT_TRUE(record.ok());
    EXPECT_FALSE((*record)->current());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*record)->write("value-" + std::to_string(i)).ok());
    EXPECT_EQ(*(*record)->current(), "value-4");
  }
  env.crash();
  env.restart({CrashMode::kLoseUnflushed, 1});
  auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
  ASSERT_TRUE(record.ok());
  ASSERT_TRUE((*record)->current());
  EXPECT_EQ(*(*record)->current(), "value-4");
  EXPECT_FALSE((*record)->write(std::string(DurableRecordFile::kMaxPayloadBytes + 1, 'x')).ok());
}

TEST(DurableRecord, TornNewestSlotFallsBackToPrevious) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/d").ok());
  {
    auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
    ASSERT_TRUE(record.ok());
    ASSERT_TRUE((*record)->write("first").ok());   // slot 0
    ASSERT_TRUE((*record)->write("second").ok());  // slot 1
  }
  // Damage slot 1's payload (as a torn write would).
  ASSERT_TRUE(env.corrupt_byte("/d/rec", DurableRecordFile::kSlotStrideBytes + 26, 3).ok());
  auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
  ASSERT_TRUE(record.ok());
  ASSERT_TRUE((*record)->current());
  EXPECT_EQ(*(*record)->current(), "first");
  // The next write goes to the damaged slot, never over the good one.
  ASSERT_TRUE((*record)->write("third").ok());
  auto again = DurableRecordFile::open(&env, "/d/rec", "/d");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->current(), "third");
}

TEST(DurableRecord, CrashDuringWriteKeepsOldOrNewNeverGarbage) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    MemoryEnv env;
    ASSERT_TRUE(env.create_dir("/d").ok());
    {
      auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
      ASSERT_TRUE(record.ok());
      ASSERT_TRUE((*record)->write("old-value").ok());
      env.crash_after_syncs(0);  // the next write's flush never happens
      EXPECT_FALSE((*record)->write("new-value-that-is-longer").ok());
    }
    env.restart({static_cast<CrashMode>(seed % 5), seed});
    auto record = DurableRecordFile::open(&env, "/d/rec", "/d");
    ASSERT_TRUE(record.ok());
    ASSERT_TRUE((*record)->current());
    const std::string value = *(*record)->current();
    EXPECT_TRUE(value == "old-value" || value == "new-value-that-is-longer") << value;
  }
}

}  // namespace
}  // namespace raftlog::store

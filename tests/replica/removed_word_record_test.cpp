// DATA_DIR/REMOVED's codec (replica/removed_word_record.h): a word written is read back; a file
// whose slots fail their CRC, a record of another version or size, a truncated file, another
// node's record and an impossible word are each damage, said, never a word.
#include "replica/removed_word_record.h"

#include <gtest/gtest.h>

#include <string>

#include "replica/marker_record.h"
#include "store/endian.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

constexpr const char* kDir = "/d";
constexpr const char* kPath = "/d/REMOVED";

class RemovedWordRecordTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_.create_dir(kDir).ok()); }
  RemovedWordRecord::Found find() {
    auto found = RemovedWordRecord::find(&env_, kDir, 7);
    EXPECT_TRUE(found.ok()) << found.status().to_string();
    return found.ok() ? *found : RemovedWordRecord::Found{};
  }
  store::MemoryEnv env_;
};

TEST_F(RemovedWordRecordTest, AWordWrittenIsReadBackAndRemoved) {
  EXPECT_FALSE(find().present);
  const raft::RemovedWord word{3, 41, 6};
  ASSERT_TRUE(RemovedWordRecord::write(&env_, kDir, 7, word).ok());
  RemovedWordRecord::Found found = find();
  EXPECT_TRUE(found.present);
  EXPECT_EQ(found.damage, "");
  EXPECT_EQ(found.word, word);
  ASSERT_TRUE(RemovedWordRecord::write(&env_, kDir, 7, raft::RemovedWord{4, 50, 7}).ok());
  EXPECT_EQ(find().word, (raft::RemovedWord{4, 50, 7}));
  ASSERT_TRUE(RemovedWordRecord::remove(&env_, kDir).ok());
  EXPECT_FALSE(find().present);
  EXPECT_TRUE(RemovedWordRecord::remove(&env_, kDir).ok()) << "removing none is fine";
}

TEST_F(RemovedWordRecordTest, BadChecksumsAreDamage) {
  ASSERT_TRUE(RemovedWordRecord::write(&env_, kDir, 7, raft::RemovedWord{3, 41, 6}).ok());
  auto bytes = env_.read_file(kPath, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  std::string flipped = *bytes;
  for (char& c : flipped) c = static_cast<char>(c ^ 0x5a);  // every slot's CRC fails
  ASSERT_TRUE(env_.write_file(kPath, flipped).ok());
  const RemovedWordRecord::Found found = find();
  EXPECT_TRUE(found.present);
  EXPECT_NE(found.damage, "");
}

TEST_F(RemovedWordRecordTest, ATruncatedFileIsDamage) {
  ASSERT_TRUE(RemovedWordRecord::write(&env_, kDir, 7, raft::RemovedWord{3, 41, 6}).ok());
  auto bytes = env_.read_file(kPath, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  // Cut inside the first slot's record (its header and 36-byte payload): no whole record is left.
  for (std::size_t keep : {std::size_t{0}, std::size_t{5}, std::size_t{30}}) {
    ASSERT_TRUE(env_.write_file(kPath, bytes->substr(0, keep)).ok());
    const RemovedWordRecord::Found found = find();
    EXPECT_TRUE(found.present) << keep;
    EXPECT_NE(found.damage, "") << keep;
  }
  // A cut past the slot the record was written to leaves that whole slot: the word still reads
  // (what the two slots are for).
  ASSERT_TRUE(env_.write_file(kPath, bytes->substr(0, bytes->size() / 2)).ok());
  EXPECT_EQ(find().word, (raft::RemovedWord{3, 41, 6}));
}

TEST_F(RemovedWordRecordTest, AnotherVersionSizeNodeOrAnImpossibleWordIsDamage) {
  std::string version_2 = RemovedWordRecord::encode(7, raft::RemovedWord{3, 41, 6});
  store::put_u32(version_2.data(), 2);
  const std::string other_node = RemovedWordRecord::encode(8, raft::RemovedWord{3, 41, 6});
  const std::string by_itself = RemovedWordRecord::encode(7, raft::RemovedWord{7, 41, 6});
  const std::string no_position = RemovedWordRecord::encode(7, raft::RemovedWord{3, 0, 0});
  const std::string past_terms =
      RemovedWordRecord::encode(7, raft::RemovedWord{3, 41, (std::uint64_t{1} << 62) + 1});
  for (const std::string& payload :
       {version_2, std::string(20, '\1'), other_node, by_itself, no_position, past_terms}) {
    ASSERT_TRUE(write_marker_record(&env_, kDir, RemovedWordRecord::kFileName, payload).ok());
    const RemovedWordRecord::Found found = find();
    EXPECT_TRUE(found.present);
    EXPECT_NE(found.damage, "") << "payload of " << payload.size() << " bytes read as a word";
  }
}

}  // namespace
}  // namespace raftlog::replica

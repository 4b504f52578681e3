#include "replica/hard_state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "store/durable_record.h"
#include "store/env.h"
#include "temp_dir.h"

namespace raftlog::replica {
namespace {

using server::testing::TempDir;

std::string hard_state_path(const std::string& dir) { return dir + "/HARDSTATE"; }

std::string read_file(const std::string& path) {
  std::string bytes(std::filesystem::file_size(path), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(in.good()) << path;
  return bytes;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(HardStateFile, EncodeDecodeRoundTrip) {
  const raft::HardState hard_state{0xFEDCBA9876543210ULL, 0x0123456789ABCDEFULL, 0};
  auto decoded = HardStateFile::decode(HardStateFile::encode(hard_state));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, hard_state);
}

TEST(HardStateFile, DecodeRejectsWrongSize) {
  const std::string good = HardStateFile::encode(raft::HardState{3, 2, 0});
  for (const std::string& bad : {std::string(), good.substr(0, good.size() - 1), good + '\0'}) {
    auto decoded = HardStateFile::decode(bad);
    ASSERT_FALSE(decoded.ok()) << bad.size();
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption);
  }
}

TEST(HardStateFile, DecodeRejectsUnknownVersion) {
  std::string payload = HardStateFile::encode(raft::HardState{3, 2, 0});
  payload[0] = 2;  // u32 little-endian version 1 -> 2
  auto decoded = HardStateFile::decode(payload);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption);
}

TEST(HardStateFile, FreshDirectoryStartsAtTermZeroWithoutVote) {
  TempDir dir;
  auto file = HardStateFile::open(dir.path() + "/node");  // created on demand
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->current(), (raft::HardState{0, 0, 0}));
}

TEST(HardStateFile, WriteThenReopenKeepsTermAndVoteButNotCommit) {
  TempDir dir;
  {
    auto file = HardStateFile::open(dir.path());
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->write(raft::HardState{4, 1, 99}).ok());
    EXPECT_EQ((*file)->current(), (raft::HardState{4, 1, 0}));
    ASSERT_TRUE((*file)->write(raft::HardState{5, 3, 100}).ok());
    EXPECT_EQ((*file)->current(), (raft::HardState{5, 3, 0}));
  }
  auto reopened = HardStateFile::open(dir.path());
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->current(), (raft::HardState{5, 3, 0}));
}

// The two slots alternate: whichever one a crash tears, the other still holds a complete hard state,
// so a reopen yields either the latest or the previous value and never garbage.
TEST(HardStateFile, ATornSlotFallsBackToTheOtherWrite) {
  TempDir dir;
  const raft::HardState older{6, 2, 0};
  const raft::HardState newer{7, 3, 0};
  {
    auto file = HardStateFile::open(dir.path());
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->write(older).ok());
    ASSERT_TRUE((*file)->write(newer).ok());
  }
  const std::string original = read_file(hard_state_path(dir.path()));
  ASSERT_EQ(original.size(), store::DurableRecordFile::kFileBytes);
  std::vector<raft::HardState> seen;
  for (std::uint64_t slot = 0; slot < 2; ++slot) {
    std::string torn = original;
    const std::uint64_t start = slot * store::DurableRecordFile::kSlotStrideBytes;
    for (std::uint64_t i = start + 8; i < start + 40; ++i) torn[i] = static_cast<char>(torn[i] ^ 0x5A);
    write_file(hard_state_path(dir.path()), torn);
    auto reopened = HardStateFile::open(dir.path());
    ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
    seen.push_back((*reopened)->current());
  }
  EXPECT_NE(seen[0], seen[1]);
  for (const raft::HardState& hard_state : seen) {
    EXPECT_TRUE(hard_state == older || hard_state == newer) << hard_state.term;
  }
}

TEST(HardStateFile, AShortFileFromACrashedCreationOpensEmpty) {
  TempDir dir;
  write_file(hard_state_path(dir.path()), std::string(100, '\0'));
  auto file = HardStateFile::open(dir.path());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->current(), (raft::HardState{0, 0, 0}));
  ASSERT_TRUE((*file)->write(raft::HardState{2, 1, 0}).ok());
  auto reopened = HardStateFile::open(dir.path());
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->current(), (raft::HardState{2, 1, 0}));
}

// A record that passes the slot CRC but carries a payload this version does not understand must stop
// the node rather than be read as term 0.
TEST(HardStateFile, AValidRecordWithAnUnknownPayloadFailsOpen) {
  TempDir dir;
  {
    auto record = store::DurableRecordFile::open(store::Env::posix(), hard_state_path(dir.path()), dir.path());
    ASSERT_TRUE(record.ok());
    std::string payload = HardStateFile::encode(raft::HardState{9, 1, 0});
    payload[0] = 7;  // unknown version
    ASSERT_TRUE((*record)->write(payload).ok());
  }
  auto file = HardStateFile::open(dir.path());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), store::StatusCode::kCorruption);
}

}  // namespace
}  // namespace raftlog::replica

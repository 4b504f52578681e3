#include "replica/hard_state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "store/durable_record.h"
#include "store/endian.h"
#include "store/env.h"
#include "store/memory_env.h"
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
  payload[0] = 4;  // u32 little-endian version 3 -> 4
  auto decoded = HardStateFile::decode(payload);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption);
}

// Version 3 (docs/storage-format.md, HARDSTATE): u32 3, u64 term, u64 vote, u64 leader, u64 the
// nonce of that leader's leadership (docs/raft.md, "A second leader of a term"). Version 2 lacks the
// nonce, version 1 the leader too.
std::string payload_of_version(std::uint32_t version, std::uint64_t term, std::uint64_t vote,
                               std::uint64_t leader, std::uint64_t nonce = 0) {
  std::string out(version == 1 ? 20 : version == 2 ? 28 : 36, '\0');
  store::put_u32(out.data(), version);
  store::put_u64(out.data() + 4, term);
  store::put_u64(out.data() + 12, vote);
  if (version >= 2) store::put_u64(out.data() + 20, leader);
  if (version >= 3) store::put_u64(out.data() + 28, nonce);
  return out;
}

TEST(HardStateFile, AVersion3RecordCarriesTheLeaderOfItsTermAndItsNonce) {
  auto decoded = HardStateFile::decode(payload_of_version(3, 7, 3, 2, 0xFEEDFACECAFEBEEFULL));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->term, 7u);
  EXPECT_EQ(decoded->vote, 3u);
  EXPECT_EQ(decoded->leader, 2u);
  EXPECT_EQ(decoded->leader_nonce, 0xFEEDFACECAFEBEEFULL);
  raft::HardState written{7, 3, 0, 2};
  written.leader_nonce = 0xFEEDFACECAFEBEEFULL;
  EXPECT_EQ(HardStateFile::encode(written), payload_of_version(3, 7, 3, 2, 0xFEEDFACECAFEBEEFULL));
  // A nonce without a leader is written by nobody: damage (review of nonce6, L6).
  EXPECT_FALSE(HardStateFile::decode(payload_of_version(3, 7, 3, 0, 9)).ok());
  EXPECT_TRUE(HardStateFile::decode(payload_of_version(3, 7, 3, 0, 0)).ok());
}

TEST(HardStateFile, WriteThenReopenKeepsTheLeadersNonce) {
  TempDir dir;
  raft::HardState written{4, 1, 0, 2};
  written.leader_nonce = 0x1234;
  {
    auto file = HardStateFile::open(dir.path());
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->write(written).ok());
    EXPECT_EQ((*file)->current(), written);
  }
  auto reopened = HardStateFile::open(dir.path());
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->current(), written);
}

// A record of the binaries between the leader and its nonce: the leader is known, its nonce is not
// (0), which compares leader ids only, as those binaries did.
TEST(HardStateFile, AVersion2RecordStillReadsWithTheLeaderAndNoNonce) {
  auto decoded = HardStateFile::decode(payload_of_version(2, 7, 3, 2));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->term, 7u);
  EXPECT_EQ(decoded->vote, 3u);
  EXPECT_EQ(decoded->leader, 2u);
  EXPECT_EQ(decoded->leader_nonce, 0u);
  // A version-2 record of a version-3 length, or the reverse, is damage.
  std::string long_v2 = payload_of_version(3, 7, 3, 2, 9);
  store::put_u32(long_v2.data(), 2);
  EXPECT_FALSE(HardStateFile::decode(long_v2).ok());
  std::string short_v3 = payload_of_version(2, 7, 3, 2);
  store::put_u32(short_v3.data(), 3);
  EXPECT_FALSE(HardStateFile::decode(short_v3).ok());
}

// A record an older raftlogd wrote: the leader of its term is unknown (kNoNode), which refuses no
// leader: the node learns it from the first leader message of the term, as it did before.
TEST(HardStateFile, AVersion1RecordStillReadsWithNoLeaderKnown) {
  auto decoded = HardStateFile::decode(payload_of_version(1, 7, 3, 0));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->term, 7u);
  EXPECT_EQ(decoded->vote, 3u);
  EXPECT_EQ(decoded->leader, raft::kNoNode);
  // A version-1 record of a version-2 length, or the reverse, is damage.
  std::string long_v1 = payload_of_version(2, 7, 3, 2);
  store::put_u32(long_v1.data(), 1);
  EXPECT_FALSE(HardStateFile::decode(long_v1).ok());
  std::string short_v2 = payload_of_version(1, 7, 3, 0);
  store::put_u32(short_v2.data(), 2);
  EXPECT_FALSE(HardStateFile::decode(short_v2).ok());
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
    for (std::uint64_t i = start + 8; i < start + 40; ++i)
      torn[i] = static_cast<char>(torn[i] ^ 0x5A);
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
    auto record = store::DurableRecordFile::open(store::Env::posix(), hard_state_path(dir.path()),
                                                 dir.path());
    ASSERT_TRUE(record.ok());
    std::string payload = HardStateFile::encode(raft::HardState{9, 1, 0});
    payload[0] = 7;  // unknown version
    ASSERT_TRUE((*record)->write(payload).ok());
  }
  auto file = HardStateFile::open(dir.path());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), store::StatusCode::kCorruption);
}

// --- through a MemoryEnv: the hard state lives where the simulator's log lives ----------------------

// A directory that exists only inside the MemoryEnv (checked absent on the real file system).
constexpr const char* kMemoryOnlyDir = "/raftlog-hard-state-test-memory-only";

TEST(HardStateFileMemoryEnv, EveryOperationGoesThroughTheGivenEnv) {
  store::MemoryEnv env;
  auto file = HardStateFile::open(kMemoryOnlyDir, &env);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_TRUE((*file)->write(raft::HardState{5, 3, 0}).ok());
  EXPECT_TRUE(env.exists(hard_state_path(kMemoryOnlyDir)));
  EXPECT_FALSE(std::filesystem::exists(kMemoryOnlyDir)) << "the hard state reached the real disk";
  auto bytes = env.content(hard_state_path(kMemoryOnlyDir));
  ASSERT_TRUE(bytes.ok());
  auto slot = store::DurableRecordFile::decode_slot(bytes->data(), bytes->size());
  auto other = store::DurableRecordFile::decode_slot(
      bytes->data() + store::DurableRecordFile::kSlotStrideBytes,
      store::DurableRecordFile::kSlotStrideBytes);
  ASSERT_TRUE(slot.has_value() || other.has_value());
  const std::string payload = slot.has_value() ? slot->payload : other->payload;
  EXPECT_EQ(payload, HardStateFile::encode(raft::HardState{5, 3, 0}));
}

// write() returns once the record is durable: a power loss right after it keeps it.
TEST(HardStateFileMemoryEnv, AWrittenHardStateSurvivesPowerLoss) {
  store::MemoryEnv env;
  {
    auto file = HardStateFile::open(kMemoryOnlyDir, &env);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    ASSERT_TRUE((*file)->write(raft::HardState{2, 1, 0}).ok());
    ASSERT_TRUE((*file)->write(raft::HardState{3, 2, 0}).ok());
    env.crash();
  }
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
  auto reopened = HardStateFile::open(kMemoryOnlyDir, &env);
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->current(), (raft::HardState{3, 2, 0}));
}

// A power loss inside a write, in every way the unsynced bytes can come back: the previous or the
// new hard state, never garbage and never a refusal to open.
TEST(HardStateFileMemoryEnv, APowerLossDuringAWriteKeepsTheOldOrTheNewHardState) {
  const raft::HardState older{6, 2, 0};
  const raft::HardState newer{7, 3, 0};
  for (const store::CrashMode mode :
       {store::CrashMode::kLoseUnflushed, store::CrashMode::kTornWrite,
        store::CrashMode::kKeepRandomSectors, store::CrashMode::kFlipBits,
        store::CrashMode::kKeepAll}) {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      SCOPED_TRACE(std::string(store::to_string(mode)) + " seed " + std::to_string(seed));
      store::MemoryEnv env;
      {
        auto file = HardStateFile::open(kMemoryOnlyDir, &env);
        ASSERT_TRUE(file.ok()) << file.status().to_string();
        ASSERT_TRUE((*file)->write(older).ok());
        env.crash_after_syncs(0);  // the next write's sync does not happen: power is lost there
        EXPECT_FALSE((*file)->write(newer).ok());
        ASSERT_TRUE(env.crashed());
      }
      env.restart(store::CrashOptions{mode, seed});
      auto reopened = HardStateFile::open(kMemoryOnlyDir, &env);
      ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
      const raft::HardState recovered = (*reopened)->current();
      EXPECT_TRUE(recovered == older || recovered == newer)
          << recovered.term << "/" << recovered.vote;
      if (mode == store::CrashMode::kLoseUnflushed) {
        EXPECT_EQ(recovered, older);
      }
    }
  }
}

// A power loss at each sync of the file's creation leaves a file (or none) that opens as a new node.
TEST(HardStateFileMemoryEnv, APowerLossDuringCreationOpensAsANewNode) {
  for (std::uint64_t syncs = 0; syncs < 3; ++syncs) {
    SCOPED_TRACE("crash after " + std::to_string(syncs) + " syncs");
    store::MemoryEnv env;
    env.crash_after_syncs(syncs);
    {
      auto file = HardStateFile::open(kMemoryOnlyDir, &env);
      if (file.ok())
        (void)(*file)->write(raft::HardState{1, 1, 0});  // meets the crash if open did not
    }
    ASSERT_TRUE(env.crashed());
    env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
    auto reopened = HardStateFile::open(kMemoryOnlyDir, &env);
    ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
    EXPECT_EQ((*reopened)->current(), (raft::HardState{0, 0, 0}));
  }
}

}  // namespace
}  // namespace raftlog::replica

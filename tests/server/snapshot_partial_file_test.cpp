// SNAPSHOT.partial (snapshot_partial_file.h): the format read back exactly, what a torn or damaged
// file keeps (the records up to the last good one) or drops (a bad header, another cluster's, node's
// or snapshot's file, a total above the bound), and the file following a reassembler: a new
// reassembler built on it resumes where the old one's data stopped.
#include "server/snapshot_partial_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "node/temp_dir.h"
#include "snapshot_chunk_support.h"

namespace raftlog::server {
namespace {

using namespace snapshot_testing;  // snapshot_chunk_support.h
using testing::TempDir;

constexpr raft::NodeId kSelf = 2;  // snapshot_message() sends to node 2

SnapshotPartialExpectations expectations(std::uint64_t max_total = 64u << 20) {
  return SnapshotPartialExpectations{"c", kSelf, max_total};
}

SnapshotPartialHeader header_of(const raft::Message& message) {
  SnapshotPartialHeader header;
  header.cluster_id = "c";
  header.node_id = kSelf;
  header.message = message;
  header.message.snapshot->data = raft::Payload();
  const std::string_view data = message.snapshot->data.view();
  header.place = SnapshotChunkPlace{0, data.size(), util::crc32c::value(data)};
  return header;
}

// A header and records of `lengths` bytes of `data`, from offset 0; the file's size before each
// record in *record_starts.
std::string file_of(const SnapshotPartialHeader& header, std::string_view data,
                    const std::vector<std::size_t>& lengths,
                    std::vector<std::size_t>* record_starts = nullptr) {
  std::string file = encode_snapshot_partial_header(header);
  const std::uint32_t seed = snapshot_partial_header_crc(file);
  std::size_t offset = 0;
  for (const std::size_t length : lengths) {
    if (record_starts != nullptr) record_starts->push_back(file.size());
    file += encode_snapshot_partial_record(seed, offset, data.substr(offset, length));
    offset += length;
  }
  return file;
}

SnapshotChunk chunk_at(const raft::Message& message, std::uint64_t offset, std::size_t length) {
  const std::string_view data = message.snapshot->data.view();
  SnapshotChunk chunk;
  chunk.message = message;
  chunk.message.snapshot->data = raft::Payload();
  // As this build's lane sends it: with the data's digest (of data that is not framed, its CRC).
  const std::uint32_t crc = util::crc32c::value(data);
  chunk.place = SnapshotChunkPlace{offset, data.size(), crc, crc};
  chunk.data = std::string(data.substr(offset, length));
  return chunk;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string bytes(static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(SnapshotPartialFormat, AHeaderAndItsRecordsReadBackExactly) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(10000, 1));
  const SnapshotPartialHeader header = header_of(message);
  const std::string file = file_of(header, message.snapshot->data.view(), {4000, 1, 2999});
  std::string problem;
  const auto decoded = decode_snapshot_partial(file, expectations(), &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(decoded->header, header);  // sender, terms, commit, index, configuration, total, CRC
  EXPECT_EQ(decoded->data, message.snapshot->data.view().substr(0, 7000));
  EXPECT_EQ(decoded->valid_bytes, file.size());
  EXPECT_EQ(decoded->tail_problem, "");
}

// Version 2 keeps the data's digest (the partial's identity, for its receipt after a restart);
// a version-1 file, from before digests, is still read, its partial without a digest.
TEST(SnapshotPartialFormat, VersionTwoKeepsTheDigestAndAVersionOneFileReadsWithoutOne) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(10000, 1));
  const std::string_view data = message.snapshot->data.view();
  SnapshotPartialHeader header = header_of(message);
  header.place.data_digest = 0x1234abcdU;
  std::string problem;
  std::optional<DecodedSnapshotPartial> decoded =
      decode_snapshot_partial(file_of(header, data, {4000}), expectations(), &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(decoded->header, header);
  EXPECT_EQ(decoded->header.place.data_digest, 0x1234abcdU);

  // Version 1: the body without the digest's 5 bytes, its own CRC; records seeded with it.
  header.place.data_digest.reset();
  const std::string v2 = encode_snapshot_partial_header(header);
  const std::size_t body_bytes = v2.size() - 12 - 4;
  std::string v1 = v2.substr(0, 12 + body_bytes - 5);
  v1[4] = 1;  // the version, little-endian
  const auto body_v1 = static_cast<std::uint32_t>(body_bytes - 5);
  for (int i = 0; i < 4; ++i) v1[8 + i] = static_cast<char>((body_v1 >> (8 * i)) & 0xff);
  const std::uint32_t crc = util::crc32c::value(v1);
  for (int i = 0; i < 4; ++i) v1.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  const std::string file = v1 + encode_snapshot_partial_record(crc, 0, data.substr(0, 4000));
  decoded = decode_snapshot_partial(file, expectations(), &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(decoded->header, header);
  EXPECT_FALSE(decoded->header.place.data_digest.has_value());
  EXPECT_EQ(decoded->data, data.substr(0, 4000));

  // A digest flag other than 0 or 1, and a version from the future: dropped.
  std::string bad = v2.substr(0, v2.size() - 4);
  bad[bad.size() - 5] = 2;
  const std::uint32_t bad_crc = util::crc32c::value(bad);
  for (int i = 0; i < 4; ++i) bad.push_back(static_cast<char>((bad_crc >> (8 * i)) & 0xff));
  EXPECT_FALSE(decode_snapshot_partial(bad, expectations(), &problem).has_value());
  EXPECT_NE(problem.find("do not decode"), std::string::npos) << problem;
  std::string future = v2;
  future[4] = 3;
  EXPECT_FALSE(decode_snapshot_partial(future, expectations(), &problem).has_value());
  EXPECT_NE(problem.find("version 3"), std::string::npos) << problem;
}

TEST(SnapshotPartialFormat, ATornTailEndsTheDataAtTheLastWholeRecord) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 2));
  std::vector<std::size_t> starts;
  const std::string file =
      file_of(header_of(message), message.snapshot->data.view(), {1000, 1000, 300}, &starts);
  const std::size_t last = starts.back();
  for (std::size_t cut = last; cut < file.size(); ++cut) {
    std::string problem;
    const auto decoded = decode_snapshot_partial(file.substr(0, cut), expectations(), &problem);
    ASSERT_TRUE(decoded.has_value()) << "cut at " << cut << ": " << problem;
    EXPECT_EQ(decoded->data, message.snapshot->data.view().substr(0, 2000)) << cut;
    EXPECT_EQ(decoded->valid_bytes, last) << cut;
    EXPECT_EQ(decoded->tail_problem.empty(), cut == last) << cut << ": " << decoded->tail_problem;
  }
}

TEST(SnapshotPartialFormat, AFlippedByteInARecordEndsTheDataBeforeIt) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 3));
  std::vector<std::size_t> starts;
  const std::string file =
      file_of(header_of(message), message.snapshot->data.view(), {1000, 700, 300}, &starts);
  for (std::size_t at = starts[1]; at < starts[2]; ++at) {
    std::string damaged = file;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x20);
    std::string problem;
    const auto decoded = decode_snapshot_partial(damaged, expectations(), &problem);
    ASSERT_TRUE(decoded.has_value()) << at << ": " << problem;
    EXPECT_EQ(decoded->data, message.snapshot->data.view().substr(0, 1000)) << at;
    EXPECT_EQ(decoded->valid_bytes, starts[1]) << at;
    EXPECT_NE(decoded->tail_problem, "") << at;
  }
}

TEST(SnapshotPartialFormat, AFlippedByteInTheHeaderDropsTheFile) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 4));
  std::vector<std::size_t> starts;
  const std::string file =
      file_of(header_of(message), message.snapshot->data.view(), {1000}, &starts);
  for (std::size_t at = 0; at < starts[0]; ++at) {
    std::string damaged = file;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
    std::string problem;
    EXPECT_FALSE(decode_snapshot_partial(damaged, expectations(), &problem).has_value()) << at;
    EXPECT_NE(problem, "") << at;
  }
}

TEST(SnapshotPartialFormat, ARecordOutOfOrderOrOverlappingEndsTheData) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 5));
  const std::string_view data = message.snapshot->data.view();
  const std::string header = encode_snapshot_partial_header(header_of(message));
  const std::uint32_t seed = snapshot_partial_header_crc(header);
  const std::string head = header + encode_snapshot_partial_record(seed, 0, data.substr(0, 1000));
  const std::vector<std::string> wrong_second = {
      encode_snapshot_partial_record(seed, 1500, data.substr(1500, 500)),  // a gap
      encode_snapshot_partial_record(seed, 500, data.substr(500, 1000)),   // overlapping
      encode_snapshot_partial_record(seed, 0, data.substr(0, 1000)),       // the first again
  };
  for (const std::string& second : wrong_second) {
    std::string problem;
    const auto decoded = decode_snapshot_partial(
        head + second + encode_snapshot_partial_record(seed, 1000, data.substr(1000, 100)),
        expectations(), &problem);
    ASSERT_TRUE(decoded.has_value()) << problem;
    EXPECT_EQ(decoded->data, data.substr(0, 1000));
    EXPECT_EQ(decoded->valid_bytes, head.size());
    EXPECT_NE(decoded->tail_problem.find("out of order"), std::string::npos)
        << decoded->tail_problem;
  }
}

TEST(SnapshotPartialFormat, ARecordPastTheTotalEndsTheDataAndAWholeOneDropsTheFile) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(3000, 6));
  const std::string_view data = message.snapshot->data.view();
  const std::string header = encode_snapshot_partial_header(header_of(message));
  const std::uint32_t seed = snapshot_partial_header_crc(header);
  const std::string head = header + encode_snapshot_partial_record(seed, 0, data.substr(0, 2000));
  std::string past_the_end(1500, 'x');
  std::string problem;
  auto decoded = decode_snapshot_partial(
      head + encode_snapshot_partial_record(seed, 2000, past_the_end), expectations(), &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(decoded->data, data.substr(0, 2000));
  EXPECT_NE(decoded->tail_problem.find("past the total"), std::string::npos);
  // Every byte of the data: a completed partial is never kept, so such a file is not ours.
  EXPECT_FALSE(
      decode_snapshot_partial(head + encode_snapshot_partial_record(seed, 2000, data.substr(2000)),
                              expectations(), &problem)
          .has_value());
  EXPECT_NE(problem.find("whole data"), std::string::npos) << problem;
}

TEST(SnapshotPartialFormat, ATotalAboveTheBoundAnotherClusterOrNodeOrAShortFileIsDropped) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 7));
  const SnapshotPartialHeader header = header_of(message);
  const std::string file = file_of(header, message.snapshot->data.view(), {1000});
  std::string problem;
  EXPECT_FALSE(decode_snapshot_partial(file, expectations(4999), &problem).has_value());
  EXPECT_NE(problem.find("total of 5000"), std::string::npos) << problem;
  EXPECT_FALSE(
      decode_snapshot_partial(file, SnapshotPartialExpectations{"other", kSelf, 1 << 20}, &problem)
          .has_value());
  EXPECT_NE(problem.find("cluster"), std::string::npos) << problem;
  EXPECT_FALSE(decode_snapshot_partial(file, SnapshotPartialExpectations{"c", 3, 1 << 20}, &problem)
                   .has_value());
  EXPECT_NE(problem.find("node 2"), std::string::npos) << problem;
  const std::size_t header_bytes = encode_snapshot_partial_header(header).size();
  for (std::size_t size = 0; size < header_bytes; ++size) {
    EXPECT_FALSE(
        decode_snapshot_partial(file.substr(0, size), expectations(), &problem).has_value())
        << size;
  }
  // Out-of-bounds fields under a valid CRC (a bug's or a forger's): a sender that is this node.
  SnapshotPartialHeader from_self = header;
  from_self.message.from = kSelf;
  const std::string from_self_header = encode_snapshot_partial_header(from_self);
  EXPECT_FALSE(decode_snapshot_partial(
                   from_self_header + encode_snapshot_partial_record(
                                          snapshot_partial_header_crc(from_self_header), 0, "abc"),
                   expectations(), &problem)
                   .has_value());
  EXPECT_NE(problem.find("sender"), std::string::npos) << problem;
}

// A power cut after a new file replaced an older one can leave the older file's records behind the
// new header: each passes its own CRC-32C, but not as a record of this file.
TEST(SnapshotPartialFormat, ARecordOfAnotherFileDoesNotPassAsThisFilesRecord) {
  const raft::Message older = snapshot_message(1, 5, 700, snapshot_data(5000, 16));
  const raft::Message newer = snapshot_message(1, 5, 800, snapshot_data(5000, 17));
  std::vector<std::size_t> starts;
  const std::string older_file =
      file_of(header_of(older), older.snapshot->data.view(), {1000, 1000}, &starts);
  const std::string newer_file = file_of(header_of(newer), newer.snapshot->data.view(), {1000});
  std::string problem;
  const auto decoded =
      decode_snapshot_partial(newer_file + older_file.substr(starts[1]), expectations(), &problem);
  ASSERT_TRUE(decoded.has_value()) << problem;
  EXPECT_EQ(decoded->data, newer.snapshot->data.view().substr(0, 1000));
  EXPECT_EQ(decoded->valid_bytes, newer_file.size());
  EXPECT_NE(decoded->tail_problem.find("fails its CRC-32C"), std::string::npos)
      << decoded->tail_problem;
}

// The file follows a reassembler; a second reassembler built on it continues the transfer.
class SnapshotPartialFileTest : public ::testing::Test {
 protected:
  std::string path() const { return dir_.path() + "/SNAPSHOT.partial"; }
  bool exists() const { return std::filesystem::exists(path()); }

  // Adds a chunk and lets the file follow; the whole message once complete.
  std::optional<raft::Message> add(SnapshotReassembler& reassembler, SnapshotPartialFile& file,
                                   SnapshotChunk chunk, Clock::time_point now = kT0) {
    const raft::NodeId sender = chunk.message.from;
    std::string problem;
    std::optional<raft::Message> whole = reassembler.add(std::move(chunk), now, &problem);
    EXPECT_EQ(file.follow(reassembler, sender), "");
    return whole;
  }

  // A node kept the first `bytes` of `message` in the file (chunks of 100,000 bytes), then stopped.
  void write_first_chunks(const raft::Message& message, std::uint64_t bytes) {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    for (std::uint64_t offset = 0; offset < bytes; offset += 100000) {
      EXPECT_FALSE(add(reassembler, file, chunk_at(message, offset, 100000)).has_value());
    }
  }

  TempDir dir_;
};

TEST_F(SnapshotPartialFileTest, ANewReassemblerOnTheFileResumesWhereTheDataStopped) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(10 * 100000 + 7, 8));
  const std::uint64_t total = message.snapshot->data.size();
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    EXPECT_EQ(file.load(reassembler, 0, kT0), "");  // no file yet
    for (std::uint64_t offset = 0; offset < 400000; offset += 100000) {
      EXPECT_FALSE(add(reassembler, file, chunk_at(message, offset, 100000)).has_value());
    }
    EXPECT_TRUE(exists());
  }  // the process ends: the file stays
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  const std::string loaded = file.load(reassembler, 699, kT0 + 1s);
  EXPECT_NE(loaded.find("restored snapshot 700/t5 from node 1: 400000 of"), std::string::npos)
      << loaded;
  const std::optional<SnapshotReceipt> receipt = reassembler.receipt();
  ASSERT_TRUE(receipt.has_value());
  EXPECT_EQ(receipt->received_bytes, 400000U);
  EXPECT_EQ(receipt->snapshot,
            (SnapshotIdentity{700, 5, total, util::crc32c::value(message.snapshot->data.view()),
                              util::crc32c::value(message.snapshot->data.view())}));
  EXPECT_EQ(reassembler.status().counters.partials_restored, 1U);
  EXPECT_EQ(reassembler.status().counters.bytes_restored, 400000U);
  // The sender resumes at the receipt: the rest completes the same data.
  std::optional<raft::Message> whole;
  for (std::uint64_t offset = 400000; offset < total; offset += 100000) {
    whole = add(reassembler, file, chunk_at(message, offset, 100000), kT0 + 2s);
  }
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(*whole, message);
  EXPECT_FALSE(exists()) << "the file outlived its completed partial";
}

// A restored partial's idle clock starts when a leader is heard (start_idle_clocks), not at the
// restore: a node that takes longer than the idle timeout to start keeps it for its leader's retry.
TEST_F(SnapshotPartialFileTest, ARestoredPartialIdlesOnlyOnceALeaderIsHeard) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(10 * 100000 + 7, 8));
  write_first_chunks(message, 400000);
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  ASSERT_NE(file.load(reassembler, 699, kT0), "");
  ASSERT_EQ(reassembler.partial_count(), 1U);
  // An hour of start-up: still there, and its receipt does not lapse either.
  reassembler.expire(kT0 + 1h);
  ASSERT_EQ(reassembler.partial_count(), 1U) << "it idled out before any leader was heard";
  Clock::time_point valid_until{};
  ASSERT_TRUE(reassembler.receipt(&valid_until).has_value());
  EXPECT_EQ(valid_until, Clock::time_point::max());
  EXPECT_EQ(reassembler.status().counters.partials_expired, 0U);
  // A leader is heard: the ordinary idle timeout runs from then.
  EXPECT_TRUE(reassembler.start_idle_clocks(kT0 + 1h));
  EXPECT_FALSE(reassembler.start_idle_clocks(kT0 + 1h + 1s)) << "it started once";
  ASSERT_TRUE(reassembler.receipt(&valid_until).has_value());
  EXPECT_EQ(valid_until, kT0 + 1h + kSnapshotPartialIdleTimeout);
  reassembler.expire(kT0 + 1h + kSnapshotPartialIdleTimeout);
  EXPECT_EQ(reassembler.partial_count(), 1U);
  reassembler.expire(kT0 + 1h + kSnapshotPartialIdleTimeout + 1s);
  EXPECT_EQ(reassembler.partial_count(), 0U);
  EXPECT_EQ(reassembler.status().counters.partials_expired, 1U);
}

// A chunk of the restored partial starts its clock too (a leader that resumes it at once).
TEST_F(SnapshotPartialFileTest, AChunkOfARestoredPartialStartsItsIdleClock) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(10 * 100000 + 7, 8));
  write_first_chunks(message, 400000);
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  ASSERT_NE(file.load(reassembler, 699, kT0), "");
  EXPECT_FALSE(add(reassembler, file, chunk_at(message, 400000, 100000), kT0 + 1h).has_value());
  reassembler.expire(kT0 + 1h + kSnapshotPartialIdleTimeout + 1s);
  EXPECT_EQ(reassembler.partial_count(), 0U) << "the chunk did not start its idle clock";
  EXPECT_FALSE(reassembler.start_idle_clocks(kT0 + 2h)) << "nothing restored is waiting";
}

TEST_F(SnapshotPartialFileTest, ATornTailIsCutOffAndAppendsContinueAfterTheLastGoodRecord) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(500000, 9));
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    for (std::uint64_t offset = 0; offset < 300000; offset += 100000) {
      add(reassembler, file, chunk_at(message, offset, 100000));
    }
  }
  const std::string intact = read_file(path());
  write_file(path(), intact.substr(0, intact.size() - 10));  // the last record torn
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    const std::string loaded = file.load(reassembler, 0, kT0);
    EXPECT_NE(loaded.find("200000 of 500000 bytes (the record at data offset 200000 is torn"),
              std::string::npos)
        << loaded;
    EXPECT_EQ(read_file(path()).size(), intact.size() - 100000 - kSnapshotPartialRecordHeaderBytes);
    add(reassembler, file, chunk_at(message, 200000, 100000));
  }
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  file.load(reassembler, 0, kT0);
  ASSERT_TRUE(reassembler.receipt().has_value());
  EXPECT_EQ(reassembler.receipt()->received_bytes, 300000U);
  EXPECT_EQ(read_file(path()), intact);  // the same bytes as before the tear
}

TEST_F(SnapshotPartialFileTest, GarbageOrAnotherClustersFileIsDroppedAndCounted) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 10));
  SnapshotPartialHeader foreign = header_of(message);
  foreign.cluster_id = "another-cluster";
  const std::vector<std::string> planted = {
      "", "garbage that is no partial snapshot",
      file_of(foreign, message.snapshot->data.view(), {1000}),
      std::string(max_snapshot_partial_file_bytes(1 << 20) + 1, 'z')};
  for (const std::string& bytes : planted) {
    write_file(path(), bytes);
    SnapshotReassembler reassembler(1 << 20);
    SnapshotPartialFile file(path(), expectations(1 << 20));
    const std::string loaded = file.load(reassembler, 0, kT0);
    EXPECT_NE(loaded.find("dropped"), std::string::npos) << loaded;
    EXPECT_EQ(file.files_dropped(), 1U);
    EXPECT_FALSE(exists());
    EXPECT_EQ(reassembler.partial_count(), 0U);
    EXPECT_FALSE(reassembler.receipt().has_value());
  }
}

TEST_F(SnapshotPartialFileTest, AFileNamingAnInstalledSnapshotIsRemovedAtOpen) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 11));
  write_file(path(), file_of(header_of(message), message.snapshot->data.view(), {1000}));
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  const std::string loaded = file.load(reassembler, 700, kT0);  // the log starts after 700
  EXPECT_NE(loaded.find("at or below the log's start or commit 700"), std::string::npos) << loaded;
  EXPECT_FALSE(exists());
  EXPECT_EQ(reassembler.partial_count(), 0U);
  EXPECT_EQ(file.files_dropped(), 0U);  // not damage: an install happened
}

TEST_F(SnapshotPartialFileTest, TheFileFollowsANewSnapshotAndIsRemovedWhenItsPartialIsDropped) {
  const raft::Message first = snapshot_message(1, 5, 700, snapshot_data(500000, 12));
  const raft::Message second = snapshot_message(1, 5, 800, snapshot_data(400000, 13));
  SnapshotReassembler reassembler(kMaxSnapshotBytes, 30s);
  SnapshotPartialFile file(path(), expectations());
  add(reassembler, file, chunk_at(first, 0, 100000));
  add(reassembler, file, chunk_at(second, 0, 100000));  // another snapshot replaces it
  {
    SnapshotReassembler reread;
    SnapshotPartialFile again(path(), expectations());
    again.load(reread, 0, kT0);
    ASSERT_TRUE(reread.receipt().has_value());
    EXPECT_EQ(reread.receipt()->snapshot.index, 800U);
  }
  // A higher term's different snapshot from a new leader drops it: the file follows the newest.
  raft::Message third = snapshot_message(3, 6, 900, snapshot_data(300000, 14));
  add(reassembler, file, chunk_at(third, 0, 100000));
  {
    SnapshotReassembler reread;
    SnapshotPartialFile again(path(), expectations());
    again.load(reread, 0, kT0);
    ASSERT_EQ(reread.status().partials.size(), 1U);
    EXPECT_EQ(reread.status().partials[0].from, 3U);
    EXPECT_EQ(reread.status().partials[0].index, 900U);
  }
  // Idle past the timeout: expired, and the file with it.
  reassembler.expire(kT0 + 31s);
  EXPECT_EQ(file.follow(reassembler), "");
  EXPECT_FALSE(exists());
}

TEST_F(SnapshotPartialFileTest, SmallChunksAreWrittenTogether) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(300000, 15));
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  add(reassembler, file, chunk_at(message, 0, 1000));  // starts the file
  const std::size_t started = read_file(path()).size();
  for (std::uint64_t offset = 1000; offset < 66000; offset += 1000) {
    add(reassembler, file, chunk_at(message, offset, 1000));
  }
  EXPECT_EQ(read_file(path()).size(), started);  // 65,000 bytes wait for more
  add(reassembler, file, chunk_at(message, 66000, 1000));
  // 66,000 bytes waited (at least 64 KiB): written as one record.
  EXPECT_EQ(read_file(path()).size(), started + kSnapshotPartialRecordHeaderBytes + 66000);
}

TEST_F(SnapshotPartialFileTest, ADiskShortOfRoomOrPastItsWatermarkKeepsThePartialInMemoryOnly) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(500000, 18));
  SnapshotPartialDisk disk{std::uint64_t{1} << 30, std::uint64_t{10} << 30, 0.95};
  const SnapshotPartialDiskProbe probe = [&disk] { return std::optional(disk); };
  SnapshotPartialExpectations watermark = expectations();
  watermark.max_disk_used_ratio = 0.90;
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), watermark, probe);
    std::string problem;
    reassembler.add(chunk_at(message, 0, 100000), kT0, &problem);
    EXPECT_NE(file.follow(reassembler, 1).find("high watermark"), std::string::npos);
    EXPECT_FALSE(exists());
    EXPECT_EQ(file.write_failures(), 1U);
    // The transfer goes on in memory; the file is not tried again for this partial.
    disk.used_ratio = 0.5;
    add(reassembler, file, chunk_at(message, 100000, 100000));
    EXPECT_FALSE(exists());
    ASSERT_TRUE(reassembler.receipt().has_value());
    EXPECT_EQ(reassembler.receipt()->received_bytes, 200000U);
  }
  {
    // Without a watermark: the reserve beyond the partial's whole total.
    disk.free_bytes = kSnapshotPartialDiskReserveBytes + 400000;  // the total is 500,000
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations(), probe);
    std::string problem;
    reassembler.add(chunk_at(message, 0, 100000), kT0, &problem);
    EXPECT_NE(file.follow(reassembler, 1).find("bytes free"), std::string::npos);
    EXPECT_FALSE(exists());
    EXPECT_EQ(file.write_failures(), 1U);
  }
  {
    // A file found on a disk past the watermark at start is dropped: the room is the store's.
    disk.free_bytes = std::uint64_t{1} << 30;
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations(), probe);
    add(reassembler, file, chunk_at(message, 0, 100000));
    ASSERT_TRUE(exists());
  }
  disk.used_ratio = 0.93;
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), watermark, probe);
  EXPECT_NE(file.load(reassembler, 0, kT0).find("past the high watermark"), std::string::npos);
  EXPECT_FALSE(exists());
  EXPECT_EQ(file.files_dropped(), 1U);
  EXPECT_EQ(reassembler.partial_count(), 0U);
}

TEST_F(SnapshotPartialFileTest, AFifoOrALinkInItsPlaceIsDroppedWithoutBlockingOrFollowing) {
  ASSERT_EQ(::mkfifo(path().c_str(), 0644), 0);
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    const std::string loaded = file.load(reassembler, 0, kT0);  // does not block on the FIFO
    EXPECT_NE(loaded.find("not a regular file"), std::string::npos) << loaded;
    EXPECT_EQ(file.files_dropped(), 1U);
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path())));
  }
  // A link to a valid file elsewhere: neither read nor, later, truncated.
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 19));
  const std::string target = dir_.path() + "/elsewhere";
  const std::string bytes = file_of(header_of(message), message.snapshot->data.view(), {1000});
  write_file(target, bytes);
  std::filesystem::create_symlink(target, path());
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  EXPECT_NE(file.load(reassembler, 0, kT0).find("dropped"), std::string::npos);
  EXPECT_EQ(reassembler.partial_count(), 0U);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path())));
  std::filesystem::create_symlink(target, path());  // planted again before the first chunk
  add(reassembler, file, chunk_at(message, 0, 1000));
  EXPECT_EQ(read_file(target), bytes);
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(path())));
}

// A directory in the file's place (not raftlogd's: it writes files only). An empty one is removed
// and the next transfer is kept on disk again; one with contents is left for the operator, and the
// log lines say so, instead of "dropped" followed by "cannot create it: File exists" on every
// transfer.
TEST_F(SnapshotPartialFileTest, ADirectoryInItsPlaceIsRemovedWhenEmptyAndNamedWhenNot) {
  const raft::Message message = snapshot_message(1, 5, 700, snapshot_data(5000, 21));
  std::filesystem::create_directory(path());
  {
    SnapshotReassembler reassembler;
    SnapshotPartialFile file(path(), expectations());
    const std::string loaded = file.load(reassembler, 0, kT0);
    EXPECT_NE(loaded.find("dropped"), std::string::npos) << loaded;
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path())));
    add(reassembler, file, chunk_at(message, 0, 1000));
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(path())));
  }
  std::filesystem::remove(path());
  std::filesystem::create_directory(path());
  write_file(path() + "/operator-notes", "kept");
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path(), expectations());
  const std::string loaded = file.load(reassembler, 0, kT0);
  EXPECT_NE(loaded.find("remove it by hand"), std::string::npos) << loaded;
  EXPECT_EQ(loaded.find("dropped"), std::string::npos) << loaded;
  std::string problem;
  reassembler.add(chunk_at(message, 0, 1000), kT0, &problem);
  const std::string followed = file.follow(reassembler, 1);
  EXPECT_NE(followed.find("remove it by hand"), std::string::npos) << followed;
  EXPECT_EQ(file.write_failures(), 1U);
  EXPECT_FALSE(file.holds_file());
  EXPECT_EQ(read_file(path() + "/operator-notes"), "kept");
}

}  // namespace
}  // namespace raftlog::server

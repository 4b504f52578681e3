// Real crash test: a child process (store_crash_writer) appends with sync flush and reports every
// acknowledged (durable) index with its payload hash through a pipe; this test SIGKILLs it at a random
// moment, reopens the log and checks that every acknowledged entry is present and intact, that the
// indexes are contiguous, that the log accepts appends, and that the offline verifier agrees.
// Odd rounds append through the log's append group (index 0 from 8 threads), even rounds assign
// indexes themselves. Several seeds x several rounds on one directory, so later rounds also recover
// logs that earlier crashes and recoveries produced. Bounded: a round writes at most kMaxKillDelayMillis after its first ack.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "crash_protocol.h"
#include "store/commit_log.h"
#include "test_dir.h"

namespace raftlog::crash_test {
namespace {

using store::CommitLog;

constexpr int kRoundsPerSeed = 5;
constexpr int kMaxKillDelayMillis = 400;  // after the first acknowledgement
constexpr int kMaxEarlyKillMillis =
    60;  // after the start: lands in process start-up, open() or recovery
constexpr std::chrono::milliseconds kFirstAckTimeout{10000};
constexpr std::uint64_t kMaxPayloadBytes = 2048;
constexpr std::uint64_t kSegmentSizeBytes = 256 << 10;  // small: rounds cross segment roll-overs
constexpr std::size_t kReadBatchEntries = 512;

struct Expected {
  std::uint64_t term = 0;
  std::uint64_t hash = 0;
  std::uint32_t size = 0;
};

struct RoundOutcome {
  std::size_t acks = 0;
};

store::Options log_options() {
  store::Options options;
  options.flush_mode = store::FlushMode::kSync;
  options.segment_size_bytes = kSegmentSizeBytes;
  options.max_entry_size_bytes = kMaxPayloadBytes;
  return options;
}

// When the parent kills the writer: `delay` after the writer's first acknowledgement (most rounds: a
// kill in the middle of steady appending), or `delay` after its start (kills during open/recovery).
struct KillPlan {
  bool after_first_ack = true;
  bool grouped = false;  // the writer appends through the log's append group (index 0, 8 threads)
  std::chrono::milliseconds delay{0};
};

// Starts the writer with its report pipe on fd 3, kills it as `plan` says, and collects every
// acknowledgement it managed to send.
RoundOutcome run_writer_round(const std::string& dir, std::uint64_t seed, std::uint64_t term,
                              const KillPlan& plan, std::map<std::uint64_t, Expected>& expected) {
  int report_pipe[2];
  EXPECT_EQ(::pipe2(report_pipe, O_CLOEXEC), 0);
  std::vector<std::string> args = {STORE_CRASH_WRITER_PATH,
                                   "--dir",
                                   dir,
                                   "--seed",
                                   std::to_string(seed),
                                   "--term",
                                   std::to_string(term),
                                   "--writers",
                                   plan.grouped ? "8" : "4",
                                   "--max-payload-bytes",
                                   std::to_string(kMaxPayloadBytes),
                                   "--segment-bytes",
                                   std::to_string(kSegmentSizeBytes),
                                   "--report-fd",
                                   "3"};
  if (plan.grouped) args.push_back("--grouped");
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::dup2(report_pipe[1], 3);  // dup2 clears O_CLOEXEC on the new descriptor
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(report_pipe[1]);
  EXPECT_GT(child, 0);

  RoundOutcome outcome;
  AckRecord record;
  std::size_t filled = 0;
  auto consume = [&](bool until_eof, std::chrono::steady_clock::time_point deadline,
                     bool stop_at_first_ack) {
    while (!(stop_at_first_ack && outcome.acks > 0)) {
      const auto now = std::chrono::steady_clock::now();
      if (!until_eof && now >= deadline) return;
      const int wait_ms =
          until_eof
              ? 5000
              : static_cast<int>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) +
                    1;
      pollfd poll_fd{report_pipe[0], POLLIN, 0};
      const int ready = ::poll(&poll_fd, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (until_eof) ADD_FAILURE() << "report pipe not closed 5 s after the kill";
        if (until_eof) return;
        continue;
      }
      const ssize_t n = ::read(report_pipe[0], reinterpret_cast<char*>(&record) + filled,
                               sizeof(record) - filled);
      if (n <= 0) return;  // EOF: the child is gone
      filled += static_cast<std::size_t>(n);
      if (filled < sizeof(record)) continue;
      filled = 0;
      ASSERT_EQ(record.magic, kAckMagic) << "garbled report stream";
      const Expected entry{record.term, record.payload_hash, record.payload_size};
      const auto [it, inserted] = expected.emplace(record.index, entry);
      // An index acknowledged twice means a durable entry was lost and its index reused.
      ASSERT_TRUE(inserted) << "index " << record.index
                            << " acknowledged twice (an earlier durable entry was lost)";
      ++outcome.acks;
    }
  };
  if (plan.after_first_ack) {
    consume(false, std::chrono::steady_clock::now() + kFirstAckTimeout, /*stop_at_first_ack=*/true);
    EXPECT_GT(outcome.acks, 0U) << "the writer acknowledged nothing within "
                                << kFirstAckTimeout.count() << " ms";
  }
  consume(false, std::chrono::steady_clock::now() + plan.delay, false);
  ::kill(child, SIGKILL);
  consume(true, {},
          false);  // acknowledgements already in the pipe count: the child made them durable
  ::close(report_pipe[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer ended on its own (status " << status << "); see its stderr above";
  return outcome;
}

// Reopens the crashed log and checks everything the writer acknowledged, then appends once more.
void check_recovered_log(const std::string& dir, std::uint64_t seed, std::uint64_t term,
                         const RoundOutcome& round, std::map<std::uint64_t, Expected>& expected) {
  auto opened = CommitLog::open(dir, log_options());
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  auto log = std::move(opened).value();
  if (round.acks > 0) {
    EXPECT_EQ(log->recovery_report().mode, store::RecoveryMode::kAbnormal)
        << log->recovery_report().to_string();
  }
  if (!expected.empty()) {
    ASSERT_GE(log->last_index(), expected.rbegin()->first)
        << "acknowledged entries lost at the tail";
    ASSERT_LE(log->first_index(), expected.begin()->first);
  }

  // Walk the whole log: contiguous indexes, non-decreasing terms, acknowledged entries intact.
  std::uint64_t next = log->first_index();
  std::uint64_t previous_term = 0;
  std::size_t verified = 0;
  for (std::size_t guard = 0; next <= log->last_index() && guard < 1'000'000; ++guard) {
    auto batch = log->read(next, kReadBatchEntries, 8 << 20);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    ASSERT_FALSE(batch->entries.empty());
    for (const store::EntryView& entry : batch->entries) {
      ASSERT_EQ(entry.meta.index, next) << "index gap";
      ASSERT_GE(entry.meta.term, previous_term);
      previous_term = entry.meta.term;
      if (auto it = expected.find(next); it != expected.end()) {
        ASSERT_EQ(entry.meta.term, it->second.term) << "index " << next;
        ASSERT_EQ(entry.payload.size(), it->second.size) << "index " << next;
        ASSERT_EQ(fnv1a64(entry.payload), it->second.hash)
            << "index " << next << " payload changed";
        ++verified;
      } else {
        // Not acknowledged (in flight at the kill) but recovered: must still be a whole, valid entry.
        // Both writers derive the payload from the sequence number (equal to the index when the
        // writer assigns indexes).
        ASSERT_EQ(entry.payload,
                  make_payload(entry.meta.client_id, entry.meta.sequence, kMaxPayloadBytes))
            << "index " << next;
      }
      ++next;
    }
  }
  EXPECT_EQ(verified, expected.size());

  // The log accepts further appends at last_index() + 1.
  const std::uint64_t index = log->last_index() + 1;
  const std::string payload = make_payload(seed, index, kMaxPayloadBytes);
  const store::EntryToAppend entry{
      store::EntryMeta{index, term, store::EntryType::kNormal, 0, seed, index}, payload};
  auto appended = log->append(std::span<const store::EntryToAppend>(&entry, 1));
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  EXPECT_GE(log->flushed_index(), index);
  expected.emplace(index,
                   Expected{term, fnv1a64(payload), static_cast<std::uint32_t>(payload.size())});
  const std::uint64_t first = log->first_index();
  ASSERT_TRUE(log->close().ok());

  // The offline verifier (raftlogctl log verify) agrees with what recovery left behind.
  auto report = store::verify_log_directory(dir);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->ok) << report->bad_file << " offset " << report->bad_offset << ": "
                          << report->problem;
  EXPECT_EQ(report->first_index, first);
  EXPECT_EQ(report->last_index, index);
  EXPECT_EQ(report->entries, index - first + 1);
  EXPECT_FALSE(report->abort_marker_present);
}

class StoreCrashTest : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(StoreCrashTest, AcknowledgedEntriesSurviveKillNine) {
  const std::uint64_t seed = GetParam();
  const TestDir dir("store_crash");
  std::mt19937_64 random(seed);
  std::map<std::uint64_t, Expected> expected;
  std::size_t total_acks = 0;
  int rounds_with_acks = 0;
  const int early_kill_round = std::uniform_int_distribution<int>(0, kRoundsPerSeed - 1)(random);
  for (int round = 0; round < kRoundsPerSeed; ++round) {
    // One early kill per seed (in a random round), the others mid-appending.
    KillPlan plan;
    plan.after_first_ack = round != early_kill_round;
    plan.grouped = round % 2 == 1;
    plan.delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(
        0, plan.after_first_ack ? kMaxKillDelayMillis : kMaxEarlyKillMillis)(random));
    const std::uint64_t term = static_cast<std::uint64_t>(round) + 1;
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round) + " kill " +
                 std::to_string(plan.delay.count()) + " ms after " +
                 (plan.after_first_ack ? "the first acknowledgement" : "the start") +
                 (plan.grouped ? ", grouped appends" : ""));
    const RoundOutcome outcome = run_writer_round(dir.path(), seed, term, plan, expected);
    if (HasFatalFailure()) return;
    total_acks += outcome.acks;
    rounds_with_acks += outcome.acks > 0 ? 1 : 0;
    check_recovered_log(dir.path(), seed, term, outcome, expected);
    if (HasFatalFailure()) return;
  }
  std::printf("seed %llu: %zu acknowledged entries in %d of %d rounds, log ends at index %llu\n",
              static_cast<unsigned long long>(seed), total_acks, rounds_with_acks, kRoundsPerSeed,
              static_cast<unsigned long long>(expected.empty() ? 0 : expected.rbegin()->first));
  // Guards against a test that passes because the writer never got to append anything.
  EXPECT_GT(total_acks, 0U) << "no round acknowledged any entry";
}

INSTANTIATE_TEST_SUITE_P(Seeds, StoreCrashTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace raftlog::crash_test

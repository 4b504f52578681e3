// Merge safety of a continued snapshot transfer (docs/design.md, "Snapshot transfer";
// src/replica/snapshot_frames.h): a follower that kept leader A's blocks of client ids <= X and took
// leader B's clients > X and B's trailer builds a dedup table that answers every retry of a
// committed append as A (ids <= X) or B (ids > X) would have: never "unknown" (which appends the
// retry again: a duplicate) where that leader would find it or refuse it. Randomized logs with
// retries re-appended, evictions, a restart's rebuild window and different dedup flags on the two
// leaders; two planted variants (B's continuation overlapping X, B's forgotten_below dropped) must
// be caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string_view>
#include <string>
#include <vector>

#include "replica/dedup_table.h"
#include "replica/snapshot_frames.h"

namespace raftlog::replica {
namespace {

struct LoggedAppend {
  std::uint64_t client = 0;
  std::uint64_t sequence = 0;
  std::uint64_t first = 0;
  std::vector<std::string> payloads;
};

// A committed log of appends by `clients` clients: mostly new sequences, some retries of an earlier
// sequence re-appended whole (what a node whose table had forgotten the client does).
std::vector<LoggedAppend> random_log(std::mt19937_64& random, std::uint64_t clients,
                                     std::size_t appends) {
  std::vector<LoggedAppend> log;
  std::vector<std::uint64_t> next_sequence(clients + 1, 1);
  std::uint64_t index = 1;
  for (std::size_t i = 0; i < appends; ++i) {
    const std::uint64_t client = 1 + random() % clients;
    LoggedAppend append;
    append.client = client;
    std::vector<const LoggedAppend*> earlier;
    if (random() % 8 == 0) {
      for (const LoggedAppend& a : log) {
        if (a.client == client) earlier.push_back(&a);
      }
    }
    if (!earlier.empty()) {
      const LoggedAppend& retried = *earlier[random() % earlier.size()];
      append.sequence = retried.sequence;
      append.payloads = retried.payloads;
    } else {
      append.sequence = next_sequence[client]++;
      const std::size_t entries = 1 + random() % 3;
      for (std::size_t e = 0; e < entries; ++e) {
        append.payloads.push_back("c" + std::to_string(client) + "s" +
                                  std::to_string(append.sequence) + "e" + std::to_string(e) +
                                  "r" + std::to_string(random() % 1000));
      }
    }
    append.first = index;
    index += append.payloads.size();
    log.push_back(std::move(append));
  }
  return log;
}

// A leader's table: the entries from `from` (a restart's rebuild window; 1: the whole log) through
// `through` (its log may run past the snapshot's point: those appends evict older ones).
DedupTable leader_table(const std::vector<LoggedAppend>& log, std::size_t max_clients,
                        std::size_t sequences, std::uint64_t from, std::uint64_t through) {
  DedupTable table(max_clients, sequences);
  table.set_view_start(from);
  for (const LoggedAppend& append : log) {
    for (std::size_t e = 0; e < append.payloads.size(); ++e) {
      const std::uint64_t index = append.first + e;
      if (index < from || index > through) continue;
      table.record_entry(append.client, append.sequence, index, 1, append.payloads[e]);
    }
  }
  return table;
}

// What the leader sends at `point` (all committed through `committed`).
SnapshotData leader_data(const DedupTable& table, std::uint64_t point, std::uint64_t committed) {
  SnapshotData data;
  data.index = point;
  data.term = 1;
  data.conf.voters = {1, 2, 3};
  data.topics = {{"orders", 4}};
  data.dedup_view_start = std::min(table.view_start(), point + 1);
  table.for_each_client_through(point, committed, [&](const DedupTable::ClientState& client) {
    data.dedup_clients.push_back(exportable_client(client, data.term));
    return true;
  });
  return data;
}

// A receiver whose bound is the smaller of the two leaders' (review H1: the splice's union of
// clients may exceed it, and the install must still keep every one).
std::size_t g_receiver_max_clients = 100'000;
DedupTable receiver(const SnapshotData& data) {
  DedupTable table(g_receiver_max_clients, kMaxAppendsPerClient);
  table.replace(data.index + 1, data.dedup_view_start, data.dedup_clients,
                data.spliced_view_starts);
  return table;
}

enum class Plant { kNone, kDropForgottenBelow };

struct Outcome {
  bool decoded = false;
  std::size_t checked = 0;
  std::size_t violations = 0;  // the spliced table answered kUnknown (or another range) wrongly
  std::string first_violation;
};

// Splices A's encoding after its block `cut` with B's clients above that block's last id and B's
// trailer, and checks every retry of a committed append at or below the point.
Outcome splice_and_check(const std::vector<LoggedAppend>& log, const SnapshotData& a,
                         const SnapshotData& b, std::size_t cut, std::size_t block_bytes,
                         Plant plant) {
  Outcome outcome;
  const FramedSnapshotData framed_a = encode_framed_snapshot_data(a, block_bytes);
  if (cut >= framed_a.frames.blocks.size()) {  // A holds no client at the point: nothing to splice
    outcome.decoded = true;
    return outcome;
  }
  const std::uint64_t x = framed_a.frames.blocks[cut].last_client;
  std::string spliced;
  if (plant == Plant::kNone) {
    // As a transfer splices: the follower's splice point from the bytes it holds (A's through the
    // block and one byte more), the continuation B cuts from its own encoding (blocks of another
    // size, so X usually falls inside one of B's blocks and it is re-blocked).
    FramedFrameWalk walk;
    walk.advance(std::string_view(framed_a.bytes).substr(0, framed_a.frames.blocks[cut].end + 1));
    const std::optional<FramedSplicePoint> point = walk.splice_point();
    if (!point || point->last_client_id != x) return outcome;
    const FramedContinuation continuation = make_framed_continuation(
        encode_framed_snapshot_data(b, block_bytes + 137).bytes, *point);
    if (continuation.outcome != FramedContinuation::Outcome::kMade) return outcome;
    spliced = framed_a.bytes.substr(0, point->kept_bytes) + continuation.bytes;
  } else {
    SnapshotData b_above = b;
    std::erase_if(b_above.dedup_clients, [&](const auto& client) { return client.client_id <= x; });
    for (auto& client : b_above.dedup_clients) client.forgotten_below = 0;
    const FramedSnapshotData framed_b = encode_framed_snapshot_data(b_above, block_bytes);
    spliced = framed_a.bytes.substr(0, framed_a.frames.blocks[cut].end) +
              framed_b.bytes.substr(framed_b.frames.head_end);
  }
  auto decoded = decode_snapshot_data(spliced);
  if (!decoded.ok()) return outcome;
  outcome.decoded = true;
  DedupTable spliced_table = receiver(*decoded);
  DedupTable from_a = receiver(a);
  DedupTable from_b = receiver(b);
  for (const LoggedAppend& append : log) {
    if (append.first > a.index) continue;  // the entries after the point carry the rest
    DedupTable& owner = append.client <= x ? from_a : from_b;
    DedupTable::Range owner_range;
    DedupTable::Range range;
    const auto expected = owner.find(append.client, append.sequence, append.payloads, &owner_range);
    const auto got = spliced_table.find(append.client, append.sequence, append.payloads, &range);
    ++outcome.checked;
    // The same answer, or kTooOld where the owner would say kReused (the other leader's view start
    // makes the spliced table more cautious): a refusal either way, never an append.
    const bool same = got == expected && (got == DedupTable::Lookup::kUnknown ||
                                          got == DedupTable::Lookup::kTooOld || range == owner_range);
    const bool more_cautious =
        expected == DedupTable::Lookup::kReused && got == DedupTable::Lookup::kTooOld;
    if (!same && !more_cautious) {
      if (outcome.violations++ == 0) {
        outcome.first_violation = "client " + std::to_string(append.client) + " sequence " +
                                  std::to_string(append.sequence) + " at " +
                                  std::to_string(append.first) + ": answered " +
                                  std::to_string(static_cast<int>(got)) + ", its sender " +
                                  std::to_string(static_cast<int>(expected)) + " (X " +
                                  std::to_string(x) + ")";
      }
    }
  }
  return outcome;
}

struct Scenario {
  std::vector<LoggedAppend> log;
  SnapshotData a;
  SnapshotData b;
};

Scenario random_scenario(std::uint64_t seed) {
  std::mt19937_64 random(seed);
  Scenario s;
  s.log = random_log(random, 10 + random() % 50, 300 + random() % 500);
  const std::uint64_t last = s.log.back().first + s.log.back().payloads.size() - 1;
  const std::uint64_t point = last / 2 + random() % (last / 3);
  // A: the whole log, or in one seed in two a restart's rebuild window (review L1: its blocks'
  // view start then is not 1), its own flags, its log through the point and a little past it.
  const std::uint64_t a_from = seed % 2 == 0 ? 1 : 1 + random() % (point / 2);
  const std::size_t a_clients = 8 + random() % 60;
  const DedupTable a =
      leader_table(s.log, a_clients, 2 + random() % 8, a_from, point + random() % 20);
  // B: other flags, a restart that rebuilt from a window, a log further past the point.
  const std::uint64_t window = 1 + random() % (point / 2);
  const std::size_t b_clients = 8 + random() % 60;
  const DedupTable b = leader_table(s.log, b_clients, 2 + random() % 8, window,
                                    point + random() % (last - point + 1));
  g_receiver_max_clients = std::min(a_clients, b_clients);
  s.a = leader_data(a, point, last);
  s.b = leader_data(b, point, last);
  return s;
}

TEST(SnapshotSplice, ASplicedTableAnswersEveryCommittedRetryAsItsSenderWould) {
  std::size_t splices = 0;
  std::size_t checked = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const Scenario s = random_scenario(seed);
    const std::size_t block_bytes = 200 + seed % 7 * 300;  // many blocks from small tables
    const auto blocks = encode_framed_snapshot_data(s.a, block_bytes).frames.blocks.size();
    for (std::size_t cut = 0; cut < blocks; cut += 1 + blocks / 4) {
      const Outcome outcome = splice_and_check(s.log, s.a, s.b, cut, block_bytes, Plant::kNone);
      ASSERT_TRUE(outcome.decoded) << "seed " << seed << " cut " << cut;
      EXPECT_EQ(outcome.violations, 0U) << "seed " << seed << ": " << outcome.first_violation;
      ++splices;
      checked += outcome.checked;
    }
  }
  EXPECT_GT(splices, 600U);
  EXPECT_GT(checked, 100'000U);
}

TEST(SnapshotSplice, PlantedDropOfForgottenBelowIsCaught) {
  std::size_t caught = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    const Scenario s = random_scenario(seed);
    const Outcome outcome = splice_and_check(s.log, s.a, s.b, 0, 400, Plant::kDropForgottenBelow);
    ASSERT_TRUE(outcome.decoded);
    if (outcome.violations != 0) ++caught;
  }
  // A retry below a client's forgotten_below is refused by its sender (kTooOld) and "unknown"
  // without it: appended again, a duplicate the check must see in most logs.
  EXPECT_GT(caught, 50U);
}

TEST(SnapshotSplice, PlantedOverlapAtXIsRefusedByTheDecoder) {
  std::size_t overlapping = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    const Scenario s = random_scenario(seed);
    const FramedSnapshotData framed_a = encode_framed_snapshot_data(s.a, 400);
    if (framed_a.frames.blocks.empty()) continue;
    const std::uint64_t x = framed_a.frames.blocks[0].last_client;
    // B's continuation from X itself (ids >= X), as a leader that resent the block holding X would.
    SnapshotData b_from_x = s.b;
    std::erase_if(b_from_x.dedup_clients, [&](const auto& client) { return client.client_id < x; });
    const bool b_holds_x = std::any_of(b_from_x.dedup_clients.begin(), b_from_x.dedup_clients.end(),
                                       [&](const auto& client) { return client.client_id == x; });
    if (!b_holds_x) continue;
    ++overlapping;
    const FramedSnapshotData framed_b = encode_framed_snapshot_data(b_from_x, 400);
    const auto decoded = decode_snapshot_data(framed_a.bytes.substr(0, framed_a.frames.blocks[0].end) +
                                              framed_b.bytes.substr(framed_b.frames.head_end));
    EXPECT_FALSE(decoded.ok()) << "seed " << seed << ": client " << x << " from both leaders";
  }
  EXPECT_GT(overlapping, 20U);
}

}  // namespace
}  // namespace raftlog::replica

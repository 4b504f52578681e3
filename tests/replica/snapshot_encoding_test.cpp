// The leader's last encoded snapshot data (replica/snapshot_encoding.h): reused for the same point,
// term and configuration while it is valid, encoded anew otherwise; the same buffer, not a copy.
#include "replica/snapshot_encoding.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

using namespace std::chrono_literals;
using Clock = SnapshotEncoding::Clock;
const Clock::time_point kT0 = Clock::time_point(1000s);

SnapshotData point(std::uint64_t index, std::string section) {
  SnapshotData data;
  data.index = index;
  data.term = 7;
  data.conf.voters = {1, 2, 3};
  data.conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  data.timestamp_floor_ms = 1'800'000'000'000;
  data.topics = {{"orders", 120}};
  data.section = std::move(section);
  data.dedup_view_start = 1;
  data.origin = SnapshotOrigin::kInstalled;
  return data;
}

// A removal that commits after the encoding retires an id without moving the point: the follower
// must learn it (it refuses the id once it leads), so the kept bytes no longer describe the point.
TEST(SnapshotEncoding, AnIdRetiredSinceTheEncodingIsEncodedAnew) {
  SnapshotEncoding encoding;
  const SnapshotEncoding::Encoded first = encoding.get(point(500, "groups"), kT0);
  SnapshotData retired = point(500, "groups");
  retired.retired_ids = {4};
  const SnapshotEncoding::Encoded again = encoding.get(retired, kT0 + 1s);
  EXPECT_FALSE(again.bytes.shares_bytes_with(first.bytes));
  EXPECT_EQ(again.bytes, encode_framed_snapshot_data(retired).bytes);
  EXPECT_EQ(encoding.counters().encodes, 2u);
  EXPECT_EQ(encoding.counters().reuses, 0u);
}

TEST(SnapshotEncoding, ThePointsEncodingIsReusedAsTheSameBufferWithItsChecksum) {
  SnapshotEncoding encoding;
  const SnapshotEncoding::Encoded first = encoding.get(point(500, "groups"), kT0);
  EXPECT_EQ(first.bytes, encode_framed_snapshot_data(point(500, "groups")).bytes);
  EXPECT_EQ(first.crc32c, util::crc32c::value(first.bytes.view()));
  // A later send of the same point (its data gathered again, the floor moved on): the same bytes.
  SnapshotData later = point(500, "groups, later");
  later.timestamp_floor_ms += 1000;
  const SnapshotEncoding::Encoded again = encoding.get(later, kT0 + 1s);
  EXPECT_TRUE(again.bytes.shares_bytes_with(first.bytes));
  EXPECT_EQ(again.crc32c, first.crc32c);
  EXPECT_EQ(encoding.counters().encodes, 1u);
  EXPECT_EQ(encoding.counters().reuses, 1u);
  // Another point, term or configuration: encoded anew, and it replaces the kept one.
  EXPECT_FALSE(encoding.get(point(600, "groups"), kT0 + 2s).bytes.shares_bytes_with(first.bytes));
  SnapshotData other_term = point(600, "groups");
  other_term.term = 8;
  encoding.get(other_term, kT0 + 3s);
  SnapshotData other_conf = other_term;
  other_conf.conf.voters = {1, 2};
  other_conf.conf.addresses.pop_back();
  encoding.get(other_conf, kT0 + 4s);
  EXPECT_EQ(encoding.counters().encodes, 4u);
  EXPECT_EQ(encoding.counters().reuses, 1u);
  // An install, a trim or a change of leader invalidates it.
  encoding.invalidate();
  EXPECT_FALSE(encoding.holds());
  encoding.get(other_conf, kT0 + 5s);
  EXPECT_EQ(encoding.counters().encodes, 5u);
}

// Review F1: an encoding made while the node's section was empty (the dispatcher had not applied
// past the point) is not reused once the data has one: the follower would mark every group offset
// unknown for as long as the encoding lived.
TEST(SnapshotEncoding, AnEncodingWithoutTheNodesSectionIsNotReusedOnceThereIsOne) {
  SnapshotEncoding encoding;
  encoding.get(point(500, ""), kT0);
  encoding.get(point(500, ""), kT0 + 1s);
  EXPECT_EQ(encoding.counters().reuses, 1u);
  const SnapshotEncoding::Encoded with_section = encoding.get(point(500, "groups"), kT0 + 2s);
  EXPECT_EQ(with_section.bytes, encode_framed_snapshot_data(point(500, "groups")).bytes);
  EXPECT_EQ(encoding.counters().encodes, 2u);
  // One with a section stands for later sends of the point, with or without.
  encoding.get(point(500, "groups, later"), kT0 + 3s);
  encoding.get(point(500, ""), kT0 + 4s);
  EXPECT_EQ(encoding.counters().encodes, 2u);
  EXPECT_EQ(encoding.counters().reuses, 3u);
}

// Review F6: the age counts from the last use (a slow transfer retried again and again keeps its
// bytes, which a resume needs), up to a hard bound from its making.
TEST(SnapshotEncoding, AnEncodingLivesWhileItIsUsedUpToItsMaximumAge) {
  SnapshotEncoding encoding;
  const SnapshotData data = point(500, "groups");
  encoding.get(data, kT0);
  Clock::time_point at = kT0;
  while (at + kSnapshotEncodingIdleAge - 1s < kT0 + kSnapshotEncodingMaxAge) {
    at += kSnapshotEncodingIdleAge - 1s;
    encoding.get(data, at);
  }
  EXPECT_EQ(encoding.counters().encodes, 1u) << "used within the idle age every time";
  EXPECT_GT(at - kT0, kSnapshotEncodingIdleAge);
  encoding.get(data, kT0 + kSnapshotEncodingMaxAge);
  EXPECT_EQ(encoding.counters().encodes, 2u) << "made longer ago than the maximum age";
  // Unused for the idle age: dropped, so it does not hold its bytes.
  encoding.expire(kT0 + kSnapshotEncodingMaxAge + kSnapshotEncodingIdleAge - 1s);
  EXPECT_TRUE(encoding.holds());
  encoding.expire(kT0 + kSnapshotEncodingMaxAge + kSnapshotEncodingIdleAge);
  EXPECT_FALSE(encoding.holds());
}

// Review F7: a transfer in flight makes no get(); its progress (touch) counts as use, so its retry
// after more than the idle age still gets the same bytes. Progress of another point does not.
TEST(SnapshotEncoding, ATransferInFlightKeepsItsEncoding) {
  SnapshotEncoding encoding;
  const SnapshotData data = point(500, "groups");
  const SnapshotEncoding::Encoded first = encoding.get(data, kT0);
  Clock::time_point at = kT0;
  for (int minute = 1; minute <= 20; ++minute) {
    at = kT0 + std::chrono::minutes(minute);
    encoding.touch(500, at);
    encoding.expire(at);  // every tick does
  }
  EXPECT_TRUE(encoding.get(data, at + 1s).bytes.shares_bytes_with(first.bytes));
  EXPECT_EQ(encoding.counters().encodes, 1u);
  for (int minute = 1; minute <= 6; ++minute) {
    encoding.touch(600, at + std::chrono::minutes(minute));
    encoding.expire(at + std::chrono::minutes(minute));
  }
  EXPECT_FALSE(encoding.holds());
}

}  // namespace
}  // namespace raftlog::replica

// util::RateLimit: one event per interval, the held-back ones counted and reported with the next.
#include "util/rate_limit.h"

#include <gtest/gtest.h>

namespace raftlog::util {
namespace {

using namespace std::chrono_literals;

TEST(RateLimit, LetsOneEventThroughPerIntervalAndCountsTheRest) {
  RateLimit limit(30s);
  const RateLimit::Clock::time_point t0{};
  ASSERT_EQ(limit.admit(t0), std::optional<std::uint64_t>(0));  // the first always passes
  EXPECT_EQ(limit.admit(t0 + 1s), std::nullopt);
  EXPECT_EQ(limit.admit(t0 + 29s), std::nullopt);
  EXPECT_EQ(limit.admit(t0 + 30s), std::optional<std::uint64_t>(2));  // two were held back
  EXPECT_EQ(limit.admit(t0 + 31s), std::nullopt);
  EXPECT_EQ(limit.admit(t0 + 2min), std::optional<std::uint64_t>(1));
  EXPECT_EQ(limit.admit(t0 + 3min), std::optional<std::uint64_t>(0));  // nothing held back since
}

}  // namespace
}  // namespace raftlog::util

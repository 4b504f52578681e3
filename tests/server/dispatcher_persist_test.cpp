// When the dispatcher persists the derived indexes (src/server/dispatcher.h): a cursor that only
// moved over plain entries is not rewritten at the 200 ms cadence (kCursorOnlyPersistMs), records
// added by an envelope are, and stop() persists whatever moved. On a real one-node Server in
// process; the cursor is read from derived/CURSOR as a restart would.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "derived/cursor.h"
#include "server/dispatcher.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"
#include "store/env.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// The boundary of the persisted cursor (the first index not yet indexed), or 0 when there is none.
std::uint64_t persisted_boundary(const std::string& data_dir) {
  std::string problem;
  const std::optional<derived::Cursor> cursor =
      derived::read_cursor(store::Env::posix(), store::join_path(data_dir, "derived"), &problem);
  return cursor ? cursor->boundary : 0;
}

TEST(DispatcherPersist, ACursorThatOnlyMovedWaitsRecordsAndStopDoNot) {
  static_assert(server::Dispatcher::kCursorOnlyPersistMs >= 5000,
                "the test's plain-append window must stay inside the cursor-only interval");
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  const std::string dir = node.data_dir();
  // An entry with a topic and a key adds records: persisted at the 200 ms cadence.
  const std::uint64_t first_enveloped = node.append_to_topic("orders", 1, 100);
  ASSERT_NE(first_enveloped, 0u);
  ASSERT_TRUE(eventually([&] { return persisted_boundary(dir) > first_enveloped; }, 5000ms))
      << "records were not persisted; the cursor is at " << persisted_boundary(dir);
  const std::uint64_t start = persisted_boundary(dir);

  // Plain entries only: five and more 200 ms persist intervals pass, the cursor on disk stays.
  const auto plain_started = std::chrono::steady_clock::now();
  const std::uint64_t last_plain = node.append(40, 100);
  ASSERT_NE(last_plain, 0u);
  std::this_thread::sleep_for(1200ms);
  ASSERT_LT(std::chrono::steady_clock::now() - plain_started, 5000ms)
      << "the machine was too slow for this test's window";
  EXPECT_EQ(persisted_boundary(dir), start)
      << "a cursor that only moved over plain entries was rewritten at the 200 ms cadence";

  // Another one: persisted at the 200 ms cadence again, the plain entries before it with it.
  const std::uint64_t enveloped = node.append_to_topic("orders", 1, 100);
  ASSERT_NE(enveloped, 0u);
  EXPECT_TRUE(eventually([&] { return persisted_boundary(dir) > enveloped; }, 3000ms))
      << "records were not persisted; the cursor is at " << persisted_boundary(dir);

  // More plain entries, applied (the dispatcher follows the commit index within a wake-up), then
  // stop: the stop persists the cursor that moved, though it moved over plain entries only.
  const std::uint64_t last = node.append(5, 100);
  ASSERT_NE(last, 0u);
  std::this_thread::sleep_for(1000ms);
  EXPECT_LE(persisted_boundary(dir), last) << "plain entries were persisted before the stop";
  node.shutdown();
  EXPECT_GT(persisted_boundary(dir), last);
}

}  // namespace
}  // namespace raftlog::testing

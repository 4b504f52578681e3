// raftlog-bench: prints performance figures (it is a program, not a timed test). Every figure ends in
// a `RESULT bench=... key=value ...` line on stdout; progress lines go to stderr.
#include <absl/synchronization/mutex.h>

#include <iostream>
#include <string>
#include <vector>

#include "catch_up_bench.h"
#include "cli/commands.h"
#include "cluster_bench.h"
#include "etcd_bench.h"
#include "nats_bench.h"
#include "snapshot_loop_bench.h"
#include "stability_bench.h"
#include "store_command.h"
#include "topics_bench.h"

namespace {

constexpr raftlog::cli::Command kCommands[] = {
    {"store",
     "append throughput (writers x entry sizes x flush modes) vs the raw disk, and recovery time",
     raftlog::bench::run_store_command, nullptr},
    {"raw", "only the raw disk limit: sequential write + fdatasync at one batch size",
     raftlog::bench::run_raw_command, nullptr},
    {"cluster", "closed-loop append load against a cluster (its own local one unless --endpoints)",
     raftlog::bench::run_cluster_command, nullptr},
    {"failover", "kill -9 the leader under load; time until the new leader acknowledges writes",
     raftlog::bench::run_failover_command, nullptr},
    {"etcd",
     "the same closed-loop load as `cluster`, as etcd v3 KV.Put calls (for bench/compare-etcd.sh)",
     raftlog::bench::run_etcd_command, nullptr},
    {"etcd-failover",
     "one etcd leader kill -9 under a Put load; time until a Put succeeds in a newer term",
     raftlog::bench::run_etcd_failover_command, nullptr},
    {"nats",
     "the same closed-loop load as `cluster`, as NATS JetStream publishes with acknowledgement",
     raftlog::bench::run_nats_command, nullptr},
    {"topics",
     "what topics and keys cost: appends/s without and with them side by side, dispatch and "
     "rebuild rates",
     raftlog::bench::run_topics_command, nullptr},
    {"leader-stability",
     "large appends while busy threads hold the CPUs; counts leader changes (goal: 0)",
     raftlog::bench::run_leader_stability_command, nullptr},
    {"snapshot-loop",
     "how long a snapshot catch-up of a large dedup and topic table holds the Raft loop, per part",
     raftlog::bench::run_snapshot_loop_command, nullptr},
    {"catch-up",
     "a new member catches up from a leader holding hundreds of MiB; the leader's loop rounds",
     raftlog::bench::run_catch_up_command, nullptr},
};
constexpr raftlog::cli::CommandTable kTable{kCommands};

}  // namespace

int main(int argc, char** argv) {
  // As raftlogd does: Debian's Abseil checks every absl::Mutex acquisition (all of gRPC's locks) for
  // lock-order cycles, which took about 3 % of the load generator's CPU at 64 clients (docs/
  // benchmarks.md, "Cheaper appends"). The etcd and raftlog load use the same process, so both gain.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<std::string> args(argv + 1, argv + argc);
  const raftlog::cli::Io io{std::cout, std::cerr};
  return raftlog::cli::run_tool("raftlog-bench",
                                "Benchmarks for raftlog. Every figure ends in a RESULT line.",
                                kTable, args, io);
}

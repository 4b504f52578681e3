// The replica's settings and what it needs from the world: ReplicaConfig (what it acts on, as
// raftlogd's NodeConfig derives it), ReplicaDeps (where messages go, the time, the disk, observers,
// the off-loop executor) and ReadyObserver (a harness's view of each Ready batch). Replica::open
// (replica.h) takes the first two.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "raft/raft.h"
#include "replica/catch_up_rule.h"
#include "replica/disk_probe.h"
#include "replica/node_events.h"
#include "replica/off_loop.h"
#include "replica/results.h"
#include "store/options.h"

namespace raftlog::replica {

using Clock = std::chrono::steady_clock;

// The settings the replica acts on (raftlogd derives them from its NodeConfig: server/node_config.h
// documents each field and its bounds, which the caller has validated).
struct ReplicaConfig {
  std::uint64_t node_id = 0;
  // node id -> address: the addresses this node knows before any configuration records them
  // (--members, or a joining node's seed list and itself). The configurations' own addresses take
  // precedence (Replica::address_book()).
  std::map<std::uint64_t, std::string> members;
  std::string data_dir;  // the log lives in data_dir/log, HARDSTATE and CONFSTATE next to it
  std::uint32_t tick_ms = 20;
  std::uint32_t election_ticks = 10;
  store::Options store;
  std::uint32_t max_pending_appends = 16384;
  std::uint32_t append_timeout_ms = 5000;
  std::uint32_t dedup_sequences_per_client = 64;
  std::uint32_t dedup_max_clients = 100000;
  std::uint64_t dedup_rebuild_entries = 1000000;
  // TOPICSTATE (topic_state_file.h) is saved whenever the commit index (as far as the log is
  // flushed) passed the saved point by this many entries, a failed save again this many entries
  // later (and at close and before every trim): a restart reads at most about this many entries
  // beyond the dedup window to rebuild the topic table and the timestamp floor.
  std::uint64_t topic_state_save_entries = 262144;
  std::uint64_t retention_max_age_s = 0;
  std::uint64_t retention_max_bytes = 0;
  std::uint32_t retention_check_interval_ms = 10000;
  std::uint32_t retention_follower_grace_ms = 600000;
  // The most bytes of snapshot data (snapshot_data.h) this node sends in one kSnapshot message: the
  // dedup table's clients beyond it are left out (least recently used first); a snapshot whose
  // topic table, configuration and node section alone exceed it is not sent (counted in
  // SnapshotStats::too_large, logged), and the follower stays stranded (docs/raft.md, "Snapshots").
  // Below the peer message bound (server::MessageLimits, 8 MiB) with room for the rest of the
  // message.
  std::size_t max_snapshot_data_bytes = 4U << 20;
  // The most payload bytes one loop round (or one trim call) reads to move the topic table as of
  // the first index - 1 over the segments a trim deletes (trim_progress.h, TopicScan): bounds the
  // time a trim takes on the replica's loop; a trim of more waits for the scan, in the background.
  std::uint64_t topic_scan_slice_bytes = 8ULL << 20;
  // A trim's expensive steps (the log flush, TOPICSTATE, CONFSTATE, one scan slice, and the
  // deletion itself: SNAPSHOT.next, the unlinks, SNAPSHOT) run one after the other in one loop
  // round only while the round's trim work so far took less than this; the rest continues in the
  // next rounds (trim_.pending_before), so heartbeats wait at most about one step
  // (replica_retention.cpp). 0: one expensive step per round.
  std::uint32_t trim_round_budget_ms = 50;
  // Segments one round of a trim's deletion unlinks at most, oldest first, besides the budget above
  // (replica_trim_deletion.cpp): each unlink is quick, but hundreds of them, with the log's checkpoint
  // and directory sync, are not; the rest waits for the next rounds. 0: no bound (the budget alone).
  std::size_t trim_segments_per_round = 16;
  // The most dedup bytes (as encoded) one loop round gathers for a leader's snapshot: a table of
  // tens of MiB takes hundreds of ms to walk and copy, longer than an election timeout, so it is
  // gathered in slices, one per process() (replica_snapshot_send.cpp); with no off-loop executor
  // (ReplicaDeps::off_loop) it is gathered whole at once.
  std::uint64_t snapshot_gather_slice_bytes = 4ULL << 20;
  double disk_high_watermark = 0.90;
  double disk_low_watermark = 0.80;
  // A caught-up follower whose log falls more than this many entries behind the commit index its
  // leader named reports NOT_SERVING until it reaches that index again (catch_up_rule.h,
  // --serving-lag-entries).
  std::uint64_t serving_lag_entries = kDefaultServingLagEntries;
  // Complete, random_seed included; initial_conf is the bootstrap configuration (--members). The
  // replica adds what recovery found, conf_history included (from CONFSTATE).
  raft::Config raft;
  bool same_boot = false;  // the machine did not restart since the data directory's last open
  // TEST ONLY (the simulator's planted bug, --plant-ignore-unvouched): DATA_DIR/UNVOUCHED is neither
  // written nor read, as before it existed, so that a sweep shows it catches what the record
  // prevents (docs/testing.md). raftlogd never sets it.
  bool ignore_unvouched_marker = false;
  // TEST ONLY (the simulator's planted bug, --plant-ignore-not-founder): DATA_DIR/NOT_FOUNDER is
  // neither written nor read, so raft::Config::never_founds stays false (docs/testing.md).
  bool ignore_not_founder_marker = false;
};

// What a harness that checks the driver (the simulator, src/sim) observes of each Ready batch.
// raftlogd sets none. Both calls run inside process() on the replica's thread; they must not call
// back into the replica.
class ReadyObserver {
 public:
  virtual ~ReadyObserver() = default;
  // Before anything of the batch is applied: the log still holds what a truncation will cut.
  virtual void before_ready(const raft::Ready& ready) = 0;
  // After the whole batch is applied (hard state, log, commit, reads; completion callbacks of this
  // batch have run). Its messages have been moved out (sent or held); the rest is intact.
  virtual void after_ready(const raft::Ready& ready) = 0;
};

struct ReplicaDeps {
  MessageSender* sender = nullptr;  // required
  DiskProbe* disk = nullptr;        // required
  NodeEvents* events = nullptr;     // optional
  std::function<Clock::time_point()> clock = [] { return Clock::now(); };
  // Wall-clock time, compared with the store's file times by age-based retention.
  std::function<std::chrono::system_clock::time_point()> wall_clock = [] {
    return std::chrono::system_clock::now();
  };
  // Called with the new commit index before any waiter learns of it, so that what a waiter's
  // caller does next (a read of its own entry) sees the index published.
  std::function<void(std::uint64_t commit)> commit_advanced;
  ReadyObserver* observer = nullptr;  // optional (the simulator's checker)
  // Snapshots (docs/raft.md, "Snapshots"): the node's own section of a snapshot's data
  // (snapshot_data.h; raftlogd: the consumer group table). All optional; without them the section
  // is empty. On the replica's thread.
  //   snapshot_section: the leader's state as of at least `index` (it may cover later committed
  //     entries, which the follower then skips), or "" for none.
  //   check_snapshot_section: "" when a received section may be installed at `index`, else why not
  //     (the snapshot is then refused before the core sees it).
  //   snapshot_installed: after an install is durable (SNAPSHOT holds the section, so a restart
  //     finds it there too: read_snapshot_file).
  std::function<std::string(std::uint64_t index)> snapshot_section;
  std::function<std::string(std::string_view section, std::uint64_t index)>
      check_snapshot_section;
  std::function<void(std::uint64_t index, const std::string& section)> snapshot_installed;
  // Where the encoding of a leader's snapshot data and a follower's preparation of a received one
  // run (off_loop.h); optional: without it, inline on the replica's thread (harnesses that time
  // nothing).
  OffLoopExecutor* off_loop = nullptr;
};

}  // namespace raftlog::replica

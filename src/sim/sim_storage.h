// Simulated storage for one node: what the driver has written (volatile) and what has reached the disk
// (durable). The Raft core reads the volatile view through raft::LogReader; a crash throws away the
// volatile view and every write still in flight, so that restarts see exactly what was persisted.
//
// Writes complete in order (one ordered write queue per node, like an append-only file plus fsync);
// each queued write is atomic: its truncation, entries and hard state become durable together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "raft/log_reader.h"
#include "raft/types.h"

namespace raftlog::sim {

// One Ready batch's durable work, queued until the simulated disk completes it.
struct PersistJob {
  std::optional<raft::Index> truncate_from;
  std::vector<raft::Entry> entries;
  std::optional<raft::HardState> hard_state;
  bool must_sync = false;
  std::vector<raft::Message> messages_after_persist;  // released only once this job is durable
  raft::Index last_index = 0;  // the volatile log's last index/term right after this batch was applied
  raft::Term last_term = 0;
  bool log_changed = false;         // truncate_from or entries present: report on_persisted
  std::uint64_t complete_at_step = 0;
};

class SimStorage final : public raft::LogReader {
 public:
  // Bound on queued writes per node; the driver asserts it (a node cannot outrun its disk forever
  // because the core bounds its own uncommitted entries and in-flight messages).
  static constexpr std::size_t kMaxPendingJobs = 4096;

  SimStorage() = default;

  // raft::LogReader over the volatile log (the simulator never trims, so first_index() is 1).
  raft::Index first_index() const override { return 1; }
  raft::Index last_index() const override { return volatile_log_.size(); }
  std::optional<raft::Term> term_at(raft::Index index) const override;
  std::vector<raft::Entry> entries(raft::Index from, raft::Index to, std::size_t max_bytes) const override;

  // Step 1 and 2 of the Ready contract on the volatile log. Returns false (and changes nothing) when
  // the batch is malformed: truncation beyond the end, or entries that do not continue the log.
  bool apply_volatile(const std::optional<raft::Index>& truncate_from, const std::vector<raft::Entry>& entries);

  // Queues a write; it completes no earlier than every write queued before it.
  void enqueue(PersistJob job);
  bool has_due_job(std::uint64_t step) const;
  // Makes the oldest queued job durable and returns it (precondition: has_due_job).
  PersistJob complete_oldest();
  std::uint64_t last_queued_completion_step() const;
  std::size_t pending_jobs() const { return pending_.size(); }

  // Crash: every queued write is lost and the volatile log reverts to the durable one.
  void crash();

  const std::vector<raft::Entry>& volatile_log() const { return volatile_log_; }
  const std::vector<raft::Entry>& durable_log() const { return durable_log_; }
  const raft::HardState& durable_hard_state() const { return durable_hard_state_; }

 private:
  static bool apply_to(std::vector<raft::Entry>& log, const std::optional<raft::Index>& truncate_from,
                       const std::vector<raft::Entry>& entries);

  std::vector<raft::Entry> volatile_log_;  // entry i at position i - 1
  std::vector<raft::Entry> durable_log_;
  raft::HardState durable_hard_state_;
  std::deque<PersistJob> pending_;
};

// A LogReader over a plain vector (entry i at position i - 1); used for durable logs and in tests.
class VectorLogView final : public raft::LogReader {
 public:
  explicit VectorLogView(const std::vector<raft::Entry>& log) : log_(log) {}
  raft::Index first_index() const override { return 1; }
  raft::Index last_index() const override { return log_.size(); }
  std::optional<raft::Term> term_at(raft::Index index) const override;
  std::vector<raft::Entry> entries(raft::Index from, raft::Index to, std::size_t max_bytes) const override;

 private:
  const std::vector<raft::Entry>& log_;
};

}  // namespace raftlog::sim

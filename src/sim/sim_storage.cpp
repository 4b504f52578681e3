#include "sim/sim_storage.h"

#include <cassert>
#include <utility>

namespace raftlog::sim {

namespace {

std::optional<raft::Term> term_in(const std::vector<raft::Entry>& log, raft::Index index) {
  if (index == 0) return raft::Term{0};
  if (index > log.size()) return std::nullopt;
  return log[index - 1].term;
}

std::vector<raft::Entry> entries_in(const std::vector<raft::Entry>& log, raft::Index from, raft::Index to,
                                    std::size_t max_bytes) {
  assert(from >= 1 && to <= log.size());
  std::vector<raft::Entry> result;
  std::size_t total_bytes = 0;
  for (raft::Index index = from; index <= to; ++index) {
    const raft::Entry& entry = log[index - 1];
    if (!result.empty() && total_bytes + entry.byte_size() > max_bytes) break;
    total_bytes += entry.byte_size();
    result.push_back(entry);
  }
  return result;
}

}  // namespace

std::optional<raft::Term> SimStorage::term_at(raft::Index index) const { return term_in(volatile_log_, index); }

std::vector<raft::Entry> SimStorage::entries(raft::Index from, raft::Index to, std::size_t max_bytes) const {
  return entries_in(volatile_log_, from, to, max_bytes);
}

bool SimStorage::apply_to(std::vector<raft::Entry>& log, const std::optional<raft::Index>& truncate_from,
                          const std::vector<raft::Entry>& entries) {
  std::size_t keep = log.size();
  if (truncate_from) {
    if (*truncate_from == 0 || *truncate_from > log.size() + 1) return false;
    keep = *truncate_from - 1;
  }
  for (std::size_t offset = 0; offset < entries.size(); ++offset) {
    if (entries[offset].index != keep + 1 + offset) return false;
  }
  log.resize(keep);
  log.insert(log.end(), entries.begin(), entries.end());
  return true;
}

bool SimStorage::apply_volatile(const std::optional<raft::Index>& truncate_from,
                                const std::vector<raft::Entry>& entries) {
  return apply_to(volatile_log_, truncate_from, entries);
}

void SimStorage::enqueue(PersistJob job) {
  assert(pending_.size() < kMaxPendingJobs);
  assert(pending_.empty() || job.complete_at_step >= pending_.back().complete_at_step);
  pending_.push_back(std::move(job));
}

bool SimStorage::has_due_job(std::uint64_t step) const {
  return !pending_.empty() && pending_.front().complete_at_step <= step;
}

PersistJob SimStorage::complete_oldest() {
  assert(!pending_.empty());
  PersistJob job = std::move(pending_.front());
  pending_.pop_front();
  // The same batch already applied cleanly to the volatile log, and the durable log is the volatile
  // log's past, so it applies here too.
  const bool applied = apply_to(durable_log_, job.truncate_from, job.entries);
  assert(applied);
  (void)applied;
  if (job.hard_state) durable_hard_state_ = *job.hard_state;
  return job;
}

std::uint64_t SimStorage::last_queued_completion_step() const {
  return pending_.empty() ? 0 : pending_.back().complete_at_step;
}

void SimStorage::crash() {
  pending_.clear();
  volatile_log_ = durable_log_;
}

std::optional<raft::Term> VectorLogView::term_at(raft::Index index) const { return term_in(log_, index); }

std::vector<raft::Entry> VectorLogView::entries(raft::Index from, raft::Index to, std::size_t max_bytes) const {
  return entries_in(log_, from, to, max_bytes);
}

}  // namespace raftlog::sim

#include "replica/storage_fault.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>

#include "store/durable_record.h"
#include "store/endian.h"
#include "store/env.h"

namespace raftlog::replica {

StorageFault assess_storage_fault(const RecoveryFacts& facts) {
  StorageFault fault;
  if (!facts.sync_flush || facts.single_member) return fault;
  const store::RecoveryReport& report = facts.report;
  if (report.corrupted_flushed_data_truncated) {
    fault.description = "recovery cut the log at a corrupt entry it had made durable";
  } else if (facts.checkpoint_commit_index > facts.recovered_last_index) {
    fault.description = "the log ends at " + std::to_string(facts.recovered_last_index) +
                        " but its checkpoint recorded commit index " +
                        std::to_string(facts.checkpoint_commit_index);
  } else if (facts.same_boot && report.valid_entries_after_cut > 0) {
    fault.description = "recovery cut the log at a corrupt entry with " +
                        std::to_string(report.valid_entries_after_cut) +
                        " valid entries after it (no reboot since: not a torn write)";
  } else {
    return fault;
  }
  fault.lost_durable_entries = true;
  fault.promised_index = std::max({facts.checkpoint_commit_index, report.checkpoint_flushed_index,
                                   report.highest_index_seen, facts.recovered_last_index});
  fault.promised_term = std::max(facts.hard_state_term, facts.last_log_term);
  return fault;
}

std::string current_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id) || id.size() > 64) return "";
  return id;
}

bool same_boot_as_last_open(const std::string& data_dir, const std::string& boot_id) {
  constexpr std::uint32_t kBootRecordVersion = 1;
  store::Env* env = store::Env::posix();
  auto file = store::DurableRecordFile::open(env, store::join_path(data_dir, "BOOT"), data_dir);
  if (!file.ok()) {
    spdlog::warn("{}/BOOT: {}", data_dir, file.status().to_string());
    return false;
  }
  bool same = false;
  if (const auto& payload = (*file)->current();
      payload && payload->size() >= 4 && store::get_u32(payload->data()) == kBootRecordVersion) {
    same = !boot_id.empty() && payload->substr(4) == boot_id;
  }
  if (boot_id.empty() || boot_id.size() > 64) return false;
  std::string record(4, '\0');
  store::put_u32(record.data(), kBootRecordVersion);
  record += boot_id;
  if (store::Status st = (*file)->write(record); !st.ok()) {
    spdlog::warn("{}/BOOT: {}", data_dir, st.to_string());
  }
  return same;
}

}  // namespace raftlog::replica

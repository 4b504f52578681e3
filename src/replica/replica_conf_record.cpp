// Replica: CONFSTATE that holds no record, or a bootstrap record other than the configured one, at
// open (docs/storage-format.md, "CONFSTATE"; outside test finding drills2 F2).
//
// "No record" used to mean "the bootstrap configuration" (--members, or a joined node's JOIN
// record), which is true only of a directory whose configuration never changed. A CONFSTATE
// removed, zeroed or cut to nothing beside a log trimmed past a membership change put the node on
// the founders' configuration: it counted a retired node's vote and left out a new member, and two
// entries were committed at one index. The file is the only record of the configuration a trimmed
// log no longer shows, and nothing else on disk holds the newest one (the configuration at the
// log's first index - 1 that a trim's SNAPSHOT keeps may be older than an entry still in the log,
// and the retired ids are CONFSTATE's alone), so it is not rebuilt: a directory the disk shows to be
// past its bootstrap configuration is refused, and the node is replaced (docs/operations.md,
// "Damaged data at startup").
//
// What counts as "the disk shows it":
//   - a kConfig entry in the log: found by one read of the retained log, done only at an open that
//     found no record (the index files do not keep entry types, and the dedup pass reads only the
//     newest entries); nothing is read for a new, empty log;
//   - the configuration in force at the log's first index - 1 that SNAPSHOT names (a trim's of
//     version 3, or an installed snapshot's) with other members than the bootstrap configuration.
// A directory neither contradicts opens with the bootstrap configuration, as one written before
// membership changes does (no record, no kConfig entry, a SNAPSHOT of version 1 or 2 that does not
// name the configuration): not provably wrong, and refusing it would stop every such node at its
// upgrade. Its record is then written (write_bootstrap_conf_record), as it is at a new directory's
// first open, so that from now on "no record" beside a log is damage wherever this binary ran.
//
// A record whose base is the bootstrap configuration (entry 0) names the members this directory
// was created with: a configured bootstrap with other members is a JOIN file lost (a joined node
// restarted with --members naming itself alone would be a one-node cluster and elect itself) or
// --members edited, and is refused too.
#include <spdlog/spdlog.h>

#include "replica/replica.h"

namespace raftlog::replica {
namespace {

constexpr const char* kRemedy =
    "; refusing to start: replace this node under a new id (an empty directory, raftlogd --join, "
    "raftlogctl members replace), or restore its directory from a backup of this same node "
    "(docs/operations.md, \"Damaged data at startup\")";

}  // namespace

bool Replica::check_conf_record_against_disk(std::uint64_t* corrupt_index, std::string* problem) {
  const raft::ConfState& bootstrap = config_.raft.initial_conf;
  const std::string path = config_.data_dir + "/CONFSTATE";
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  if (!recorded.empty() && recorded.front().index == 0 &&
      !raft::same_members(recorded.front().conf, bootstrap)) {
    *problem = path + " says this directory was created with the bootstrap configuration " +
               raft::to_string(recorded.front().conf) + ", but this start configures " +
               raft::to_string(bootstrap) +
               " (a joined node whose JOIN file is lost, or --members changed): start it with "
               "the members it was created with" +
               kRemedy;
    return false;
  }
  if (!conf_record_missing_at_open_) return true;
  const std::uint64_t first = log_->first_index();
  const std::uint64_t last = log_->last_index();
  if (first <= 1 && last == 0) return true;  // a new log: nothing can be in force but bootstrap
  const std::string missing = path + " holds no configuration record (missing, or all zeros)";
  // One read of the retained log, bounded per batch like the dedup pass.
  constexpr std::size_t kBatchEntries = 4096;
  for (std::uint64_t from = first; from <= last;) {
    auto batch = log_->read(from, kBatchEntries, 64ULL << 20);
    if (!batch.ok() || batch->entries.empty()) {
      if (!batch.ok() && batch.status().code() == store::StatusCode::kCorruption) {
        *corrupt_index = first_corrupt_index(*log_, from, kBatchEntries);
      }
      *problem = "looking for configuration entries at index " + std::to_string(from) + ": " +
                 batch.status().to_string();
      return false;
    }
    for (const store::EntryView& entry : batch->entries) {
      if (entry.meta.type == store::EntryType::kConfig) {
        *problem = missing + ", but the log holds configuration entry " +
                   std::to_string(entry.meta.index) +
                   ": the configuration in force is not the bootstrap one " +
                   raft::to_string(bootstrap) + ", and the record of it is lost" + kRemedy;
        return false;
      }
    }
    from = batch->entries.back().meta.index + 1;
  }
  // An install completed at this open wrote the snapshot's configuration (load_snapshot_state): with
  // no configuration entry after it, that is the one in force.
  if (!conf_state_file_->current().empty()) return true;
  if (first > 1 && first_index_conf_ && !raft::same_members(*first_index_conf_, bootstrap)) {
    *problem = missing + ", but the log starts at " + std::to_string(first) + " and " +
               config_.data_dir + "/SNAPSHOT names the configuration in force at " +
               std::to_string(first - 1) + ": " + raft::to_string(*first_index_conf_) +
               ", not the bootstrap one " + raft::to_string(bootstrap) + kRemedy;
    return false;
  }
  spdlog::warn(
      "node {}: {} beside a log of [{}, {}] that holds no configuration entry{}: taking the "
      "bootstrap configuration {}, as for a directory from before membership changes, and "
      "recording it",
      config_.node_id, missing, first, last,
      first > 1 && !first_index_conf_
          ? " (the log is trimmed and SNAPSHOT does not name the configuration before it)"
          : "",
      raft::to_string(bootstrap));
  return true;
}

bool Replica::write_bootstrap_conf_record(NodeError* error) {
  if (!conf_state_file_->current().empty()) return true;
  if (store::Status st = conf_state_file_->write({raft::ConfRecord{0, 0, config_.raft.initial_conf}});
      !st.ok()) {
    *error = make_error(ErrorCode::kInternal,
                        "writing the bootstrap configuration record (CONFSTATE): " + st.to_string());
    return false;
  }
  return true;
}

}  // namespace raftlog::replica

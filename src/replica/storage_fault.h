// Storage faults that break Raft's durability assumption (docs/storage-format.md, "Storage faults").
//
// Raft assumes a node never loses what it made durable: a vote it granted, an entry it acknowledged.
// A flipped bit, a lost or truncated file or a misbehaving disk breaks that. A node that restarted
// with entries missing that it may have acknowledged must not vote as if it never had them: its
// vote could elect a leader without an entry that only it and the old leader held, and that entry,
// committed and acknowledged to a client, would be lost. So such a node restarts catching up
// (raft::Config::promised_index): it does not campaign, grants no votes and its acknowledgements do
// not count toward commit until its log again reaches everything it may have promised (the idea of
// Protocol-Aware Recovery, Alagappan et al., FAST 2018).
//
// assess_storage_fault() decides, from what recovery found, whether that is the case. Only evidence
// that durable data was lost counts: a cluster-wide power cut tears every node's unsynced tail, and
// treating that as a fault would leave every node catching up and none able to lead.
#pragma once

#include <cstdint>
#include <string>

#include "store/commit_log.h"

namespace raftlog::replica {

struct RecoveryFacts {
  store::RecoveryReport report;
  std::uint64_t checkpoint_commit_index = 0;  // the commit index the store's checkpoint held
  std::uint64_t recovered_last_index = 0;
  std::uint64_t hard_state_term = 0;
  std::uint64_t last_log_term = 0;
  bool sync_flush = true;  // async mode acknowledges before a sync: it never vouched for durability
  bool single_member = false;  // nobody to catch up from
  // True when the machine did not restart since the log was last open (same boot id): the page cache
  // survived, so a process crash can tear at most the entry being written, and valid entries after a
  // bad one mean corruption, not a torn tail.
  bool same_boot = false;
};

struct StorageFault {
  bool lost_durable_entries = false;
  std::uint64_t promised_index = 0;  // raft::Config::promised_index
  std::uint64_t promised_term = 0;   // raft::Config::promised_term
  std::string description;           // why, for logs and status ("" when nothing was lost)
};

StorageFault assess_storage_fault(const RecoveryFacts& facts);

// The kernel's boot id (/proc/sys/kernel/random/boot_id), or "" when unknown.
std::string current_boot_id();

// Compares `boot_id` with the one recorded in DATA_DIR/BOOT (DurableRecordFile: checksummed, payload
// u32 version 1 then the id's bytes, at most 64) at the previous open, then records `boot_id`.
// Returns true only when both are known and equal; any problem reading the file counts as "another
// boot" (the conservative answer: no fault is then inferred from a torn-looking tail).
bool same_boot_as_last_open(const std::string& data_dir, const std::string& boot_id);

}  // namespace raftlog::replica

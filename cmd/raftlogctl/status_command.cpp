// `raftlogctl status [--watch]`: every member's view (role, term, leader, indexes, disk, snapshot
// transfers, per-peer lag and last contact), as text or JSON (split from cluster_commands.cpp).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/client.h"
#include "cluster_commands.h"
#include "cluster_flags.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

// "1, 2, 3" for text output; "[1,2,3]" for JSON.
std::string id_list(const std::vector<std::uint64_t>& ids) {
  std::string out;
  for (std::uint64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}
std::string json_ids(const std::vector<std::uint64_t>& ids) {
  std::string out = "[";
  for (std::uint64_t id : ids) out += (out.size() == 1 ? "" : ",") + std::to_string(id);
  return out + "]";
}

// `status --watch` refresh interval bounds: faster only loads the nodes, slower is not watching.
constexpr std::uint64_t kMinWatchIntervalMs = 100;
constexpr std::uint64_t kMaxWatchIntervalMs = 3'600'000;

}  // namespace

// --- status --------------------------------------------------------------------------------------
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// A snapshot transfer as JSON (null when there is none).
std::string json_snapshot(const std::optional<client::SnapshotTransfer>& transfer) {
  if (!transfer) return "null";
  return "{\"state\":" + json_string(transfer->state) +
         ",\"peer\":" + std::to_string(transfer->peer) +
         ",\"index\":" + std::to_string(transfer->index) +
         ",\"term\":" + std::to_string(transfer->term) +
         ",\"bytes_done\":" + std::to_string(transfer->bytes_done) +
         ",\"bytes_total\":" + std::to_string(transfer->bytes_total) +
         ",\"bytes_skipped\":" + std::to_string(transfer->bytes_skipped) +
         ",\"resume_missed\":" + json_string(transfer->resume_missed) + "}";
}

// "index 812, 3145728 of 9437184 bytes (33%)"
std::string snapshot_progress_text(const client::SnapshotTransfer& transfer) {
  std::string text = "index " + std::to_string(transfer.index) + ", " +
                     std::to_string(transfer.bytes_done) + " of " +
                     std::to_string(transfer.bytes_total) + " bytes";
  if (transfer.bytes_total > 0) {
    text += " (" + std::to_string(transfer.bytes_done * 100 / transfer.bytes_total) + "%)";
  }
  if (transfer.bytes_skipped > 0) {
    text += ", resumed after " + std::to_string(transfer.bytes_skipped) + " bytes";
  }
  if (!transfer.resume_missed.empty()) {
    text += ", not resumed from the follower's partial (" + transfer.resume_missed + ")";
  }
  return text;
}

// The ROLE column holds the longest role name ("pre-candidate") and a space.
constexpr int kRoleColumn = 15;

// The DISK column: the file system's use at the node's last probe, "!" past its high watermark;
// "-" from a node that does not report it.
// Whether the node is a learner (receives the log, does not vote) by its own configuration.
bool is_learner(const client::NodeStatus& s) {
  return std::find(s.learners.begin(), s.learners.end(), s.node_id) != s.learners.end();
}

// The ROLE column: the Raft role, but "learner" for a learner's follower role (drills6 L5: a
// learner's row said "follower", and only the learners list told).
std::string role_column(const client::NodeStatus& s) {
  if (s.role == client::Role::kFollower && is_learner(s)) return "learner";
  return std::string(client::to_string(s.role));
}

std::string disk_column(const client::NodeStatus& s) {
  if (s.disk_high_watermark <= 0.0) return "-";
  return std::to_string(static_cast<int>(s.disk_used_ratio * 100 + 0.5)) + "%" +
         (s.disk_over_high_watermark ? "!" : "");
}

// The line under a node past its high watermark: what it does about it (docs/operations.md, "Disk
// watermarks").
std::string disk_watermark_text(const client::NodeStatus& s) {
  char used[128];
  std::snprintf(used, sizeof used, "%.1f%% used, past its high watermark %.1f%%",
                s.disk_used_ratio * 100, s.disk_high_watermark * 100);
  std::string text = "DISK " + std::string(used) + ": ";
  if (s.role != client::Role::kLeader) {
    return text + "reports no room to its leader (it is not handed leadership; it still takes "
                  "what the leader sends and stops if the disk fills)";
  }
  text += "refusing appends (DISK_WATERMARK)";
  if (s.disk_keeping_leadership) {
    // Not "no follower reports room": one with room that has not acknowledged this leader's
    // appends is not chosen either (review of mend2, L2); the peers' lines show their room.
    text += "; no follower with room acknowledges this leader's appends: keeping leadership, so the "
            "cluster takes no appends";
  } else if (s.disk_handover_wait_ms != 0) {
    // Failover review L-4: not "handing" while it waits out the bound between two handovers.
    text += "; a follower reports room: waiting " + std::to_string(s.disk_handover_wait_ms) +
            " ms before handing leadership to it (at most one handover per 10 s), so the cluster "
            "takes no appends meanwhile";
  } else {
    text += "; handing leadership to a follower with room";
  }
  return text;
}

// The line under a follower catching up to its leader's commit index (drills7 L1: a voter 15,000
// entries behind said nothing of it), "" for any other node. A learner on a node older than
// catching_up_to_leader_commit sends only learner_catching_up_to_index, and no gap.
std::string behind_leader_text(const client::NodeStatus& s) {
  const std::uint64_t to = s.catching_up_to_leader_commit != 0 ? s.catching_up_to_leader_commit
                                                               : s.learner_catching_up_to_index;
  if (to == 0) return "";
  std::string text = std::string(is_learner(s) ? "LEARNER " : "") +
                     "CATCHING UP to the commit index " + std::to_string(to) +
                     " its leader named";
  if (s.behind_leader_commit_entries != 0) {
    text += ", " + std::to_string(s.behind_leader_commit_entries) + " entries behind";
  }
  return text + ": not serving yet (SERVING again once its log reaches that index)";
}

// One round of `status`: every endpoint's answer. Returns the number of unreachable endpoints.
int print_status(client::Client& c, const Common& common, const cli::Io& io) {
  const std::vector<client::EndpointStatus> all = c.status_all();
  int unreachable = 0;
  if (common.headers()) {
    io.out << std::left << std::setw(22) << "ENDPOINT" << std::setw(5) << "ID"
           << std::setw(kRoleColumn) << "ROLE" << std::setw(7) << "TERM" << std::setw(7)
           << "LEADER" << std::setw(10) << "FIRST" << std::setw(10) << "LAST" << std::setw(10)
           << "COMMIT" << std::setw(10) << "FLUSHED" << std::setw(7) << "MODE" << std::setw(7)
           << "DISK"
           << "VERSION\n";
  }
  for (const client::EndpointStatus& e : all) {
    if (!e.status.ok()) {
      ++unreachable;
      if (common.json) {
        io.out << "{\"endpoint\":" << json_string(e.endpoint)
               << ",\"error\":" << json_string(e.status.status().message()) << ",\"down\":"
               << json_string(describe_unreachable(client::to_string(e.status.status().code()),
                                                   e.status.status().message()))
               << "}\n";
      } else {
        io.out << std::left << std::setw(22) << e.endpoint << unreachable_text(e.status.status())
               << "\n";
      }
      continue;
    }
    const client::NodeStatus& s = e.status.value();
    if (common.json) {
      io.out << "{\"endpoint\":" << json_string(e.endpoint) << ",\"id\":" << s.node_id
             << ",\"role\":" << json_string(client::to_string(s.role))
             << ",\"learner\":" << (is_learner(s) ? "true" : "false") << ",\"term\":" << s.term
             << ",\"leader_id\":" << s.leader_id
             << ",\"leader_address\":" << json_string(s.leader_address)
             << ",\"first_index\":" << s.first_index << ",\"last_index\":" << s.last_index
             << ",\"commit_index\":" << s.commit_index << ",\"flushed_index\":" << s.flushed_index
             << ",\"flush_mode\":" << json_string(client::to_string(s.flush_mode))
             << ",\"catching_up\":" << (s.catching_up ? "true" : "false")
             << ",\"catching_up_to_index\":" << s.catching_up_to_index
             << ",\"storage_fault\":" << json_string(s.storage_fault)
             << ",\"unvouched\":" << (s.unvouched ? "true" : "false")
             << ",\"unvouched_hint\":" << json_string(s.unvouched_hint)
             << ",\"committed_conflict\":" << json_string(s.committed_conflict)
             << ",\"second_leader\":" << json_string(s.second_leader)
             << ",\"leadership_refused\":" << json_string(s.leadership_refused)
             << ",\"stranded_below_index\":" << s.stranded_below_index
             << ",\"removed\":" << (s.removed ? "true" : "false")
             << ",\"removed_by\":" << s.removed_by
             << ",\"disk_used_ratio\":" << s.disk_used_ratio
             << ",\"disk_high_watermark\":" << s.disk_high_watermark
             << ",\"disk_over_high_watermark\":" << (s.disk_over_high_watermark ? "true" : "false")
             << ",\"disk_keeping_leadership\":" << (s.disk_keeping_leadership ? "true" : "false")
             << ",\"disk_handover_wait_ms\":" << s.disk_handover_wait_ms
             << ",\"voters\":" << json_ids(s.voters) << ",\"learners\":" << json_ids(s.learners)
             << ",\"learner_catching_up_to_index\":" << s.learner_catching_up_to_index
             << ",\"catching_up_to_leader_commit\":" << s.catching_up_to_leader_commit
             << ",\"behind_leader_commit_entries\":" << s.behind_leader_commit_entries
             << ",\"not_serving_reason\":" << json_string(s.not_serving_reason)
             << ",\"corrupt_index\":" << s.corrupt_index
             << ",\"scrub_bytes_verified\":" << s.scrub_bytes_verified
             << ",\"scrub_passes\":" << s.scrub_passes
             << ",\"derived_indexed_through\":" << s.derived_indexed_through
             << ",\"derived_lag_entries\":" << s.derived_lag_entries
             << ",\"derived_problem\":" << json_string(s.derived_problem)
             << ",\"groups_applied_through\":" << s.groups_applied_through
             << ",\"groups_retention_hold\":" << s.groups_retention_hold
             << ",\"groups_bad_commits\":" << s.groups_bad_commits
             << ",\"groups_refused_commits\":" << s.groups_refused_commits
             << ",\"version\":" << json_string(s.version)
             << ",\"revision\":" << json_string(s.revision)
             << ",\"receiving_snapshot\":" << json_snapshot(s.receiving_snapshot)
             << ",\"snapshots_sent\":" << s.snapshots_sent
             << ",\"snapshots_above_first_index\":" << s.snapshots_above_first_index
             << ",\"snapshots_abandoned\":" << s.snapshots_abandoned
             << ",\"snapshots_received\":" << s.snapshots_received
             << ",\"snapshot_chunks_refused\":" << s.snapshot_chunks_refused
             << ",\"snapshot_encodes\":" << s.snapshot_encodes
             << ",\"snapshot_encodings_reused\":" << s.snapshot_encodings_reused
             << ",\"snapshots_resumed\":" << s.snapshots_resumed
             << ",\"snapshot_bytes_skipped\":" << s.snapshot_bytes_skipped
             << ",\"snapshot_partials_continued\":" << s.snapshot_partials_continued
             << ",\"snapshot_partials_restored\":" << s.snapshot_partials_restored
             << ",\"snapshot_bytes_restored\":" << s.snapshot_bytes_restored
             << ",\"snapshot_partial_files_dropped\":" << s.snapshot_partial_files_dropped
             << ",\"peers\":[";
      for (std::size_t i = 0; i < s.peers.size(); ++i) {
        const client::PeerStatus& p = s.peers[i];
        io.out << (i == 0 ? "" : ",") << "{\"id\":" << p.id << ",\"match_index\":" << p.match_index
               << ",\"lag_entries\":" << p.lag_entries
               << ",\"last_contact_ms\":" << p.last_contact_ms
               << ",\"probing\":" << (p.probing ? "true" : "false")
               << ",\"lag_bytes\":" << p.lag_bytes
               << ",\"behind_first_index\":" << (p.behind_first_index ? "true" : "false")
               << ",\"disk_over_watermark\":" << (p.disk_over_watermark ? "true" : "false")
               << ",\"snapshot\":" << json_snapshot(p.snapshot) << "}";
      }
      io.out << "]}\n";
      continue;
    }
    io.out << std::left << std::setw(22) << e.endpoint << std::setw(5) << s.node_id
           << std::setw(kRoleColumn) << role_column(s) << std::setw(7) << s.term
           << std::setw(7) << s.leader_id << std::setw(10) << s.first_index << std::setw(10)
           << s.last_index << std::setw(10) << s.commit_index << std::setw(10) << s.flushed_index
           << std::setw(7) << client::to_string(s.flush_mode) << std::setw(7) << disk_column(s)
           << (s.version.empty() ? std::string("-") : s.version + " (" + s.revision + ")") << "\n";
    if (s.disk_over_high_watermark) io.out << "    " << disk_watermark_text(s) << "\n";
    if (!s.committed_conflict.empty()) {
      io.out << "    COMMITTED ENTRY CONFLICT: " << s.committed_conflict
             << ": not serving (docs/operations.md)\n";
    }
    if (!s.second_leader.empty()) {
      io.out << "    SECOND LEADER OF A TERM: " << s.second_leader
             << ": not serving (docs/operations.md, \"A second leader of a term\")\n";
    }
    if (!s.leadership_refused.empty()) {
      io.out << "    LEADERSHIP REFUSED: " << s.leadership_refused
             << " (docs/operations.md, \"A second leader of a term\")\n";
    }
    if (s.unvouched) {
      // While it catches up, storage_fault carries the node's own reason (an empty data directory,
      // a lost log/, a restart before it was caught up: amnesia2 review L4); before any leader
      // reached it, the flag alone says it (the sentence names both losses).
      io.out << "    UNVOUCHED: "
             << (s.storage_fault.empty()
                     ? std::string("started with an empty log (an empty data directory, or its "
                                   "log/ lost): waiting for a leader to catch it up before it "
                                   "votes")
                     : s.storage_fault)
             << (s.catching_up ? " (catching up to index " +
                                     std::to_string(s.catching_up_to_index) + ")"
                               : std::string())
             << "\n";
    // drills7 H4: with a majority's logs lost, nothing is ever elected, and "no leader" alone
    // read as an election in progress.
    if (!s.unvouched_hint.empty()) io.out << "    " << s.unvouched_hint << "\n";
    } else if (s.catching_up) {
      io.out << "    CATCHING UP to index " << s.catching_up_to_index << " after a storage fault ("
             << (s.storage_fault.empty() ? std::string("reason not reported") : s.storage_fault)
             << "): not voting, not counted toward commit\n";
    }
    if (std::string behind = behind_leader_text(s); !behind.empty()) io.out << "    " << behind << "\n";
    if (s.receiving_snapshot) {
      const client::SnapshotTransfer& r = *s.receiving_snapshot;
      if (r.state == "installing") {
        io.out << "    INSTALLING snapshot of index " << r.index << " (" << r.bytes_total
               << " bytes) from node " << r.peer << ": not serving yet\n";
      } else {
        io.out << "    RECEIVING snapshot from node " << r.peer << ": " << snapshot_progress_text(r)
               << (s.snapshot_bytes_restored > 0
                       ? ", " + std::to_string(s.snapshot_bytes_restored) +
                             " bytes restored from disk at start"
                       : std::string())
               << ": not serving yet\n";
      }
    }
    if (s.removed && s.removed_by != 0) {
      io.out << "    REMOVED: member " << s.removed_by
             << " says a committed change retired this node's id (its log lacks that change): "
                "not serving, not campaigning; confirm with `members list`, then stop it "
                "(docs/operations.md, \"Membership\")\n";
    } else if (s.removed) {
      io.out << "    REMOVED: a committed change removed this node (its campaigns stay harmless): "
                "confirm with `members list`, then stop it (docs/operations.md, "
                "\"Membership\")\n";
    }
    if (s.stranded_below_index != 0 && !s.receiving_snapshot) {
      io.out << "    STRANDED: needs entries below index " << s.stranded_below_index
             << ", which the leader no longer holds; waiting for its snapshot (docs/operations.md, "
                "\"Catching up from a snapshot\")\n";
    }
    if (s.corrupt_index != 0) {
      io.out << "    CORRUPT entry " << s.corrupt_index
             << " found: not served; restart the node to repair it from its peers\n";
    }
    if (s.role == client::Role::kLeader && !s.voters.empty()) {
      io.out << "    configuration: voters " << id_list(s.voters);
      if (!s.learners.empty()) io.out << "; learners " << id_list(s.learners);
      io.out << "\n";
    }
    for (const client::PeerStatus& p : s.peers) {
      io.out << "    peer " << p.id << ": match " << p.match_index << ", lag " << p.lag_entries
             << " entries, last contact " << p.last_contact_ms << " ms ago"
             << (p.probing ? ", probing" : "")
             << (p.disk_over_watermark ? ", DISK PAST ITS HIGH WATERMARK (reports no room)" : "")
             << (p.behind_first_index && !p.snapshot
                     ? ", NEEDS TRIMMED ENTRIES: a snapshot is due (docs/operations.md)"
                     : "");
      if (p.snapshot) {
        io.out << ", SNAPSHOT " << p.snapshot->state << ": " << snapshot_progress_text(*p.snapshot);
      }
      io.out << "\n";
    }
  }
  return unreachable;
}

}  // namespace

int run_status(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  Common common;
  bool watch = false;
  std::uint64_t interval_ms = 1000;
  std::uint64_t count = 0;
  cli::FlagSet flags(
      std::string(command_path),
      "Show every member's view: role, term, leader, indexes, per-peer lag and last contact.");
  common.add_to(flags);
  flags.bool_flag("watch", &watch,
                  "refresh every --interval-ms until interrupted (or --count rounds)");
  flags.uint_flag("interval-ms", &interval_ms, "MS",
                  "with --watch: time between rounds (" + std::to_string(kMinWatchIntervalMs) +
                      ".." + std::to_string(kMaxWatchIntervalMs) + ")");
  flags.uint_flag("count", &count, "N",
                  "with --watch: stop after N rounds (0 = until interrupted)");
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  if (interval_ms < kMinWatchIntervalMs || interval_ms > kMaxWatchIntervalMs) {
    io.err << "--interval-ms must be in [" << kMinWatchIntervalMs << ", " << kMaxWatchIntervalMs
           << "]\n";
    return cli::kExitUsage;
  }
  if (!watch && (flags.was_set("interval-ms") || flags.was_set("count"))) {
    io.err << "--interval-ms and --count need --watch\n";
    return cli::kExitUsage;
  }
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  const std::size_t endpoints = client::parse_endpoints(common.endpoints).value().size();
  if (!watch) {
    return print_status(*c, common, io) == static_cast<int>(endpoints) ? cli::kExitFailure
                                                                       : cli::kExitOk;
  }
  // Watching: rounds until interrupted (SIGINT ends the process) or `count` rounds; the exit code is
  // that of the last round.
  int unreachable = 0;
  for (std::uint64_t round = 0; count == 0 || round < count; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    if (!common.json) io.out << "--- " << utc_now() << "\n";
    unreachable = print_status(*c, common, io);
    io.out.flush();
  }
  return unreachable == static_cast<int>(endpoints) ? cli::kExitFailure : cli::kExitOk;
}

}  // namespace raftlog::ctl

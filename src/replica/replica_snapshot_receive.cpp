// Replica: a follower receiving its leader's snapshot (docs/design.md, "Snapshot transfer";
// replica_snapshot.cpp, "THE INSTALL"). What holds the Raft loop is kept short: a snapshot of tens
// of MiB takes about a second to decode, write and sync and to build tables from, longer than an
// election timeout, and a loop held that long answers no heartbeat, read or status meanwhile.
//
// PREPARED OFF THE LOOP. A kSnapshot the core would install (its term not stale, its point above the
// commit index and not in this node's log) does not reach the core at once: its data goes to the
// off-loop executor (ReplicaDeps::off_loop), whose job, with no access to the replica, decodes it,
// checks that it describes the snapshot it travels in (the admission: a refused one never reaches
// the core), writes it to SNAPSHOT.install and syncs it (snapshot_data.h), and builds the new dedup
// table and topic table. Back on the loop (finish_snapshot_preparation) the node section is checked
// (ReplicaDeps::check_snapshot_section runs on the loop) and the message is stepped into the core;
// the install that follows in the same process() (Ready step 0) renames SNAPSHOT.install to
// SNAPSHOT.next with a directory fsync, resets the log, rewrites CONFSTATE and TOPICSTATE and moves
// the prepared tables in. Only data the job checked is installed: the prepared state names the
// message's buffer, and the install takes it only for that same buffer.
//
// WHILE IT IS PREPARED the message is in effect delayed, as a network could delay it, and Raft's
// safety does not depend on when it arrives. The loop steps everything else: heartbeats are answered
// (the leader's progress for this node waits in its snapshot state, sending heartbeats only), reads
// and status go on. Appends from the snapshot's leader in its term are dropped (counted): the core
// would match them against the log the install replaces, and could acknowledge entries of it; lost
// appends are sent again, and the leader sends nothing else until the snapshot is answered. The
// preparation is dropped (its job's result ignored, SNAPSHOT.install removed) when the core's term
// passes the message's (a new leader, this node's own election), when a snapshot of another point
// or term arrives (it is prepared instead), when the job fails (a write error such as a full disk:
// logged, counted; the leader sends the snapshot again after its retry timeout), or when the node
// stops (the next open removes a SNAPSHOT.install left behind). The same snapshot again (the
// leader's retry while this one is prepared) changes nothing.
//
// Bounded: one snapshot prepared at a time (the newest), one job outstanding (a preparation waits
// for an abandoned job's `done`, for a leader's encoding that was still out, or for the install of
// the one prepared before, whose SNAPSHOT.install it would overwrite), and the message's data is at
// most kMaxSnapshotDataBytes (the transport's bound). A dropped job frees its buffer and decoded
// data after its decode or its write: at worst two buffers, one decoded copy and two dedup tables
// at once (docs/design.md). Without an executor the job runs inline, within step(), as the install
// did before.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "replica/durability_rules.h"
#include "replica/replica.h"

namespace raftlog::replica {
namespace {

// Wall time since `start`, for SnapshotStats::InstallTimes.
std::chrono::microseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// The same snapshot: a retry of the leader (the same point and term, the same size and checksum
// when the message carries one). Data of the same point may still differ (a node section as of a
// later boundary): either is the leader's state at that point, and the one prepared is installed.
bool same_snapshot(const raft::Message& a, const raft::Message& b) {
  return a.from == b.from && a.term == b.term && a.snapshot->index == b.snapshot->index &&
         a.snapshot->term == b.snapshot->term && a.snapshot->conf == b.snapshot->conf &&
         a.snapshot->data.size() == b.snapshot->data.size() &&
         a.snapshot->data_crc32c == b.snapshot->data_crc32c;
}

// Why `data` cannot be installed for `snapshot` ("" when it can): it must describe the very
// snapshot it travels in.
std::string snapshot_data_mismatch(const SnapshotData& data, const raft::Snapshot& snapshot) {
  if (data.index != snapshot.index || data.term != snapshot.term ||
      data.origin != SnapshotOrigin::kInstalled ||
      data.conf != snapshot.conf) {  // addresses too: CONFSTATE persists the data's
    return "its data describes index " + std::to_string(data.index) + " term " +
           std::to_string(data.term) + " " + raft::to_string(data.conf);
  }
  return {};
}

}  // namespace

bool Replica::core_would_install(const raft::Message& message) const {
  // Raft::Impl::handle_snapshot's rules, in its order (SnapshotInstallOffLoopTest.
  // ASnapshotIsPreparedExactlyWhenTheCoreInstallsIt drives each). Erring one way prepares a
  // snapshot the core then ignores (dropped at the end of process()); the other way the core would
  // install unprepared data, which install_snapshot then prepares on the loop.
  const raft::Snapshot& snapshot = *message.snapshot;
  // Raft::Impl::step's checks before any handler: not for this node, or a term none may adopt.
  // (A retired sender or a removed node is answered before the handler too, and is not mirrored:
  // such a snapshot is prepared for nothing.)
  if (message.to != raft_->id() || message.from == raft_->id() || message.from == raft::kNoNode ||
      message.term > raft::kMaxTerm) {
    return false;
  }
  if (message.term < raft_->term()) return false;  // stale: the core drops it
  // A leader is the only one of its term: it ignores a kSnapshot of that term.
  if (message.term == raft_->term() && raft_->role() == raft::Role::kLeader) return false;
  // A second leader of our term (another node than the term's leader we know, or that node with
  // another leadership nonce) is refused whole (raft_term_leader.cpp, the core's own test):
  // preparing its data would write for nothing and abandon the real
  // leader's preparation in progress.
  if (raft_->is_second_leader_message(message)) return false;
  if (snapshot.index == 0 || snapshot.term == 0 || snapshot.term > message.term ||
      !raft::is_valid_conf(snapshot.conf)) {
    return false;  // contradicts itself: the core drops it
  }
  if (snapshot.index <= raft_->commit_index()) return false;
  // A point this node's log holds is answered like an append, without an install (receive_snapshot
  // handled the core's pending Ready first: the store's log is the core's).
  if (snapshot.index >= log_->first_index() && snapshot.index <= log_->last_index()) {
    auto term = log_->term_at(snapshot.index);
    if (term.ok() && *term == snapshot.term) return false;
  }
  return true;
}

void Replica::receive_snapshot(raft::Message message) {
  // The core matches the point against its own log, which runs ahead of the store's until its
  // Ready is handled: an append of this input batch may have cut and replaced the entry there.
  // Handled first, the store's log is the core's.
  if (raft_->has_ready()) process();
  if (failed_) return;
  if (!core_would_install(message)) {
    // The core reads only its index, term and configuration, and checks those itself.
    (void)guard_core([&] { raft_->step(std::move(message)); });
    return;
  }
  queue_incoming_snapshot(std::move(message));
}

void Replica::queue_incoming_snapshot(raft::Message message) {
  if (incoming_snapshot_) {
    if (same_snapshot(incoming_snapshot_->message, message)) {
      ++snapshot_stats_.install_retries_ignored;  // answered once the one prepared is installed
      return;
    }
    abandon_incoming_snapshot("another snapshot arrived");
  }
  IncomingSnapshot in;
  in.generation = ++incoming_generation_;
  in.message = std::move(message);
  incoming_snapshot_ = std::move(in);
  snapshot_stats_.install_preparing = 1;
  start_snapshot_preparation();
}

bool Replica::holds_back_for_incoming_snapshot(const raft::Message& message) {
  if (!incoming_snapshot_ || message.type != raft::MessageType::kAppend) return false;
  const raft::Message& snapshot = incoming_snapshot_->message;
  if (message.from != snapshot.from || message.term != snapshot.term) return false;
  ++snapshot_stats_.appends_dropped_while_preparing;
  return true;
}

void Replica::check_incoming_snapshot_current() {
  if (incoming_snapshot_ && raft_->term() > incoming_snapshot_->message.term) {
    abandon_incoming_snapshot("a newer term began");
  }
}

void Replica::start_snapshot_preparation() {
  // A prepared snapshot not installed yet still owns SNAPSHOT.install (its install, in the next
  // process(), renames it): the next job writes that file only after it (process() retries).
  if (!incoming_snapshot_ || incoming_snapshot_->started || off_loop_outstanding_ != 0 ||
      prepared_snapshot_ || failed_) {
    return;  // none waits, or it waits for the outstanding job's `done` or the install
  }
  IncomingSnapshot& in = *incoming_snapshot_;
  in.started = true;
  const raft::Snapshot& snapshot = *in.message.snapshot;
  auto prepared = std::make_shared<PreparedSnapshot>();
  prepared->bytes = snapshot.data;
  raft::Snapshot expected;  // what the data must describe (without the data itself)
  expected.index = snapshot.index;
  expected.term = snapshot.term;
  expected.conf = snapshot.conf;
  auto job = [prepared, expected = std::move(expected), env = config_.store.env,
              dir = config_.data_dir, max_clients = config_.dedup_max_clients,
              sequences = config_.dedup_sequences_per_client, cancelled = in.cancelled] {
    if (cancelled->load()) {
      prepared->bytes = raft::Payload();  // the message's buffer: its memory goes now
      return;
    }
    prepare_snapshot(*prepared, expected, env, dir, max_clients, sequences, cancelled.get());
  };
  // Not run when the replica is gone first: the next open removes its file.
  auto done = [this, generation = in.generation, prepared] {
    finish_snapshot_preparation(generation, std::move(*prepared));
  };
  if (!hand_off(std::move(job), std::move(done))) {
    abandon_incoming_snapshot("the off-loop worker refused its preparation");
  }
}

// Off the loop: reads nothing of the replica's. A job dropped meanwhile (`cancelled`, set on the
// loop) stops after its decode or its write and frees what it holds at once: the snapshot that
// replaced it waits for its `done` with another buffer of up to kMaxSnapshotDataBytes.
void Replica::prepare_snapshot(PreparedSnapshot& out, const raft::Snapshot& expected,
                               store::Env* env, const std::string& data_dir,
                               std::size_t max_clients, std::size_t sequences_per_client,
                               const std::atomic<bool>* cancelled, bool write_install_file) {
  const auto dropped = [&] {
    if (cancelled == nullptr || !cancelled->load()) return false;
    out.bytes = raft::Payload();
    out.problem = "dropped while prepared";  // not read: the loop ignores a dropped job's result
    return true;
  };
  const auto decode_start = std::chrono::steady_clock::now();
  auto data = decode_snapshot_data(out.bytes.view());
  out.times.decode = since(decode_start);
  if (!data.ok()) {
    out.problem = data.status().to_string();
    return;
  }
  out.problem = snapshot_data_mismatch(*data, expected);
  if (!out.problem.empty() || dropped()) return;
  if (write_install_file) {
    const auto write_start = std::chrono::steady_clock::now();
    out.file_written = true;  // a failed write may leave part of it
    out.write = write_snapshot_install(env, data_dir, out.bytes.view(),
                                       rules::install_syncs_prepared_snapshot());
    out.times.snapshot_file = since(write_start);
    if (!out.write.ok() || dropped()) return;
  }
  const auto tables_start = std::chrono::steady_clock::now();
  out.dedup = std::make_unique<DedupTable>(max_clients, sequences_per_client);
  out.dedup->replace(data->index + 1, data->dedup_view_start, data->dedup_clients,
                     data->spliced_view_starts);
  data->dedup_clients = {};  // its memory goes before the result waits for the loop
  out.topics.reset(data->index, data->topics);
  out.topic_state_table = out.topics.table_at(data->index);  // the install's TOPICSTATE, moved
  out.data = std::move(*data);
  out.times.tables = since(tables_start);
}

void Replica::finish_snapshot_preparation(std::uint64_t generation, PreparedSnapshot prepared) {
  const auto remove_file = [&] {
    if (!prepared.file_written) return;
    if (store::Status st = remove_snapshot_install(config_.store.env, config_.data_dir); !st.ok()) {
      spdlog::warn("node {}: removing SNAPSHOT.install: {}", config_.node_id, st.to_string());
    }
  };
  if (!incoming_snapshot_ || incoming_snapshot_->generation != generation || failed_) {
    remove_file();                 // abandoned: nothing of it is installed
    start_snapshot_preparation();  // a newer one waited for this job's `done`
    return;
  }
  IncomingSnapshot in = std::move(*incoming_snapshot_);
  incoming_snapshot_.reset();
  snapshot_stats_.install_preparing = 0;
  ++snapshot_stats_.decodes;
  const raft::Snapshot& snapshot = *in.message.snapshot;
  std::string problem = prepared.problem;
  if (problem.empty() && prepared.write.ok() && !prepared.data.section.empty() &&
      deps_.check_snapshot_section) {
    problem = deps_.check_snapshot_section(prepared.data.section, prepared.data.index);
  }
  if (!problem.empty()) {
    remove_file();
    refuse_snapshot(in.message, problem);
    return;
  }
  if (!prepared.write.ok()) {
    remove_file();
    ++snapshot_stats_.install_write_failures;
    if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::error(
          "node {}: cannot install the snapshot of index {} term {} from node {}: writing "
          "SNAPSHOT.install: {}; the old state is kept and the leader sends the snapshot again "
          "({} more such reports since the last line)",
          config_.node_id, snapshot.index, snapshot.term, in.message.from,
          prepared.write.to_string(), *held_back);
    }
    return;
  }
  prepared_snapshot_ = std::move(prepared);
  (void)guard_core([&] { raft_->step(std::move(in.message)); });
  // The caller's process() installs it (Ready step 0), or drops it if the core did not.
}

void Replica::refuse_snapshot(const raft::Message& message, const std::string& problem) {
  ++snapshot_stats_.refused;
  if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
    spdlog::error(
        "node {}: refusing the snapshot of index {} term {} from node {}: {} ({} more "
        "refused since the last line)",
        config_.node_id, message.snapshot->index, message.snapshot->term, message.from, problem,
        *held_back);
  }
}

void Replica::abandon_incoming_snapshot(const char* why) {
  if (!incoming_snapshot_) return;
  spdlog::info("node {}: dropping the preparation of the snapshot of index {} from node {}: {}",
               config_.node_id, incoming_snapshot_->message.snapshot->index,
               incoming_snapshot_->message.from, why);
  incoming_snapshot_->cancelled->store(true);
  // A job not handed off yet wrote nothing; one that ran or runs leaves its file to its `done`.
  incoming_snapshot_.reset();
  snapshot_stats_.install_preparing = 0;
  ++snapshot_stats_.install_preparations_dropped;
}

void Replica::discard_prepared_snapshot() {
  if (!prepared_snapshot_) return;
  // Not installed: the core answered the message without an install (its log held the point).
  prepared_snapshot_.reset();
  if (store::Status st = remove_snapshot_install(config_.store.env, config_.data_dir); !st.ok()) {
    spdlog::warn("node {}: removing SNAPSHOT.install: {}", config_.node_id, st.to_string());
  }
}

}  // namespace raftlog::replica

#include "test_cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "replica/hard_state_file.h"
#include "replica/store_log_reader.h"

namespace raftlog::raft::testing {

namespace {

constexpr std::uint32_t kTickMs = 20;
constexpr const char* kDataDir = "/data";
// Flush cycles per persist_all()/process(): each makes everything written so far durable, and only
// the Ready batches that the report of it causes can write more (a follower's commit writes nothing).
constexpr int kMaxFlushCycles = 16;

// Room to spare unless a test says how full it is (TestCluster::set_disk_used_ratio).
struct TestDisk final : replica::DiskProbe {
  double used_ratio = 0.01;
  std::optional<replica::DiskSpace> probe() override {
    return replica::DiskSpace{1ULL << 40, used_ratio};
  }
};

std::string describe(const Message& m) {
  return std::string(to_string(m.type)) + " " + std::to_string(m.from) + "->" +
         std::to_string(m.to) + " term=" + std::to_string(m.term) +
         " index=" + std::to_string(m.index) + " log_term=" + std::to_string(m.log_term) +
         " entries=" + std::to_string(m.entries.size()) + " reject=" + std::to_string(m.reject) +
         " hint=" + std::to_string(m.reject_hint) + "/" + std::to_string(m.hint_term);
}

}  // namespace

namespace {
Config solo_config() {
  Config config;
  config.id = 1;
  config.initial_conf.voters = {1};
  return config;
}
}  // namespace

SoloLeader::SoloLeader() : core(solo_config(), log, HardState{}) {
  const int bound = 2 * solo_config().election_ticks;  // a randomized timeout is below it
  for (int i = 0; i < bound && core.role() != Role::kLeader; ++i) core.tick();
}

std::vector<Entry> make_entries(Index first, const std::vector<Term>& terms) {
  std::vector<Entry> out;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    Entry e;
    e.index = first + i;
    e.term = terms[i];
    e.payload = "e" + std::to_string(e.index);
    out.push_back(e);
  }
  return out;
}

// --- NodeLog ------------------------------------------------------------------------------------

Index NodeLog::first_index() const { return node_.replica->log_reader().first_index(); }
Index NodeLog::last_index() const { return node_.replica->log_reader().last_index(); }
std::optional<Term> NodeLog::term_at(Index index) const {
  return node_.replica->log_reader().term_at(index);
}
Entry NodeLog::entry(Index index) const {
  std::vector<Entry> one = node_.replica->log_reader().entries(index, index, SIZE_MAX);
  if (one.size() != 1 || one[0].index != index) {
    ADD_FAILURE() << "node " << node_.id << " holds no entry at " << index << " (log ["
                  << first_index() << ", " << last_index() << "])";
    return Entry{};
  }
  return one[0];
}
Index NodeLog::durable_index() const { return node_.replica->log().flushed_index(); }

// --- the replica's sink and observer ------------------------------------------------------------

class TestCluster::Sender final : public replica::MessageSender {
 public:
  Sender(TestCluster& cluster, NodeId id) : cluster_(cluster), id_(id) {}
  void send(Message message) override {
    if (cluster_.snapshot_bytes_per_tick_ != 0 && message.type == MessageType::kSnapshot) {
      // A newer snapshot to the same peer starts over from byte 0, as the transport's lane does.
      cluster_.slow_snapshots_[{message.from, message.to}] = SlowSnapshot{std::move(message), 0};
      return;
    }
    cluster_.network_.push_back(std::move(message));
  }
  SnapshotSendMark snapshot_send_mark(std::uint64_t peer) override {
    const auto found = cluster_.slow_snapshots_.find({id_, peer});
    if (found == cluster_.slow_snapshots_.end()) return {};
    return SnapshotSendMark{found->second.message.snapshot->index, found->second.sent_bytes};
  }
  bool takes_stamped_snapshot_data(std::uint64_t peer) override {
    return !cluster_.older_snapshot_peers_.contains(peer);
  }

 private:
  TestCluster& cluster_;
  const NodeId id_;
};

void TestCluster::advance_snapshot_link() {
  for (auto& [ends, slow] : slow_snapshots_) {
    const std::uint64_t size = slow.message.snapshot->data.size();
    if (slow.sent_bytes >= size) continue;  // delivered; kept for its sender's mark
    slow.sent_bytes = std::min<std::uint64_t>(size, slow.sent_bytes + snapshot_bytes_per_tick_);
    if (slow.sent_bytes == size) network_.push_back(slow.message);
  }
}

class TestCluster::Observer final : public replica::ReadyObserver {
 public:
  Observer(TestCluster& cluster, TestNode& node) : cluster_(cluster), node_(node) {}
  void before_ready(const Ready& ready) override { cluster_.record_ready(node_, ready); }
  void after_ready(const Ready&) override {}

 private:
  TestCluster& cluster_;
  TestNode& node_;
};

void TestCluster::record_ready(TestNode& n, const Ready& ready) {
  if (ready.commit_index) {
    EXPECT_GE(*ready.commit_index, n.delivered_commit)
        << "commit index went backwards on node " << n.id;
    n.delivered_commit = std::max(n.delivered_commit, *ready.commit_index);
  }
  n.read_states.insert(n.read_states.end(), ready.read_states.begin(), ready.read_states.end());
  n.aborted_reads.insert(n.aborted_reads.end(), ready.aborted_reads.begin(),
                         ready.aborted_reads.end());
  n.readies.push_back(ready);
}

// --- setup --------------------------------------------------------------------------------------

TestCluster::TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak)
    : TestCluster(ids, tweak, ReplicaTweak{}) {}

TestCluster::TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak,
                         const ReplicaTweak& replica_tweak) {
  // The replicas' log lines would drown the test output; a replica that stops is reported with its
  // reason (check_failed).
  spdlog::set_level(spdlog::level::off);
  for (NodeId id : ids) add_node(id, ids, tweak, replica_tweak);
  for (NodeId id : ids) open_replica(node(id));
}

TestCluster::TestCluster(const std::vector<NodeId>& ids,
                         const std::vector<std::vector<Entry>>& logs,
                         const std::vector<HardState>& hard_states, const Tweak& tweak,
                         const ReplicaTweak& replica_tweak) {
  spdlog::set_level(spdlog::level::off);
  for (NodeId id : ids) add_node(id, ids, tweak, replica_tweak);
  for (std::size_t i = 0; i < ids.size(); ++i) seed_disk(node(ids[i]), logs[i], hard_states[i]);
  for (NodeId id : ids) open_replica(node(id));
}

TestCluster::~TestCluster() {
  // The replicas call back into this object while they close.
  for (auto& [id, n] : nodes_) n->replica.reset();
}

void TestCluster::add_node(NodeId id, const std::vector<NodeId>& ids, const Tweak& tweak,
                           const ReplicaTweak& replica_tweak) {
  auto node = std::make_unique<TestNode>();
  TestNode& n = *node;
  n.id = id;
  n.env = std::make_unique<store::MemoryEnv>();
  n.sender = std::make_unique<Sender>(*this, id);
  n.observer = std::make_unique<Observer>(*this, n);
  n.disk = std::make_unique<TestDisk>();

  replica::ReplicaConfig& c = n.config;
  c.node_id = id;
  for (NodeId member : ids) c.members[member] = "n" + std::to_string(member);
  c.data_dir = kDataDir;
  c.tick_ms = kTickMs;
  c.store.flush_mode = store::FlushMode::kSync;
  c.store.background_work = store::BackgroundWork::kStepped;
  // Small segments (rolls happen in ordinary tests; the store trims whole segments only), whose
  // largest entry still fits one.
  c.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
  c.store.max_entry_size_bytes = 60 << 10;
  c.store.preallocate_next_segment = false;
  c.store.env = n.env.get();
  c.raft.id = id;
  c.raft.initial_conf.voters = ids;
  c.raft.election_ticks = 10;
  c.raft.heartbeat_ticks = 1;
  c.raft.random_seed = 42;
  if (tweak) tweak(c.raft);
  c.election_ticks = static_cast<std::uint32_t>(c.raft.election_ticks);
  if (replica_tweak) replica_tweak(c);
  nodes_.emplace(id, std::move(node));
}

void TestCluster::seed_disk(TestNode& n, const std::vector<Entry>& log,
                            const HardState& hard_state) {
  auto hard_state_file = replica::HardStateFile::open(n.config.data_dir, n.env.get());
  ASSERT_TRUE(hard_state_file.ok()) << hard_state_file.status().to_string();
  ASSERT_TRUE((*hard_state_file)->write(hard_state).ok());
  if (log.empty()) {
    ASSERT_EQ(hard_state.commit, 0u) << "node " << n.id << ": a commit index needs a log";
    return;
  }
  auto store = store::CommitLog::open(n.config.data_dir + "/log", n.config.store);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  std::vector<store::EntryToAppend> batch;
  for (const Entry& entry : log) batch.push_back(replica::to_store_entry(entry));
  ASSERT_TRUE((*store)->append_no_wait(batch).ok());
  ASSERT_TRUE((*store)->run_flush_cycle().ok());
  ASSERT_TRUE((*store)->set_commit_index(hard_state.commit).ok());
  ASSERT_TRUE((*store)->run_checkpoint().ok());
  ASSERT_TRUE((*store)->close().ok());
}

// Queues the replica's off-loop jobs in its TestNode (TestNode::off_loop_jobs).
class TestCluster::OffLoop final : public replica::OffLoopExecutor {
 public:
  explicit OffLoop(TestNode& node) : node_(node) {}
  bool run(std::function<void()> job, std::function<void()> done) override {
    node_.off_loop_jobs.emplace_back(std::move(job), std::move(done));
    return true;
  }

 private:
  TestNode& node_;
};

void TestCluster::finish_off_loop(NodeId id) {
  TestNode& n = node(id);
  // Bounded: a job's result starts no new job by itself (the replica keeps one at a time).
  for (int i = 0; i < 16 && !n.off_loop_jobs.empty() && n.replica != nullptr; ++i) {
    auto [job, done] = std::move(n.off_loop_jobs.front());
    n.off_loop_jobs.pop_front();
    job();
    done();
    n.replica->process();
    check_failed(n);
  }
}

void TestCluster::open_replica(TestNode& n) {
  if (n.off_loop == nullptr) n.off_loop = std::make_unique<OffLoop>(n);
  n.off_loop_jobs.clear();  // a restarted replica's: its `done` would find the old one gone
  replica::ReplicaDeps deps;
  deps.off_loop = n.off_loop.get();
  deps.sender = n.sender.get();
  deps.disk = n.disk.get();
  deps.clock = [this] { return now(); };
  deps.observer = n.observer.get();
  replica::NodeError error;
  // Every start draws other leadership nonces (a driver's duty, raft::Config): a node restarted
  // wiped and elected again in a term it led is told apart from its first leadership.
  n.config.raft.leadership_nonce_seed = ++starts_;
  n.replica = replica::Replica::open(n.config, std::move(deps), &error);
  ASSERT_NE(n.replica, nullptr) << "node " << n.id << " cannot open: " << error.message;
  n.delivered_commit = n.replica->commit_index();
}

std::vector<NodeId> TestCluster::ids() const {
  std::vector<NodeId> out;
  for (const auto& [id, node] : nodes_) out.push_back(id);
  return out;
}

replica::Clock::time_point TestCluster::now() const {
  // From an hour after the epoch: a replica's periodic checks (the disk probe's) that start from a
  // zero time point then run at the first request, as they do in raftlogd.
  return replica::Clock::time_point(std::chrono::hours(1) +
                                    std::chrono::milliseconds(ticks_ * kTickMs));
}

// --- inputs -------------------------------------------------------------------------------------

Proposal TestCluster::propose(NodeId id, std::vector<std::string> payloads) {
  return propose(id, std::move(payloads), 0, 0);
}

Proposal TestCluster::propose(NodeId id, std::vector<std::string> payloads,
                             std::uint64_t client_id, std::uint64_t sequence) {
  Proposal proposal;
  replica::Replica::AppendRequest request;
  request.payloads = std::move(payloads);
  request.client_id = client_id;
  request.sequence = sequence;
  request.deadline = replica::Clock::time_point::max();  // the cluster expires nothing
  request.done = [slot = proposal.answer.slot](replica::AppendResult result) {
    *slot = std::move(result);
  };
  proposal.placement = replica(id).append(std::move(request));
  process(id);
  return proposal;
}

ReadRequest TestCluster::read_index(NodeId id) {
  ReadRequest read;
  replica::Replica::ReadIndexRequest request;
  request.deadline = replica::Clock::time_point::max();
  request.done = [slot = read.slot](replica::ReadIndexResult result) { *slot = std::move(result); };
  replica(id).read_index(std::move(request));
  process(id);
  return read;
}

TransferRequest TestCluster::transfer_leadership(NodeId id, NodeId target) {
  TransferRequest transfer;
  replica::Replica::TransferRequest request;
  request.target = target;
  request.done = [slot = transfer.slot](replica::TransferResult result) {
    *slot = std::move(result);
  };
  replica(id).transfer_leadership(std::move(request));
  process(id);
  return transfer;
}

void TestCluster::set_disk_used_ratio(NodeId id, double used_ratio) {
  static_cast<TestDisk&>(*node(id).disk).used_ratio = used_ratio;
}

NodeId TestCluster::elect_then_hand_over_to(NodeId id) {
  tick_all(30);
  const NodeId elected = leader();
  if (elected != kNoNode && elected != id) {
    (void)transfer_leadership(elected, id);
    tick_all(10);
  }
  return leader();
}

MembershipRequest TestCluster::propose_conf_change(NodeId id, ConfChange change) {
  MembershipRequest membership;
  replica::Replica::MembershipRequest request;
  request.change = change;
  request.deadline = replica::Clock::time_point::max();
  request.done = [slot = membership.slot](replica::MembershipResult result) {
    *slot = std::move(result);
  };
  replica(id).propose_conf_change(std::move(request));
  process(id);
  return membership;
}

void TestCluster::step(NodeId id, Message message) {
  replica(id).step(std::move(message));
  process(id);
}

void TestCluster::tick_unprocessed(NodeId id) {
  TestNode& n = node(id);
  ++n.ticks;
  ticks_ = std::max(ticks_, n.ticks);
  n.replica->tick();
  // As raftlogd's loop does after each tick: requests past their deadline are answered (the ones
  // TestCluster makes have none; a transfer's own deadline is the replica's).
  n.replica->expire_pending(now());
  // And its retention step (src/server/node.cpp): a trim's deletion spread over rounds goes on here
  // (with no retention configured it does nothing else).
  if (!n.replica->failed()) n.replica->apply_retention(now());
}

void TestCluster::tick(NodeId id, int times) {
  for (int i = 0; i < times; ++i) {
    tick_unprocessed(id);
    process(id);
  }
}

void TestCluster::tick_all(int times) {
  for (int i = 0; i < times; ++i) {
    for (auto& [id, n] : nodes_) tick(id);
    if (snapshot_bytes_per_tick_ != 0) advance_snapshot_link();
    deliver_all();
  }
}

// The off-loop jobs queued after the first `held` (bounded): the trim's writes. Jobs the test holds
// (hold_off_loop) stay held; the trim's own ones run past them, as on a second worker (raftlogd's
// one worker would run them after the held job).
void TestCluster::run_off_loop_jobs_after(TestNode& n, std::size_t held) {
  for (int job = 0; job < 16 && n.off_loop_jobs.size() > held && !n.replica->failed(); ++job) {
    auto [work, done] = std::move(n.off_loop_jobs[held]);
    n.off_loop_jobs.erase(n.off_loop_jobs.begin() + static_cast<std::ptrdiff_t>(held));
    work();
    done();
    n.replica->process();
  }
}

replica::TrimResult TestCluster::trim(NodeId id, Index before_index) {
  TestNode& n = node(id);
  const std::size_t held = n.hold_off_loop ? n.off_loop_jobs.size() : 0;
  replica::TrimResult result = n.replica->trim(before_index, "test:");
  // The trim's writes (TOPICSTATE, SNAPSHOT.next) go off the loop and its deletion spreads over
  // rounds: driven to the end here, as the node's worker, loop and flusher would (bounded rounds).
  // The flusher's part: the prefix truncation waits for a checkpoint it asked of the flusher
  // (CommitLog::request_checkpoint, review offloop L6), which a flush cycle writes; a node whose
  // persistence the test holds gets none, and its trim deletes nothing.
  for (int round = 0; round < 32 && !n.replica->failed(); ++round) {
    run_off_loop_jobs_after(n, held);
    n.replica->apply_retention(now());
    n.replica->process();
    if (n.env->crashed()) break;  // a power cut the test armed (crash_after_removes): no flusher
    if (!n.hold_persistence && !flush_once(n)) break;
  }
  check_failed(n);
  result.first_index = n.replica->log().first_index();
  return result;
}

replica::TrimResult TestCluster::trim_call(NodeId id, Index before_index) {
  TestNode& n = node(id);
  const std::size_t held = n.hold_off_loop ? n.off_loop_jobs.size() : 0;
  replica::TrimResult result = n.replica->trim(before_index, "test:");
  run_off_loop_jobs_after(n, held);
  check_failed(n);
  return result;
}

// --- driving ------------------------------------------------------------------------------------

void TestCluster::check_failed(const TestNode& n) {
  if (n.replica->failed())
    ADD_FAILURE() << "node " << n.id << "'s replica stopped: " << n.replica->failure_reason();
}

bool TestCluster::flush_once(TestNode& n) {
  store::CommitLog& log = n.replica->log();
  if (store::Status st = log.run_flush_cycle(); !st.ok()) {
    ADD_FAILURE() << "node " << n.id << ": flush cycle failed: " << st.to_string();
    return false;
  }
  // The checkpoint persists the commit index the replica recorded (never beyond what is durable),
  // which a restart comes back to.
  if (store::Status st = log.run_checkpoint(); !st.ok()) {
    ADD_FAILURE() << "node " << n.id << ": checkpoint failed: " << st.to_string();
    return false;
  }
  return true;
}

void TestCluster::process(NodeId id) {
  TestNode& n = node(id);
  n.replica->process();
  check_failed(n);
  if (!n.hold_off_loop) finish_off_loop(id);
  if (n.hold_persistence) return;
  for (int cycle = 0; cycle < kMaxFlushCycles; ++cycle) {
    const store::CommitLog& log = n.replica->log();
    if (log.flushed_index() >= log.last_index() || n.replica->failed()) return;
    if (!flush_once(n)) return;
    n.replica->process();
    check_failed(n);
  }
  ADD_FAILURE() << "node " << id << " kept writing through " << kMaxFlushCycles << " flush cycles";
}

void TestCluster::persist_one(NodeId id) {
  TestNode& n = node(id);
  if (!flush_once(n)) return;
  n.replica->process();
  check_failed(n);
}

void TestCluster::persist_all(NodeId id) {
  TestNode& n = node(id);
  for (int cycle = 0; cycle < kMaxFlushCycles; ++cycle) {
    persist_one(id);
    const store::CommitLog& log = n.replica->log();
    if (log.flushed_index() >= log.last_index() || n.replica->failed()) {
      if (!n.hold_persistence) process(id);
      return;
    }
  }
  ADD_FAILURE() << "node " << id << " kept writing through " << kMaxFlushCycles << " flush cycles";
}

void TestCluster::power_cut(TestNode& n) {
  // The power goes first: nothing the dying replica does afterwards reaches the disk.
  n.env->crash();
  n.replica->fail_all(replica::ErrorCode::kUnavailable, "the node crashed");
  n.replica.reset();
  n.env->restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
}

void TestCluster::crash_restart(NodeId id) {
  TestNode& n = node(id);
  power_cut(n);
  open_replica(n);
}

void TestCluster::restart_with_log_cut(NodeId id, Index from) {
  TestNode& n = node(id);
  power_cut(n);
  auto store = store::CommitLog::open(n.config.data_dir + "/log", n.config.store);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->truncate_suffix(from, /*force=*/true).ok());
  ASSERT_TRUE((*store)->close().ok());
  open_replica(n);
}

void TestCluster::restart_wiped(NodeId id) {
  TestNode& n = node(id);
  n.env->crash();
  n.replica->fail_all(replica::ErrorCode::kUnavailable, "the node lost its disk");
  n.replica.reset();
  n.env = std::make_unique<store::MemoryEnv>();
  n.config.store.env = n.env.get();
  open_replica(n);
}

void TestCluster::restart_log_wiped(NodeId id) {
  TestNode& n = node(id);
  power_cut(n);
  const std::string log_dir = n.config.data_dir + "/log";
  if (auto files = n.env->list_dir(log_dir); files.ok()) {
    for (const std::string& file : *files) ASSERT_TRUE(n.env->remove(log_dir + "/" + file).ok());
  }
  ASSERT_TRUE(n.env->remove_dir(log_dir).ok());
  open_replica(n);
}

void TestCluster::restart_from_copy_of(NodeId id, NodeId source) {
  TestNode& n = node(id);
  const TestNode& from = node(source);
  std::vector<Entry> copy;
  const Index durable = from.log.durable_index();
  for (Index index = from.log.first_index(); index <= durable; ++index)
    copy.push_back(from.log.entry(index));
  HardState hard_state = n.replica->core().hard_state();
  hard_state.commit = std::min(from.replica->log().commit_index(), durable);
  // TOPICSTATE travels with the log (docs/operations.md, "Retention"): the topics' next offsets.
  const std::string topic_state = from.config.data_dir + "/TOPICSTATE";
  std::optional<std::string> topic_state_copy;
  if (from.env->exists(topic_state)) {
    auto bytes = from.env->read_file(topic_state, 64 << 20);
    if (bytes.ok()) topic_state_copy = *bytes;
  }
  n.env->crash();
  n.replica->fail_all(replica::ErrorCode::kUnavailable, "the node is rebuilt");
  n.replica.reset();
  n.env = std::make_unique<store::MemoryEnv>();  // the old disk is replaced, not patched
  n.config.store.env = n.env.get();
  seed_disk(n, copy, hard_state);
  if (topic_state_copy) {
    EXPECT_TRUE(n.env->write_file(n.config.data_dir + "/TOPICSTATE", *topic_state_copy).ok());
  }
  open_replica(n);
}

// --- the network --------------------------------------------------------------------------------

bool TestCluster::dropped(const Message& m) const {
  if (isolated_.count(m.from) != 0 || isolated_.count(m.to) != 0) return true;
  for (const DropRule& rule : drop_rules_) {
    if (rule(m)) return true;
  }
  return false;
}

void TestCluster::deliver(Message m) {
  if (mutator_) mutator_(m);
  delivered_.push_back(m);
  step(m.to, std::move(m));
}

void TestCluster::deliver_at(std::size_t position) {
  Message m = network_[position];
  network_.erase(network_.begin() + static_cast<std::ptrdiff_t>(position));
  if (dropped(m)) return;
  deliver(std::move(m));
}

void TestCluster::drop_at(std::size_t position) {
  network_.erase(network_.begin() + static_cast<std::ptrdiff_t>(position));
}

void TestCluster::duplicate_at(std::size_t position) { network_.push_back(network_[position]); }

std::vector<Message> TestCluster::take_from_network(
    const std::function<bool(const Message&)>& match, std::size_t max) {
  std::vector<Message> taken;
  for (auto it = network_.begin(); it != network_.end() && taken.size() < max;) {
    if (match(*it)) {
      taken.push_back(std::move(*it));
      it = network_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

std::size_t TestCluster::deliver_all(std::size_t max_messages) {
  for (auto& [id, n] : nodes_) process(id);
  std::size_t count = 0;
  while (!network_.empty()) {
    Message m = std::move(network_.front());
    network_.pop_front();
    if (dropped(m)) continue;
    if (++count > max_messages) {
      std::string last;
      for (std::size_t i = delivered_.size() >= 6 ? delivered_.size() - 6 : 0;
           i < delivered_.size(); ++i)
        last += "\n  " + describe(delivered_[i]);
      ADD_FAILURE() << "network did not quiesce within " << max_messages
                    << " messages; last ones:" << last;
      network_.clear();
      break;
    }
    deliver(std::move(m));
  }
  return count;
}

bool TestCluster::campaign_until_leader(NodeId id, int max_ticks) {
  for (int i = 0; i < max_ticks; ++i) {
    if (raft(id).role() == Role::kLeader) return true;
    tick(id);
    deliver_all();
  }
  return raft(id).role() == Role::kLeader;
}

std::size_t TestCluster::count_delivered(const std::function<bool(const Message&)>& match) const {
  std::size_t count = 0;
  for (const Message& m : delivered_) count += match(m) ? 1 : 0;
  return count;
}

NodeId TestCluster::leader() const {
  NodeId found = kNoNode;
  Term best = 0;
  for (const auto& [id, n] : nodes_) {
    const Raft& core = n->replica->core();
    if (isolated_.count(id) != 0 || core.role() != Role::kLeader) continue;
    if (found == kNoNode || core.term() > best) {
      found = id;
      best = core.term();
    }
  }
  return found;
}

}  // namespace raftlog::raft::testing

// `raftlog-bench snapshot-loop` (snapshot_loop_bench.h): the Raft loop's longest holds during a
// snapshot catch-up of a large state.
#include "snapshot_loop_bench.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "derived/envelope.h"
#include "replica/replica.h"
#include "replica/snapshot_data.h"
#include "report.h"
#include "util/crc32c.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Duration = Clock::duration;
using replica::Replica;

constexpr raft::NodeId kLeader = 1;
constexpr raft::NodeId kFirstLearner = 2;
constexpr raft::NodeId kSecondLearner = 3;
constexpr std::uint32_t kTickMs = 20;
// Appends proposed between two process() calls while the state is built (the leader's pending
// appends stay far below ReplicaConfig::max_pending_appends).
constexpr std::uint64_t kAppendsPerRound = 1000;
// Every wait of the command is bounded in loop rounds (each a tick or a delivery).
constexpr int kMaxRounds = 100000;

double ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

class QueueSender final : public replica::MessageSender {
 public:
  explicit QueueSender(std::deque<raft::Message>* out) : out_(out) {}
  void send(raft::Message message) override { out_->push_back(std::move(message)); }

 private:
  std::deque<raft::Message>* out_;
};

class RoomyDisk final : public replica::DiskProbe {
 public:
  std::optional<replica::DiskSpace> probe() override {
    return replica::DiskSpace{1ULL << 40, 0.01};
  }
};

// As raftlogd's worker (server/off_loop_worker.h): each job on a thread of its own; its `done` waits
// for the harness to run it on the replica's "loop" (Harness::take_results), timed as a round.
class ThreadOffLoop final : public replica::OffLoopExecutor {
 public:
  ~ThreadOffLoop() override {
    for (std::thread& thread : threads_) thread.join();
  }
  bool run(std::function<void()> job, std::function<void()> done) override {
    threads_.emplace_back([this, job = std::move(job), done = std::move(done)]() mutable {
      job();
      std::lock_guard lock(mu_);
      done_.push_back(std::move(done));
    });
    return true;
  }
  std::vector<std::function<void()>> take_done() {
    std::lock_guard lock(mu_);
    return std::exchange(done_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::function<void()>> done_;
  std::vector<std::thread> threads_;  // one per job; a run has a handful
};

struct Settings {
  std::string dir;
  std::uint64_t clients = 28000;
  std::uint64_t appends_per_client = 64;
  std::uint64_t topics = 90000;
  std::uint64_t section_bytes = 1ULL << 20;
  std::uint64_t segment_bytes = 16ULL << 20;
  // The learners prepare a received snapshot inline, within the step that delivers it, as the
  // install ran before it moved off the loop (no executor: ReplicaDeps::off_loop unset). For a
  // before/after figure from one binary; the leader encodes off its loop either way.
  bool follower_inline = false;
};

struct BenchNode {
  std::unique_ptr<QueueSender> sender;
  ThreadOffLoop off_loop;
  RoomyDisk disk;
  std::unique_ptr<Replica> replica;
  Duration longest_round{};
};

// Three replicas joined by an in-process queue, on a simulated clock that moves one tick_ms per
// tick(); each call into a replica is timed as one round of its loop.
class Harness {
 public:
  explicit Harness(const Settings& settings) : settings_(settings) {}

  bool open() {
    for (raft::NodeId id : {kLeader, kFirstLearner, kSecondLearner}) {
      BenchNode& n = nodes_[id];
      n.sender = std::make_unique<QueueSender>(&network_);
      replica::ReplicaDeps deps;
      deps.sender = n.sender.get();
      deps.disk = &n.disk;
      deps.clock = [this] { return now_; };
      if (id == kLeader || !settings_.follower_inline) deps.off_loop = &n.off_loop;
      if (id == kLeader) {
        const std::string section(settings_.section_bytes, 's');
        deps.snapshot_section = [section](std::uint64_t) { return section; };
      }
      replica::NodeError error;
      n.replica = Replica::open(config_for(id), std::move(deps), &error);
      if (n.replica == nullptr) {
        spdlog::error("opening node {}: {}", id, error.message);
        return false;
      }
    }
    return true;
  }

  // Ticks the leader until it leads (the learners never campaign).
  bool elect() {
    for (int i = 0; i < kMaxRounds && leader().role() != raft::Role::kLeader; ++i) tick(kLeader);
    deliver_all();
    return leader().role() == raft::Role::kLeader;
  }

  // Every client's appends, each one entry with an envelope of one of the topics.
  bool fill() {
    std::uint64_t n = 0;
    std::uint64_t answered_ok = 0;
    auto answered = std::make_shared<std::uint64_t>(0);
    auto failed = std::make_shared<std::uint64_t>(0);
    for (std::uint64_t sequence = 1; sequence <= settings_.appends_per_client; ++sequence) {
      for (std::uint64_t client = 1; client <= settings_.clients; ++client) {
        std::string payload;
        derived::encode_envelope(0, "bench-topic-" + std::to_string(n % settings_.topics), {},
                                 "payload-" + std::to_string(n), &payload);
        Replica::AppendRequest request;
        request.payloads.push_back(std::move(payload));
        request.client_id = client;
        request.sequence = sequence;
        request.has_envelopes = true;
        request.deadline = now_ + std::chrono::hours(1);
        request.done = [answered, failed](replica::AppendResult result) {
          ++*answered;
          if (!result.error.ok()) ++*failed;
        };
        leader().append(std::move(request));
        if (++n % kAppendsPerRound == 0) {
          leader().process();
          network_.clear();  // the learners are stranded: nothing reaches them
        }
      }
    }
    leader().process();
    network_.clear();
    answered_ok = *answered - *failed;
    spdlog::info("{} appends proposed, {} committed, {} failed; dedup state built", n, answered_ok,
                 *failed);
    return *failed == 0 && *answered == n;
  }

  // Trims the leader's log below its last segment (the topic scan continues round by round).
  bool trim() {
    const std::uint64_t last = leader().log().last_index();
    // Past the learners' grace (ReplicaConfig::retention_follower_grace_ms, in the core's ticks).
    for (int i = 0; i < 60; ++i) {
      tick(kLeader);
      network_.clear();
    }
    // The trim deletes the segments its topic scan has passed, a slice per round, and waits for
    // its writes off the loop (TOPICSTATE, SNAPSHOT.next) and the store's flusher between rounds:
    // rounds until it is over (Replica::trim_in_progress), each after a 1 ms wait. Not until the
    // first index stops moving for a while: a SNAPSHOT.next of 63 MB takes its worker more than a
    // second on a loaded machine, and a trim still under way when the learners are healed
    // abandons the first send's gather when its write comes back (the log's start moves), so the
    // sends walked the dedup table twice and the run failed its own check.
    int rounds = 0;
    leader().trim(last, "bench");
    for (; rounds < kMaxRounds && leader().trim_in_progress(); ++rounds) {
      leader().apply_retention(now_);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      (void)leader().log().run_flush_cycle();  // the stepped store's flusher
      take_results();
    }
    spdlog::info("leader's log now [{}, {}] after {} trim rounds", leader().log().first_index(),
                 leader().log().last_index(), rounds);
    if (leader().trim_in_progress()) {
      spdlog::error("the trim is still under way after {} rounds", rounds);
      return false;
    }
    return leader().log().first_index() > 1;
  }

  void tick(raft::NodeId id) {
    now_ += std::chrono::milliseconds(kTickMs);
    timed(id, [&](Replica& r) {
      r.tick();
      r.process();
    });
  }
  void tick_all() {
    // The simulated clock must not run ahead of an encoding or an install's preparation on its
    // thread (the core would retry the snapshot): while one runs, a tick takes a tick of real time,
    // as in raftlogd.
    if (leader().snapshot_stats().encoding_in_flight != 0 ||
        node(kFirstLearner).snapshot_stats().install_preparing != 0 ||
        node(kSecondLearner).snapshot_stats().install_preparing != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kTickMs));
    }
    take_results();
    tick(kLeader);
    tick(kFirstLearner);
    tick(kSecondLearner);
    deliver_all();
  }

  void deliver_all() {
    for (int i = 0; i < kMaxRounds && !network_.empty(); ++i) {
      raft::Message message = std::move(network_.front());
      network_.pop_front();
      if (isolated_.count(message.to) != 0 || isolated_.count(message.from) != 0) continue;
      const raft::NodeId to = message.to;
      if (message.type == raft::MessageType::kSnapshot) {
        ++snapshots_delivered_;
        snapshot_bytes_ = message.snapshot->data.size();
        snapshot_data_ = std::string(message.snapshot->data.view());
        // One round of raftlogd's loop (the step, which hands the preparation off the loop, then
        // the process()); the round that installs is the preparation's `done` (take_results), or
        // this one when the learner prepares inline.
        const std::uint64_t installed_before = node(to).snapshot_stats().installed;
        const Duration step = timed(to, [&](Replica& r) { r.step(std::move(message)); });
        const Duration process = timed(to, [&](Replica& r) { r.process(); });
        follower_step_ = std::max(follower_step_, step);
        follower_delivery_round_ = std::max(follower_delivery_round_, step + process);
        if (node(to).snapshot_stats().installed > installed_before) {
          follower_install_round_ = std::max(follower_install_round_, step + process);
        }
        BenchNode& n = nodes_.at(to);
        n.longest_round = std::max(n.longest_round, step + process);
        continue;
      }
      const std::size_t sent_before = snapshots_sent();
      const Duration took = timed(to, [&](Replica& r) {
        r.step(std::move(message));
        r.process();
      });
      if (to == kLeader && snapshots_sent() > sent_before) note_snapshot_round(took);
    }
  }

  // Runs the off-loop results that came back, each a round of its node's loop.
  void take_results() {
    for (auto& [id, n] : nodes_) {
      for (std::function<void()>& done : n.off_loop.take_done()) {
        const std::size_t sent_before = snapshots_sent();
        const std::uint64_t installed_before = n.replica->snapshot_stats().installed;
        const Duration took = timed(id, [&](Replica& r) {
          done();
          r.process();
        });
        if (id == kLeader && snapshots_sent() > sent_before) note_snapshot_round(took);
        // A learner's prepared snapshot came back: the round that installs it.
        if (n.replica->snapshot_stats().installed > installed_before) {
          follower_install_round_ = std::max(follower_install_round_, took);
        }
      }
    }
  }

  void isolate(raft::NodeId id) { isolated_.insert(id); }
  void heal(raft::NodeId id) { isolated_.erase(id); }
  Replica& node(raft::NodeId id) { return *nodes_.at(id).replica; }
  Replica& leader() { return node(kLeader); }
  Duration longest_round(raft::NodeId id) const { return nodes_.at(id).longest_round; }
  std::uint64_t snapshots_delivered() const { return snapshots_delivered_; }
  std::uint64_t snapshot_bytes() const { return snapshot_bytes_; }
  const std::string& snapshot_data() const { return snapshot_data_; }
  // The leader's rounds that sent a snapshot: the first (its encoding made) and the longest later
  // one (the encoding reused).
  Duration first_send() const { return first_send_; }
  Duration reuse_send() const { return reuse_send_; }
  // The learners' longest rounds: the step of a kSnapshot; the round that delivered one (its step
  // and process()); the round that installed one (the preparation's `done` and process(), or the
  // delivery round when prepared inline).
  Duration follower_step() const { return follower_step_; }
  Duration follower_delivery_round() const { return follower_delivery_round_; }
  Duration follower_install_round() const { return follower_install_round_; }

 private:
  replica::ReplicaConfig config_for(raft::NodeId id) const {
    replica::ReplicaConfig c;
    c.node_id = id;
    c.members = {{kLeader, "n1"}, {kFirstLearner, "n2"}, {kSecondLearner, "n3"}};
    c.data_dir = settings_.dir + "/n" + std::to_string(id);
    c.tick_ms = kTickMs;
    c.election_ticks = 10;
    c.store.flush_mode = store::FlushMode::kAsync;
    c.store.background_work = store::BackgroundWork::kStepped;
    c.store.segment_size_bytes = settings_.segment_bytes;
    c.store.preallocate_next_segment = false;
    c.store.max_entry_size_bytes = 64 << 10;  // every entry here is tiny
    c.max_pending_appends = 2 * kAppendsPerRound;
    c.dedup_sequences_per_client = static_cast<std::uint32_t>(settings_.appends_per_client);
    c.dedup_max_clients = static_cast<std::uint32_t>(settings_.clients);
    c.retention_follower_grace_ms = 1000;
    c.max_snapshot_data_bytes = replica::kMaxSnapshotDataBytes;  // raftlogd's budget
    c.raft.id = id;
    c.raft.initial_conf = raft::ConfState{{kLeader}, {kFirstLearner, kSecondLearner}};
    c.raft.election_ticks = 10;
    c.raft.heartbeat_ticks = 2;
    c.raft.snapshots = true;
    c.raft.random_seed = id;
    c.raft.max_uncommitted_entries = 4 * kAppendsPerRound;
    return c;
  }

  template <typename Call>
  Duration timed(raft::NodeId id, Call&& call) {
    BenchNode& n = nodes_.at(id);
    const Clock::time_point start = Clock::now();
    call(*n.replica);
    const Duration took = Clock::now() - start;
    n.longest_round = std::max(n.longest_round, took);
    return took;
  }

  std::size_t snapshots_sent() const {
    return static_cast<std::size_t>(nodes_.at(kLeader).replica->snapshot_stats().sent);
  }
  void note_snapshot_round(Duration took) {
    if (!first_send_seen_) {
      first_send_seen_ = true;
      first_send_ = took;
    } else {
      reuse_send_ = std::max(reuse_send_, took);
    }
  }

  Settings settings_;
  Clock::time_point now_ = Clock::now();
  std::deque<raft::Message> network_;
  std::map<raft::NodeId, BenchNode> nodes_;
  std::set<raft::NodeId> isolated_;
  std::uint64_t snapshots_delivered_ = 0;
  std::uint64_t snapshot_bytes_ = 0;
  std::string snapshot_data_;
  bool first_send_seen_ = false;
  Duration first_send_{};
  Duration reuse_send_{};
  Duration follower_step_{};
  Duration follower_delivery_round_{};
  Duration follower_install_round_{};
};

// Ticks (delivering after each) until `done` or `max_ticks` rounds.
template <typename Done>
bool run_until(Harness& h, int max_ticks, Done&& done) {
  for (int i = 0; i < max_ticks && !done(); ++i) h.tick_all();
  return done();
}

// The encoding, its CRC and a decode of the same data, each timed alone (the best of three).
struct CodecTimes {
  Duration decode{};
  Duration encode{};
  Duration crc{};
};
std::optional<CodecTimes> time_codec(const std::string& bytes) {
  CodecTimes best{Duration::max(), Duration::max(), Duration::max()};
  for (int i = 0; i < 3; ++i) {
    Clock::time_point start = Clock::now();
    auto decoded = replica::decode_snapshot_data(bytes);
    best.decode = std::min(best.decode, Clock::now() - start);
    if (!decoded.ok()) return std::nullopt;
    start = Clock::now();
    const std::string encoded = replica::encode_snapshot_data(*decoded);
    best.encode = std::min(best.encode, Clock::now() - start);
    start = Clock::now();
    const std::uint32_t crc = util::crc32c::value(encoded);
    best.crc = std::min(best.crc, Clock::now() - start);
    if (crc == 0) best.crc += Duration(1);  // uses the value: the call is not optimised away
  }
  return best;
}

}  // namespace

int run_snapshot_loop_command(std::string_view command_path, std::span<const std::string> args,
                              const cli::Io& io) {
  Settings settings;
  settings.dir = (std::filesystem::temp_directory_path() / "raftlog-snapshot-loop").string();
  cli::FlagSet flags(std::string(command_path),
                     "The Raft loop's longest holds while a leader catches two stranded learners "
                     "up from its snapshot of a large dedup and topic table (in one process, over "
                     "files in --dir, which must be empty or new and is deleted at the end).");
  flags.string_flag("dir", &settings.dir, "DIR", "scratch directory (empty or new; deleted)");
  flags.uint_flag("clients", &settings.clients, "N", "dedup clients", {1, 100000});
  flags.uint_flag("appends-per-client", &settings.appends_per_client, "N",
                  "remembered appends per client", {1, replica::kMaxAppendsPerClient});
  flags.uint_flag("topics", &settings.topics, "N", "topics", {1, 90000});
  flags.bytes_flag("section-bytes", &settings.section_bytes, "BYTES",
                   "the node section (raftlogd: the consumer group table)", {0, 1ULL << 20});
  flags.bytes_flag("segment-bytes", &settings.segment_bytes, "BYTES", "the store's segment size",
                   {store::Options::kMinSegmentSizeBytes, 1ULL << 30});
  std::string follower_install = "off-loop";
  flags.string_flag("follower-install", &follower_install, "off-loop|inline",
                    "where the learners prepare a received snapshot: on their off-loop worker "
                    "(raftlogd), or inline within the step that delivers it (the install before "
                    "it moved off the loop)");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (follower_install != "off-loop" && follower_install != "inline") {
    io.err << "--follower-install must be off-loop or inline, not " << follower_install << "\n";
    return cli::kExitUsage;
  }
  settings.follower_inline = follower_install == "inline";
  std::error_code ec;
  if (std::filesystem::exists(settings.dir, ec) && !std::filesystem::is_empty(settings.dir, ec)) {
    io.err << settings.dir << " exists and is not empty: give an empty or new --dir\n";
    return cli::kExitUsage;
  }
  std::filesystem::create_directories(settings.dir, ec);
  if (ec) {
    io.err << "cannot create " << settings.dir << ": " << ec.message() << "\n";
    return cli::kExitFailure;
  }
  spdlog::set_level(spdlog::level::info);
  int code = cli::kExitFailure;
  {
    Harness h(settings);
    h.isolate(kFirstLearner);
    h.isolate(kSecondLearner);
    const Clock::time_point built_at = Clock::now();
    if (!h.open() || !h.elect() || !h.fill() || !h.trim()) {
      io.err << "building the leader's state failed\n";
    } else {
      io.err << "state built in " << seconds_since(built_at) << " s\n";
      // The trims walked the dedup table too (their SNAPSHOT files): the sends' walks count from
      // here.
      const std::uint64_t walks_before_sends = h.leader().snapshot_stats().dedup_walks;
      // The first learner: the leader gathers, encodes and sends; the learner admits and installs.
      h.heal(kFirstLearner);
      const bool first = run_until(h, 2000, [&] {
        return h.node(kFirstLearner).snapshot_stats().installed == 1 &&
               h.node(kFirstLearner).commit_index() == h.leader().commit_index();
      });
      // The second learner at the same point: the leader's encoding is reused.
      h.heal(kSecondLearner);
      const bool second = run_until(h, 2000, [&] {
        return h.node(kSecondLearner).snapshot_stats().installed == 1 &&
               h.node(kSecondLearner).commit_index() == h.leader().commit_index();
      });
      const replica::SnapshotStats stats = h.leader().snapshot_stats();
      const std::uint64_t dedup_walks = stats.dedup_walks - walks_before_sends;
      const std::optional<CodecTimes> timed_codec = time_codec(h.snapshot_data());
      if (!first || !second) {
        io.err << "the learners did not catch up\n";
      } else if (!timed_codec) {
        io.err << "the snapshot data does not decode\n";
      } else if (stats.encodes != 1 || stats.encodings_reused == 0) {
        // The second learner's send must be a reuse, or its figure is not what it claims.
        io.err << "expected one encoding reused: encodes=" << stats.encodes
               << " reused=" << stats.encodings_reused << "\n";
      } else if (dedup_walks != 1) {
        // The reuse must not walk the dedup table (only the first send gathers).
        // A send dropped meanwhile (SnapshotStats::sends_dropped: a trim, an install or a loss of
        // leadership abandoned its gather) says which part of the run walked it again.
        io.err << "expected one walk of the dedup table for the two sends: " << dedup_walks
               << " (sends dropped: " << stats.sends_dropped << ")\n";
      } else {
        const CodecTimes& codec = *timed_codec;
        // The first learner's install, by part (replica::SnapshotStats::InstallTimes).
        const replica::SnapshotStats::InstallTimes& install =
            h.node(kFirstLearner).snapshot_stats().last_install;
        ResultLine line("snapshot_loop");
        line.add("snapshot_bytes", h.snapshot_bytes())
            .add("clients", settings.clients)
            .add("appends_per_client", settings.appends_per_client)
            .add("topics", settings.topics)
            .add("leader_first_send_ms", ms(h.first_send()))
            .add("leader_reuse_send_ms", ms(h.reuse_send()))
            .add("encode_ms", ms(codec.encode))
            .add("crc_ms", ms(codec.crc))
            .add("decode_ms", ms(codec.decode))
            .add("follower_install", follower_install)
            .add("follower_step_ms", ms(h.follower_step()))
            .add("follower_delivery_round_ms", ms(h.follower_delivery_round()))
            .add("follower_install_round_ms", ms(h.follower_install_round()))
            .add("clients_left_out", stats.clients_left_out)
            .add("follower_decodes", h.node(kFirstLearner).snapshot_stats().decodes)
            .add("install_decode_ms", ms(install.decode))
            .add("install_snapshot_file_ms", ms(install.snapshot_file))
            .add("install_log_reset_ms", ms(install.log_reset))
            .add("install_conf_state_ms", ms(install.conf_state))
            .add("install_topic_state_ms", ms(install.topic_state))
            .add("install_tables_ms", ms(install.tables))
            .add("install_node_section_ms", ms(install.node_section))
            .add("install_on_loop_ms", ms(install.install))
            .add("leader_longest_round_ms", ms(h.longest_round(kLeader)))
            .add("follower_longest_round_ms",
                 ms(std::max(h.longest_round(kFirstLearner), h.longest_round(kSecondLearner))))
            .add("leader_encoding_off_loop_ms",
                 static_cast<double>(stats.last_encoding_duration.count()) / 1000.0)
            .add("encodes", stats.encodes)
            .add("encodings_reused", stats.encodings_reused)
            .add("dedup_walks", dedup_walks);
        io.out << line.text() << "\n";
        code = cli::kExitOk;
      }
    }
  }
  std::filesystem::remove_all(settings.dir, ec);
  return code;
}

}  // namespace raftlog::bench

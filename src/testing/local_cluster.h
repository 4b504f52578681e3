// LocalCluster: real raftlogd processes on 127.0.0.1, for integration tests and for benchmarks that
// kill nodes (raftlog-bench failover). Each node runs in its own process (fork + exec of the raftlogd
// binary) with its own data directory under a fresh temporary directory, so kill -9, SIGSTOP and
// restarts are the real thing. Ports are free loopback ports picked at construction. Every cluster
// gets a random --cluster-id and, without TLS, a random --peer-secret-file (docs/security.md).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "testing/loopback_ports.h"

namespace raftlog::testing {

struct LocalClusterOptions {
  std::string raftlogd_path;  // required: the raftlogd binary
  int nodes = 3;
  std::string flush_mode = "sync";
  std::uint64_t segment_size_bytes = 1 << 20;     // small segments exercise roll-over
  std::uint64_t max_entry_size_bytes = 16 << 10;  // must fit a segment
  std::vector<std::string> extra_flags;           // appended to every raftlogd command line
  // The machine's shared disk may be fuller than raftlogd's default 90 % high watermark; tests that
  // exercise the watermark set their own (after these, in extra_flags).
  double disk_high_watermark = 1.0;
  double disk_low_watermark = 0.99;
  // 0: every node is a founding member (--members lists them all). N > 0: nodes 1..N found the
  // cluster; nodes N+1.. start with --join (their own address in --members, the founders in --join)
  // and become members once a test adds them (raftlogctl members add, or client::MembersClient).
  int founding_members = 0;
  // A founder whose founders' list names it alone (nodes = 1, or founding_members = 1) gets
  // --bootstrap-new-cluster at its first start() by this cluster, and not at later ones: raftlogd
  // founds a one-member configuration on an empty directory only when told (docs/operations.md,
  // "Starting and stopping a node"), so a test that wipes such a node and starts it again sees the
  // refusal a supervisor would. false: never (a test that gives it through set_node_flags).
  bool bootstrap_flag_at_first_start = true;
  // Every node serves Prometheus metrics on a free loopback port (metrics_address(id)).
  bool metrics = false;

  // TLS (docs/security.md): the cluster makes a CA ("ca") and one certificate per node with the
  // openssl CLI, starts every node with --tls-cert/--tls-key and --peer-tls-*, and its own clients
  // (status, wait_for_leader, client(), read_all) trust the CA.
  bool tls = false;
  // With tls: nodes also get --tls-ca, so every client must present a certificate; LocalCluster's
  // own clients present tls_dir()/client.crt (signed by the CA).
  bool tls_client_certificates = false;
  // With tls: these nodes get a certificate from another CA ("rogue-ca") and trust both CAs
  // (tls_dir()/rogue-trust.crt): they can dial the real nodes but must not be able to join.
  std::vector<int> tls_rogue_nodes;
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  // kill -9 every node (in an ASan build: SIGTERM, so LeakSanitizer checks it), remove the
  // directory; but if a node's log holds a sanitizer report, print it, keep the directory and abort,
  // so the report fails the test.
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  void start_all();
  void start(int id);
  void kill(int id);    // SIGKILL, reaped
  void pause(int id);   // SIGSTOP
  void resume(int id);  // SIGCONT
  // SIGTERM once the node answers (a node still starting up has no handler yet); returns the exit
  // status (0 for a clean shutdown), or -1 if it had to be killed after `timeout`.
  int stop(int id, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool running(int id) const;
  // The process id of a running node, 0 when it is not running (for CPU accounting by benchmarks).
  pid_t pid(int id) const;
  // Flags added to node `id`'s command line from its next start() on (after extra_flags).
  void set_node_flags(int id, std::vector<std::string> flags);
  // A joining node (beyond founding_members) is started without --join from its next start() on
  // (only its own address in --members): a restart relying on its DIR/JOIN record alone.
  void start_without_join(int id) { without_join_.insert(id); }
  // Waits until node `id` exits by itself: its exit code (128 + signal when killed by one), or nullopt
  // if it is still running after `timeout` (or was not running).
  std::optional<int> wait_for_exit(int id, std::chrono::milliseconds timeout);

  int size() const { return options_.nodes; }
  std::string address(int id) const;
  std::string metrics_address(int id) const;  // with options.metrics
  std::string endpoints() const;              // every node, comma-separated
  std::string data_dir(int id) const;
  std::string log_file(int id) const;
  // With options.tls: where the certificates are (ca.crt, rogue-ca.crt, rogue-trust.crt,
  // node<N>.crt/.key, client.crt/.key), and the TLS options LocalCluster's own clients use.
  std::string tls_dir() const { return root_ + "/tls"; }
  client::TlsOptions client_tls() const;
  // The --cluster-id every node runs with, and (without TLS) the --peer-secret-file.
  const std::string& cluster_id() const { return cluster_id_; }
  std::string peer_secret_file() const { return root_ + "/peer-secret"; }

  // Polls the running nodes until one is leader and a majority of nodes agree on it; returns its id
  // or 0 after `timeout`.
  int wait_for_leader(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                      const std::vector<int>& excluding = {});
  // A node's own view, or nullopt if it does not answer.
  std::optional<client::NodeStatus> status(int id);
  // Waits until node `id` has committed at least `index`.
  bool wait_for_commit(int id, std::uint64_t index,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // A client over every node (or only `only_ids`).
  std::unique_ptr<client::Client> client(client::Options options = {},
                                         const std::vector<int>& only_ids = {});
  // Every committed entry of node `id` from its first retained index, read from that node alone
  // (not linearizable).
  std::vector<client::Entry> read_all(int id);

  // The last lines of a node's log, for failure messages.
  std::string log_tail(int id, std::size_t max_bytes = 4000) const;

 private:
  LocalClusterOptions options_;
  std::string root_;
  std::string cluster_id_;
  std::map<int, int> ports_;
  std::map<int, int> metrics_ports_;
  std::map<int, pid_t> pids_;
  std::map<int, std::vector<std::string>> node_flags_;
  std::set<int> without_join_;
  std::set<int> started_once_;  // ids start() has exec'd at least once (bootstrap_flag_at_first_start)

  void make_certificates();
  void make_cluster_identity();
  std::vector<std::string> tls_flags(int id) const;
};

}  // namespace raftlog::testing

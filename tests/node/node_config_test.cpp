#include "server/node_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raft/raft.h"
#include "server/node.h"
#include "server/transport.h"
#include "temp_dir.h"

namespace raftlog::server {
namespace {

NodeConfig valid_config() {
  NodeConfig config;
  config.node_id = 2;
  config.members = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  config.data_dir = "/tmp/raftlog-node-config-test";
  config.cluster_id = "node-config-test-5f1e";
  return config;
}

TEST(NodeConfigValidate, DefaultsWithIdMembersAndDirAreValid) {
  EXPECT_EQ(validate(valid_config()), "");
  NodeConfig single = valid_config();
  single.node_id = 1;
  single.members = {{1, "localhost:1"}};
  EXPECT_EQ(validate(single), "");
  // A single node may keep the default cluster id (no peer can confuse it); several may not.
  single.cluster_id = NodeConfig{}.cluster_id;
  EXPECT_EQ(validate(single), "");
}

// A follower far behind is sent at most max_inflight_bytes plus one entry beyond its
// acknowledgements, which the append lane must hold, or the transport drops the appends the leader
// read for it (and the follower, seeing a gap, makes the leader probe and read them all again).
TEST(NodeConfigDerived, TheInflightByteWindowFitsThePeerAppendLane) {
  NodeConfig config = valid_config();
  const raft::Config raft_config = raft_config_for(config);
  EXPECT_EQ(raft_config.max_inflight_bytes, config_limits::kMaxInflightAppendBytes);
  EXPECT_LT(raft_config.max_inflight_bytes,
            raft_config.max_inflight_messages * raft_config.max_bytes_per_message / 8)
      << "the byte window no longer bounds a catch-up below the message window";
  for (const std::uint64_t entry_bytes :
       std::vector<std::uint64_t>{4ULL << 20, 50ULL << 20, config_limits::kMaxAppendBytes}) {
    config.store.max_entry_size_bytes = entry_bytes;
    config.max_append_bytes = std::max<std::uint64_t>(config.max_append_bytes, entry_bytes);
    const PeerTransportOptions transport = peer_transport_options_for(config);
    EXPECT_LE(raft_config_for(config).max_inflight_bytes + config.store.max_entry_size_bytes +
                  raft::Entry::kEntryOverheadBytes,
              transport.max_queued_bytes)
        << "max entry size " << entry_bytes;
  }
}

struct Case {
  const char* name;
  std::function<void(NodeConfig&)> break_it;
  const char* expected_words;  // a fragment the message must contain (names the field)
};

TEST(NodeConfigValidate, EveryRuleRejectsWithAMessageNamingIt) {
  const Case cases[] = {
      {"zero id", [](NodeConfig& c) { c.node_id = 0; }, "node id"},
      {"id not a member", [](NodeConfig& c) { c.node_id = 9; }, "not among the members"},
      {"a member address longer than configurations record",
       [](NodeConfig& c) { c.members[2] = std::string(120, 'h') + ".example:7002"; },
       "at most 128"},
      {"eight members",
       [](NodeConfig& c) {
         for (std::uint64_t id = 4; id <= 8; ++id)
           c.members[id] = "127.0.0.1:70" + std::to_string(id);
       },
       "at most 7"},
      {"member id zero", [](NodeConfig& c) { c.members[0] = "127.0.0.1:7000"; }, "member ids"},
      {"empty address", [](NodeConfig& c) { c.members[3] = ""; }, "member 3"},
      {"address without port", [](NodeConfig& c) { c.members[3] = "localhost"; }, "host:port"},
      {"no data dir", [](NodeConfig& c) { c.data_dir.clear(); }, "data directory"},
      {"no cluster id", [](NodeConfig& c) { c.cluster_id.clear(); }, "cluster id"},
      {"the shared default cluster id on several nodes",
       [](NodeConfig& c) { c.cluster_id = "raftlog"; },
       "a multi-node cluster needs --cluster-id set to a token unique to it"},
      {"cluster id with a space", [](NodeConfig& c) { c.cluster_id = "my cluster"; },
       "printable ASCII"},
      {"cluster id with a control character", [](NodeConfig& c) { c.cluster_id = "a\nb"; },
       "printable ASCII"},
      {"cluster id too long", [](NodeConfig& c) { c.cluster_id = std::string(257, 'c'); },
       "longer than 256"},
      {"tick zero", [](NodeConfig& c) { c.tick_ms = 0; }, "tick_ms"},
      {"tick too long", [](NodeConfig& c) { c.tick_ms = 10001; }, "tick_ms"},
      {"heartbeat zero", [](NodeConfig& c) { c.heartbeat_ticks = 0; }, "heartbeat_ticks"},
      {"election equal to heartbeat", [](NodeConfig& c) { c.election_ticks = c.heartbeat_ticks; },
       "election_ticks"},
      {"no entries per append", [](NodeConfig& c) { c.max_entries_per_append = 0; },
       "max_entries_per_append"},
      {"append bytes below entry size",
       [](NodeConfig& c) { c.max_append_bytes = c.store.max_entry_size_bytes - 1; },
       "max_append_bytes"},
      {"read entries zero", [](NodeConfig& c) { c.max_read_entries = 0; }, "read limits"},
      {"read bytes zero", [](NodeConfig& c) { c.max_read_bytes = 0; }, "read limits"},
      {"pending appends zero", [](NodeConfig& c) { c.max_pending_appends = 0; }, "queue bounds"},
      {"input queue zero", [](NodeConfig& c) { c.max_input_queue = 0; }, "queue bounds"},
      {"dedup sequences zero", [](NodeConfig& c) { c.dedup_sequences_per_client = 0; }, "dedup"},
      {"dedup clients zero", [](NodeConfig& c) { c.dedup_max_clients = 0; }, "dedup"},
      {"tail streams zero", [](NodeConfig& c) { c.max_tail_streams = 0; }, "max_tail_streams"},
      {"append streams zero", [](NodeConfig& c) { c.max_append_streams = 0; },
       "max_append_streams"},
      {"appends per stream too many", [](NodeConfig& c) { c.max_appends_per_stream = 65537; },
       "max_appends_per_stream"},
      {"tail streams per connection zero",
       [](NodeConfig& c) { c.max_tail_streams_per_connection = 0; },
       "max_tail_streams_per_connection"},
      {"append streams per connection too many",
       [](NodeConfig& c) { c.max_append_streams_per_connection = 65537; },
       "max_append_streams_per_connection"},
      {"stall timeout too short", [](NodeConfig& c) { c.stream_stall_timeout_ms = 99; },
       "stream_stall_timeout_ms"},
      {"streams per connection below peers",
       [](NodeConfig& c) { c.max_concurrent_streams_per_connection = 8; },
       "max_concurrent_streams_per_connection"},
      {"read bytes over 1 GiB", [](NodeConfig& c) { c.max_read_bytes = (1ULL << 30) + 1; },
       "at most 1 GiB"},
      {"tls cert without key", [](NodeConfig& c) { c.client_tls.cert_path = "a.crt"; },
       "--tls-key"},
      {"tls ca alone", [](NodeConfig& c) { c.client_tls.ca_path = "ca.crt"; },
       "--tls-cert and --tls-key"},
      {"peer tls without ca",
       [](NodeConfig& c) {
         c.client_tls = {"a.crt", "a.key", ""};
         c.peer_tls = {"a.crt", "a.key", ""};
       },
       "all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca"},
      {"peer tls without port tls",
       [](NodeConfig& c) {
         c.peer_tls = {"a.crt", "a.key", "ca.crt"};
       },
       "share one port"},
      {"port tls on a cluster without peer tls",
       [](NodeConfig& c) {
         c.client_tls = {"a.crt", "a.key", ""};
       },
       "peers dial the same TLS port"},
      // Addresses: ports are checked, not wrapped (99999 used to bind 34463), and no two members share one.
      {"member port above 65535", [](NodeConfig& c) { c.members[3] = "127.0.0.1:99999"; },
       "port 99999 out of range"},
      {"member port 65536", [](NodeConfig& c) { c.members[3] = "127.0.0.1:65536"; },
       "member 3 address"},
      {"member port 0", [](NodeConfig& c) { c.members[3] = "127.0.0.1:0"; }, "port 0 out of range"},
      {"member port not a number", [](NodeConfig& c) { c.members[3] = "127.0.0.1:70o1"; },
       "not a number"},
      {"member without host", [](NodeConfig& c) { c.members[3] = ":7003"; }, "has no host"},
      {"two members, one address", [](NodeConfig& c) { c.members[3] = c.members[1]; },
       "members 1 and 3 have the same address 127.0.0.1:7001"},
      {"listen port above 65535", [](NodeConfig& c) { c.listen_address = "0.0.0.0:70000"; },
       "listen address"},
      {"metrics port above 65535", [](NodeConfig& c) { c.metrics_address = "127.0.0.1:65536"; },
       "metrics address"},
      {"metrics on the member port", [](NodeConfig& c) { c.metrics_address = "127.0.0.1:7002"; },
       "takes the port of the listen address"},
      {"metrics on the listen port",
       [](NodeConfig& c) {
         c.listen_address = "0.0.0.0:9000";
         c.metrics_address = "127.0.0.1:9000";
       },
       "takes the port of the listen address"},
      // What Node::open and Server::start used to refuse only after creating the data directory.
      {"segment smaller than the largest entry",
       [](NodeConfig& c) { c.store.segment_size_bytes = 64 << 10; },
       "store: max_entry_size_bytes 4194304 does not fit in one segment of 65536 bytes"},
      {"segment below the minimum", [](NodeConfig& c) { c.store.segment_size_bytes = 4096; },
       "store: segment_size_bytes"},
      {"flush interval zero", [](NodeConfig& c) { c.store.flush_interval_ms = 0; },
       "flush_interval_ms"},
      {"election ticks above the core's bound",
       [](NodeConfig& c) { c.election_ticks = (1U << 20) + 1; },
       "election_ticks must be at most 1048576"},
      {"cluster id too long", [](NodeConfig& c) { c.cluster_id = std::string(257, 'c'); },
       "--cluster-id is longer than 256 characters"},
      {"streams per connection above int",
       [](NodeConfig& c) { c.max_concurrent_streams_per_connection = 1U << 31; },
       "max_concurrent_streams_per_connection"},
      // Bounds whose violation broke something later (a store append refused, a clock overflow, a send
      // limit exceeded, an Append that times out at once).
      {"entries per append above the store's batch",
       [](NodeConfig& c) { c.max_entries_per_append = 65537; }, "max_entries_per_append"},
      {"append bytes above 512 MiB", [](NodeConfig& c) { c.max_append_bytes = (512ULL << 20) + 1; },
       "max_append_bytes must be at most 256 MiB"},
      // An append over the node's queued-bytes bound is refused TOO_MANY_PENDING even on an idle node,
      // which clients retry until their deadline: such a bound must be refused at start-up.
      {"append bytes above the queued-bytes bound",
       [](NodeConfig& c) {
         c.store.max_entry_size_bytes = 4 << 20;
         c.max_append_bytes = (256ULL << 20) + 1;
       },
       "max_append_bytes must be at most 256 MiB, the node's bound on queued append bytes"},
      {"entry size zero", [](NodeConfig& c) { c.store.max_entry_size_bytes = 0; },
       "maximum entry size"},
      {"read entries above 16384", [](NodeConfig& c) { c.max_read_entries = 16385; },
       "max_read_entries"},
      {"retention age beyond the clock",
       [](NodeConfig& c) { c.retention_max_age_s = 10000000000ULL; }, "retention_max_age_s"},
      {"append timeout zero", [](NodeConfig& c) { c.append_timeout_ms = 0; }, "append_timeout_ms"},
  };
  for (const Case& test_case : cases) {
    NodeConfig config = valid_config();
    test_case.break_it(config);
    const std::string problem = validate(config);
    EXPECT_NE(problem.find(test_case.expected_words), std::string::npos)
        << test_case.name << ": got \"" << problem << "\"";
  }
}

TEST(NodeConfigValidate, TlsCombinationsThatWorkAreAccepted) {
  NodeConfig config = valid_config();
  config.client_tls = {"a.crt", "a.key", ""};
  config.peer_tls = {"a.crt", "a.key", "ca.crt"};
  EXPECT_EQ(validate(config), "");
  config.client_tls.ca_path = "clients-ca.crt";  // client certificates required too
  EXPECT_EQ(validate(config), "");
  NodeConfig single = valid_config();
  single.node_id = 1;
  single.members = {{1, "127.0.0.1:7001"}};
  single.client_tls = {"a.crt", "a.key", ""};  // one node has no peers to dial it
  EXPECT_EQ(validate(single), "");
}

TEST(NodeConfigValidate, AddressesThatWorkAreAccepted) {
  NodeConfig config = valid_config();
  config.members = {{1, "[::1]:7001"}, {2, "db-2.example.com:65535"}, {3, "127.0.0.1:1"}};
  config.node_id = 3;
  config.listen_address = "0.0.0.0:7003";
  config.metrics_address = "127.0.0.1:0";  // any free port: the bound one is logged
  EXPECT_EQ(validate(config), "");
  config.metrics_address = "127.0.0.1:9401";
  EXPECT_EQ(validate(config), "");
}

// A node opened on the largest values validate() accepts: Node::open used to refuse some of them
// (the Raft core's uncommitted bounds were smaller than one such Append) after creating the data
// directory and opening the log.
TEST(NodeConfigValidate, TheLargestAcceptedValuesOpenANode) {
  testing::TempDir dir;
  NodeConfig config;
  config.node_id = 1;
  config.members = {{1, "127.0.0.1:7001"}};
  config.data_dir = dir.path() + "/node";
  config.tick_ms = config_limits::kMaxTickMs;
  config.election_ticks = config_limits::kMaxElectionTicks;
  config.heartbeat_ticks = config_limits::kMaxElectionTicks - 1;
  config.max_entries_per_append = config_limits::kMaxEntriesPerAppend;
  config.max_append_bytes = config_limits::kMaxAppendBytes;
  config.max_read_entries = config_limits::kMaxReadEntries;
  config.max_read_bytes = config_limits::kMaxReadBytes;
  config.retention_max_age_s = config_limits::kMaxRetentionMaxAgeS;
  config.max_concurrent_streams_per_connection = config_limits::kMaxStreamsPerConnection;
  config.store.segment_size_bytes = 8 << 20;  // small files: the test only opens the log
  config.store.preallocate_next_segment = false;
  config.disk_high_watermark = 1.0;
  config.disk_low_watermark = 0.99;
  ASSERT_EQ(validate(config), "");
  struct NoPeers final : MessageSender {
    void send(raft::Message) override {}
  } no_peers;
  NodeError error;
  std::unique_ptr<Node> node = Node::open(config, &no_peers, &error);
  ASSERT_NE(node, nullptr) << error.message;
  node->stop();
}

TEST(NodeConfigValidate, BoundaryValuesAreAccepted) {
  NodeConfig config = valid_config();
  config.tick_ms = 10000;
  config.heartbeat_ticks = 1;
  config.election_ticks = 2;
  config.max_append_bytes = config.store.max_entry_size_bytes;
  for (std::uint64_t id = 4; id <= 7; ++id)
    config.members[id] = "127.0.0.1:70" + std::to_string(id);
  EXPECT_EQ(validate(config), "");
}

}  // namespace
}  // namespace raftlog::server

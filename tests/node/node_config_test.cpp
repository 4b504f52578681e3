#include "server/node_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace raftlog::server {
namespace {

NodeConfig valid_config() {
  NodeConfig config;
  config.node_id = 2;
  config.members = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  config.data_dir = "/tmp/raftlog-node-config-test";
  return config;
}

TEST(NodeConfigValidate, DefaultsWithIdMembersAndDirAreValid) {
  EXPECT_EQ(validate(valid_config()), "");
  NodeConfig single = valid_config();
  single.node_id = 1;
  single.members = {{1, "localhost:1"}};
  EXPECT_EQ(validate(single), "");
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
      {"eight members",
       [](NodeConfig& c) {
         for (std::uint64_t id = 4; id <= 8; ++id) c.members[id] = "127.0.0.1:70" + std::to_string(id);
       },
       "at most 7"},
      {"member id zero", [](NodeConfig& c) { c.members[0] = "127.0.0.1:7000"; }, "member ids"},
      {"empty address", [](NodeConfig& c) { c.members[3] = ""; }, "member 3"},
      {"address without port", [](NodeConfig& c) { c.members[3] = "localhost"; }, "host:port"},
      {"no data dir", [](NodeConfig& c) { c.data_dir.clear(); }, "data directory"},
      {"no cluster id", [](NodeConfig& c) { c.cluster_id.clear(); }, "cluster id"},
      {"tick zero", [](NodeConfig& c) { c.tick_ms = 0; }, "tick_ms"},
      {"tick too long", [](NodeConfig& c) { c.tick_ms = 10001; }, "tick_ms"},
      {"heartbeat zero", [](NodeConfig& c) { c.heartbeat_ticks = 0; }, "heartbeat_ticks"},
      {"election equal to heartbeat",
       [](NodeConfig& c) { c.election_ticks = c.heartbeat_ticks; }, "election_ticks"},
      {"no entries per append", [](NodeConfig& c) { c.max_entries_per_append = 0; }, "max_entries_per_append"},
      {"append bytes below entry size",
       [](NodeConfig& c) { c.max_append_bytes = c.store.max_entry_size_bytes - 1; }, "max_append_bytes"},
      {"read entries zero", [](NodeConfig& c) { c.max_read_entries = 0; }, "read limits"},
      {"read bytes zero", [](NodeConfig& c) { c.max_read_bytes = 0; }, "read limits"},
      {"pending appends zero", [](NodeConfig& c) { c.max_pending_appends = 0; }, "queue bounds"},
      {"input queue zero", [](NodeConfig& c) { c.max_input_queue = 0; }, "queue bounds"},
      {"dedup sequences zero", [](NodeConfig& c) { c.dedup_sequences_per_client = 0; }, "dedup"},
      {"dedup clients zero", [](NodeConfig& c) { c.dedup_max_clients = 0; }, "dedup"},
      {"tail streams zero", [](NodeConfig& c) { c.max_tail_streams = 0; }, "max_tail_streams"},
      {"append streams zero", [](NodeConfig& c) { c.max_append_streams = 0; }, "max_append_streams"},
      {"appends per stream too many", [](NodeConfig& c) { c.max_appends_per_stream = 65537; }, "max_appends_per_stream"},
      {"tail streams per connection zero", [](NodeConfig& c) { c.max_tail_streams_per_connection = 0; },
       "max_tail_streams_per_connection"},
      {"append streams per connection too many",
       [](NodeConfig& c) { c.max_append_streams_per_connection = 65537; }, "max_append_streams_per_connection"},
      {"stall timeout too short", [](NodeConfig& c) { c.stream_stall_timeout_ms = 99; }, "stream_stall_timeout_ms"},
      {"streams per connection below peers", [](NodeConfig& c) { c.max_concurrent_streams_per_connection = 8; },
       "max_concurrent_streams_per_connection"},
      {"read bytes over 1 GiB", [](NodeConfig& c) { c.max_read_bytes = (1ULL << 30) + 1; }, "at most 1 GiB"},
      {"tls cert without key", [](NodeConfig& c) { c.client_tls.cert_path = "a.crt"; }, "--tls-key"},
      {"tls ca alone", [](NodeConfig& c) { c.client_tls.ca_path = "ca.crt"; }, "--tls-cert and --tls-key"},
      {"peer tls without ca",
       [](NodeConfig& c) {
         c.client_tls = {"a.crt", "a.key", ""};
         c.peer_tls = {"a.crt", "a.key", ""};
       },
       "all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca"},
      {"peer tls without port tls", [](NodeConfig& c) { c.peer_tls = {"a.crt", "a.key", "ca.crt"}; },
       "share one port"},
      {"port tls on a cluster without peer tls", [](NodeConfig& c) { c.client_tls = {"a.crt", "a.key", ""}; },
       "peers dial the same TLS port"},
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

TEST(NodeConfigValidate, BoundaryValuesAreAccepted) {
  NodeConfig config = valid_config();
  config.tick_ms = 10000;
  config.heartbeat_ticks = 1;
  config.election_ticks = 2;
  config.max_append_bytes = config.store.max_entry_size_bytes;
  for (std::uint64_t id = 4; id <= 7; ++id) config.members[id] = "127.0.0.1:70" + std::to_string(id);
  EXPECT_EQ(validate(config), "");
}

}  // namespace
}  // namespace raftlog::server

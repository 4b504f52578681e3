// raftlogd's /metrics page against docs/metrics.md, in process and without a cluster: with every
// source set (a leader with a peer and a snapshot in flight, a snapshot being received, inbound
// admission, the watermark) and one refused client RPC, the page serves exactly the documented
// families, each with its documented type and label names (plus the constant `node_id`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "server/metrics.h"
#include "testing/http_get.h"

namespace raftlog::server {
namespace {

struct Family {
  std::string type;
  std::set<std::string> labels;
  bool operator==(const Family&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Family& family) {
  out << family.type << " {";
  for (const std::string& label : family.labels) out << ' ' << label;
  return out << " }";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Backquoted words outside parentheses: the label names of a labels cell ("`method` (e.g.
// `raftlog.v1.Log/Append`), `code` (...)" names method and code).
std::set<std::string> label_names(const std::string& cell) {
  std::set<std::string> names;
  int depth = 0;
  for (std::size_t at = 0; at < cell.size(); ++at) {
    if (cell[at] == '(') ++depth;
    if (cell[at] == ')') --depth;
    if (cell[at] != '`') continue;
    const std::size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    if (depth == 0) names.insert(cell.substr(at + 1, end - at - 1));
    at = end;
  }
  return names;
}

// The table rows "| `raftlog_name` | type | labels | meaning |" of docs/metrics.md.
std::map<std::string, Family> documented_families() {
  std::map<std::string, Family> families;
  std::istringstream lines(read_file(std::string(RAFTLOG_SOURCE_DIR) + "/docs/metrics.md"));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("| `raftlog_")) continue;
    // Cells between the bars; the first three (name, type, labels) hold no bar of their own.
    std::vector<std::string> cells;
    for (std::size_t bar = 0; cells.size() < 3;) {
      const std::size_t next = line.find('|', bar + 1);
      if (next == std::string::npos) break;
      const std::string cell = line.substr(bar + 1, next - bar - 1);
      const std::size_t first = cell.find_first_not_of(' ');
      cells.push_back(first == std::string::npos
                          ? std::string()
                          : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
      bar = next;
    }
    if (cells.size() < 3) {
      ADD_FAILURE() << "row without name, type and labels: " << line;
      continue;
    }
    const std::string name = cells[0].substr(cells[0].find('`') + 1);
    Family family{cells[1], label_names(cells[2])};
    family.labels.insert("node_id");  // every series carries it (docs/metrics.md, first section)
    families[name.substr(0, name.find('`'))] = family;
  }
  return families;
}

// The families of a Prometheus text page: "# TYPE" lines give name and type, the samples their
// label names (a histogram's _bucket/_sum/_count series count for it, its `le` does not).
std::map<std::string, Family> exposed_families(const std::string& page) {
  std::map<std::string, Family> families;
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with("# TYPE ")) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      families[name].type = type;
      continue;
    }
    if (line.empty() || line.starts_with('#')) continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string base = name.substr(0, name.size() - std::string(suffix).size());
      if (name.ends_with(suffix) && families.contains(base) && families[base].type == "histogram") {
        name = base;
      }
    }
    Family& family = families[name];
    const std::size_t open = line.find('{');
    if (open == std::string::npos || open > line.find(' ')) continue;
    // k1="v1",k2="v2"} value: a value may hold an escaped quote.
    for (std::size_t at = open + 1; at < line.size() && line[at] != '}';) {
      const std::size_t equals = line.find('=', at);
      if (equals == std::string::npos) {
        ADD_FAILURE() << "a label without a value: " << line;
        break;
      }
      const std::string key = line.substr(at, equals - at);
      if (key != "le") family.labels.insert(key);
      std::size_t quote = equals + 2;
      while (quote < line.size() && line[quote] != '"') quote += line[quote] == '\\' ? 2 : 1;
      at = quote + 1;
      if (at < line.size() && line[at] == ',') ++at;
    }
  }
  return families;
}

TEST(MetricsExposition, ServesExactlyTheDocumentedFamiliesWithTheirTypesAndLabels) {
  std::string error;
  auto metrics = Metrics::start(7, "127.0.0.1:0", ::testing::TempDir(), &error);
  ASSERT_NE(metrics, nullptr) << error;
  metrics->set_status_source([] {
    NodeStatus status;
    status.node_id = 7;
    status.role = raft::Role::kLeader;
    status.term = 3;
    status.leader_id = 7;
    PeerStatus peer;
    peer.id = 2;
    peer.match_index = 5;
    status.peers.push_back(peer);
    return status;
  });
  metrics->set_snapshot_source([](const NodeStatus&) {
    SnapshotTransfers transfers;
    SnapshotTransfer sending;
    sending.peer = 2;
    sending.index = 9;
    sending.bytes_done = 10;
    sending.bytes_total = 20;
    transfers.sending.push_back(sending);
    SnapshotTransfer receiving = sending;
    receiving.state = SnapshotTransfer::State::kReceiving;
    transfers.receiving = receiving;
    return transfers;
  });
  metrics->set_admission_source([] { return InboundStats{}; });
  metrics->set_outbound_source([] { return OutboundTotals{}; });
  metrics->set_watermark_source([] { return false; });
  metrics->request_answered("raftlog.v1.Log/Append", 8, std::chrono::milliseconds(2), "DISK_FULL");

  const auto page = raftlog::testing::http_get(metrics->bound_address(), "/metrics");
  ASSERT_TRUE(page.has_value()) << metrics->bound_address();
  const std::map<std::string, Family> documented = documented_families();
  const std::map<std::string, Family> exposed = exposed_families(*page);
  ASSERT_GT(documented.size(), 50u);
  for (const auto& [name, family] : documented) {
    const auto it = exposed.find(name);
    if (it == exposed.end()) {
      ADD_FAILURE() << name << " is documented and not served";
    } else {
      EXPECT_EQ(it->second, family) << name << ": served (left) and documented (right) differ";
    }
  }
  for (const auto& [name, family] : exposed) {
    // prometheus-cpp's own exposer_* families are not raftlogd's.
    if (name.starts_with("raftlog_")) {
      EXPECT_TRUE(documented.contains(name)) << name << " is served and not documented";
    }
  }
}

// drills7 L1: a follower catching up to its leader's commit index (health NOT_SERVING) shows as 1,
// a caught-up one as 0 (the alert and dashboard read it).
TEST(MetricsExposition, AFollowerCatchingUpToItsLeaderIsOne) {
  std::atomic<std::uint64_t> catching_up_to{15189};
  std::string error;
  auto metrics = Metrics::start(3, "127.0.0.1:0", ::testing::TempDir(), &error);
  ASSERT_NE(metrics, nullptr) << error;
  metrics->set_status_source([&catching_up_to] {
    NodeStatus status;
    status.node_id = 3;
    status.role = raft::Role::kFollower;
    status.leader_id = 1;
    status.catching_up_to_leader_commit = catching_up_to.load();
    return status;
  });
  const auto value = [&]() -> std::string {
    const auto page = raftlog::testing::http_get(metrics->bound_address(), "/metrics");
    if (!page.has_value()) return "no page";
    std::istringstream lines(*page);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("raftlog_node_catching_up_to_leader{") ||
          line.starts_with("raftlog_node_catching_up_to_leader ")) {
        return line.substr(line.rfind(' ') + 1);
      }
    }
    return "not served";
  };
  EXPECT_EQ(value(), "1");
  catching_up_to.store(0);
  EXPECT_EQ(value(), "0");
}

}  // namespace
}  // namespace raftlog::server

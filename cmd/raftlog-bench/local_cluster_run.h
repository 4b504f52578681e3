// What the commands that run their own local cluster share: starting it, the line that says so,
// its client endpoints, and keeping the nodes' logs.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "testing/local_cluster.h"

namespace raftlog::bench {

// Builds the cluster of `options`, starts its nodes 1..`start_count` (every node when 0) and waits
// up to 15 s for a leader. Null, with why on `err`, when it does not come up.
std::unique_ptr<testing::LocalCluster> start_local_cluster(
    const testing::LocalClusterOptions& options, std::ostream& err, int start_count = 0);

// "started a local N-node cluster (F flush) on ADDRESSES", without an end of line.
std::string started_line(const testing::LocalCluster& cluster, const std::string& flush_mode);

// The client addresses of nodes 1..`count` (every node when 0).
std::vector<std::string> endpoints_of(const testing::LocalCluster& cluster, int count = 0);

// Copies every node's log into `dir` (created if missing) as n<id>.log; the cluster's own directory
// is removed when it is destroyed.
void keep_logs(const testing::LocalCluster& cluster, const std::string& dir, std::ostream& err);

}  // namespace raftlog::bench

#include "local_cluster_run.h"

#include <chrono>
#include <exception>
#include <filesystem>

namespace raftlog::bench {

std::unique_ptr<testing::LocalCluster> start_local_cluster(
    const testing::LocalClusterOptions& options, std::ostream& err, int start_count) {
  std::unique_ptr<testing::LocalCluster> cluster;
  try {
    cluster = std::make_unique<testing::LocalCluster>(options);
  } catch (const std::exception& e) {
    err << "cannot start a local cluster: " << e.what() << "\n";
    return nullptr;
  }
  if (start_count == 0) {
    cluster->start_all();
  } else {
    for (int id = 1; id <= start_count; ++id) cluster->start(id);
  }
  if (cluster->wait_for_leader(std::chrono::seconds(15)) == 0) {
    err << "the local cluster elected no leader:\n" << cluster->log_tail(1);
    return nullptr;
  }
  return cluster;
}

std::string started_line(const testing::LocalCluster& cluster, const std::string& flush_mode) {
  return "started a local " + std::to_string(cluster.size()) + "-node cluster (" + flush_mode +
         " flush) on " + cluster.endpoints();
}

std::vector<std::string> endpoints_of(const testing::LocalCluster& cluster, int count) {
  std::vector<std::string> endpoints;
  for (int id = 1; id <= (count == 0 ? cluster.size() : count); ++id)
    endpoints.push_back(cluster.address(id));
  return endpoints;
}

void keep_logs(const testing::LocalCluster& cluster, const std::string& dir, std::ostream& err) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (int id = 1; id <= cluster.size() && !ec; ++id) {
    std::filesystem::copy_file(cluster.log_file(id),
                               std::filesystem::path(dir) / ("n" + std::to_string(id) + ".log"),
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  if (ec) err << "--keep-logs " << dir << ": " << ec.message() << "\n";
}

}  // namespace raftlog::bench

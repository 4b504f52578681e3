#include "restart_form.h"

#include <filesystem>
#include <system_error>

#include "server/join.h"
#include "server/node_identity.h"

namespace raftlog::raftlogd {

std::string data_dir_restart_form_problem(const server::NodeConfig& config, bool joining) {
  std::error_code error;
  if (config.data_dir.empty() || !std::filesystem::is_directory(config.data_dir, error)) return "";
  // IDENTITY first: another node's directory says so whatever the member list (a wrong --id makes
  // that list wrong too).
  if (std::string problem = server::check_data_dir_identity(config); !problem.empty()) {
    return problem;
  }
  auto recorded = server::read_join_record(config.data_dir);
  if (!recorded.ok()) return config.data_dir + "/JOIN: " + recorded.status().to_string();
  if (!recorded->has_value()) {
    // The inverse (review of lagging6, #6): a founder's directory started with --join was told by
    // prepare_join's member check to name itself alone, which is wrong for it.
    if (joining && server::data_dir_has_state(config.data_dir)) {
      return "--join: " + config.data_dir +
             " holds a node's state but no JOIN record: it was not created by --join (start it "
             "with its --members, without --join)";
    }
    return "";
  }
  if (config.members.size() == 1 && config.members.contains(config.node_id)) return "";
  std::string members_of_record;
  for (std::uint64_t id : (*recorded)->bootstrap_voters) {
    members_of_record += (members_of_record.empty() ? "" : ",") + std::to_string(id);
  }
  return config.data_dir + " was created by --join (it holds a JOIN record; the cluster's first " +
         "voters were " + members_of_record + "): --members must name this node alone (" +
         std::to_string(config.node_id) + "=HOST:PORT); the others come from the record" +
         (joining ? " (a restart ignores --join's addresses)" : "");
}

}  // namespace raftlog::raftlogd

// The golden tests' interpreter: real Raft cores over MemoryLog, driven one command at a time, every
// Ready and every delivered message printed (describe.h). Nothing runs between commands: a core's
// outputs wait in its Ready until `process-ready` or `stabilize` hands them to the driver, and sent
// messages wait in the network until `deliver-msgs` or `stabilize`.
//
// The driver persists each Ready at once and in full (types.h's contract, steps 1-4 without delay):
// truncate and append to the node's log, queue `messages`, keep the hard state, report the log's end
// with on_persisted(), then queue `messages_after_persist`. So the log and hard state a node holds are
// also what survives `crash-restart`; what a crash loses is whatever the core had not yet handed out.
//
// Commands (ids are node ids 1..N; "[...]" optional):
//   add-nodes N [pre-vote=B] [check-quorum=B] [election-ticks=T] [heartbeat-ticks=H] [max-entries=K]
//             [max-inflight=M]
//       creates voters 1..N (each seeded with its id). Input lines "ID [log=T,T,...] [term=T] [vote=V]
//       [commit=C]" restore a node from that log (entry i has term T_i) and hard state.
//   campaign ID                 ticks ID (not a leader, no pending Ready) until its election timeout
//                               fires: it pre-campaigns, or campaigns without pre-vote
//   tick ID [N]                 ticks ID N times (default 1)
//   propose ID PAYLOAD...       one proposal of one entry per payload
//   read-index ID REQUEST       starts a linearizable read with that request id
//   transfer-leadership FROM TO
//   process-ready [ID...]       hands every pending Ready of these nodes (default all) to the driver
//   deliver-msgs [ID...] [type=T] [count=N]   delivers queued messages to these nodes (default all),
//                               oldest first, only of type T (e.g. Append), at most N per node
//   drop-msgs [ID...] [type=T] [count=N]      the same, but the messages are lost
//   stabilize                   process-ready and deliver-msgs for all nodes until nothing is left
//   isolate ID...               messages from or to these nodes are lost when delivered
//   heal                        ends every isolation
//   crash-restart ID            a new core for ID from its log and hard state; its old Ready is lost
//   status [ID...]              role, term, vote, leader, commit and log (index/term) of each node
//   log ID                      every entry of the node's log
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "describe.h"
#include "raft/memory_log.h"
#include "raft/raft.h"

namespace raftlog::raft::golden {

// A malformed command or one the cluster's state cannot carry out (a bug in the script).
class ScriptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandLine {
  std::string name;
  std::vector<std::string> args;               // positional words
  std::map<std::string, std::string> options;  // key=value words
};

CommandLine parse_command_line(const std::string& line);

class Interaction {
 public:
  // Runs one command; returns what happened. Throws ScriptError.
  Lines run(const std::string& command_line, const std::vector<std::string>& input);

 private:
  struct Node {
    Config config;
    MemoryLog log;         // persisted at once: the log a restart recovers
    HardState hard_state;  // as last persisted
    std::unique_ptr<Raft> raft;
  };
  struct MessageFilter {
    std::set<NodeId> recipients;  // empty: every node
    std::optional<MessageType> type;
    std::size_t per_node = SIZE_MAX;
  };

  void add_nodes(const CommandLine& command, const std::vector<std::string>& input, Lines& out);
  void campaign(const CommandLine& command, Lines& out);
  void tick(const CommandLine& command, Lines& out);
  void propose(const CommandLine& command, Lines& out);
  void read_index(const CommandLine& command, Lines& out);
  void transfer_leadership(const CommandLine& command, Lines& out);
  void stabilize(Lines& out);
  void crash_restart(const CommandLine& command, Lines& out);
  void print_status(const std::vector<NodeId>& ids, Lines& out) const;
  void print_log(NodeId id, Lines& out) const;

  // The driver: true when something was done.
  bool process_ready(NodeId id, Lines& out);
  bool move_messages(const MessageFilter& filter, bool deliver, Lines& out);

  Node& node(NodeId id);
  const Node& node(NodeId id) const;
  NodeId node_id(const std::string& word) const;
  std::vector<NodeId> node_ids(const std::vector<std::string>& words, std::size_t from) const;
  std::vector<NodeId> all_ids() const;
  MessageFilter message_filter(const CommandLine& command) const;

  std::map<NodeId, std::unique_ptr<Node>> nodes_;
  std::deque<Message> network_;  // sent and not yet delivered or lost, oldest first
  std::set<NodeId> isolated_;
};

}  // namespace raftlog::raft::golden

// The replica's result, status and event types (src/replica/), as the server's code names them.
#pragma once

#include "replica/node_events.h"
#include "replica/node_status.h"
#include "replica/results.h"

#include <string>
#include <vector>

namespace raftlog::server {

using replica::AppendResult;
using replica::ErrorCode;
using replica::failed_append;
using replica::make_error;
using replica::MembershipResult;
using replica::MessageSender;
using replica::NodeError;
using replica::NodeEvents;
using replica::NodeStatus;
using replica::PeerStatus;
using replica::ReadIndexResult;
using replica::TransferResult;
using replica::TrimResult;

// An appended entry's optional topic and keys (raftlog.v1.EntryAttributes; src/derived/envelope.h
// has their bounds). Node::append validates them and puts them in the entry's envelope.
struct EntryAttributes {
  std::string topic;
  std::vector<std::string> keys;
};

}  // namespace raftlog::server

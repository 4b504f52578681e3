// Conversions between raftlog.v1 messages and the node's types for topics and keys: an append's
// attributes in, an entry's envelope out (the user's bytes as the payload, topic/keys/timestamp in
// their own fields).
#pragma once

#include <vector>

#include "raft/types.h"
#include "raftlog/v1/client.pb.h"
#include "server/node_types.h"

namespace raftlog::server {

// Moves the request's attributes out (validated later, by Node::append).
std::vector<EntryAttributes> take_attributes(raftlog::v1::AppendRequest* request);

// For an entry with an envelope: sets payload (the user's bytes), has_attributes, topic, keys and
// timestamp_ms, and returns true. False for an entry without one, or one whose envelope does not
// decode (written by a forged peer: the entry is then served as its raw bytes).
bool fill_envelope(const raft::Entry& entry, raftlog::v1::Entry* out);

// The whole entry as raftlog.v1.Entry (what Read returns for it).
void entry_to_wire(const raft::Entry& entry, raftlog::v1::Entry* out);

}  // namespace raftlog::server

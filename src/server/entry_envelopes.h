// Topic and keys on appended entries: the validation of an append's attributes and the envelope
// each of its entries then starts with (src/derived/envelope.h). No gRPC: the services convert
// raftlog.v1.EntryAttributes to EntryAttributes (topics_wire.h), the Node calls this.
#pragma once

#include <string>
#include <vector>

#include "server/node_types.h"

namespace raftlog::server {

// Checks `attributes` (one per payload; topic and key bounds) and replaces each payload by its
// envelope (timestamp 0: the leader stamps it) followed by the payload's bytes. On a refusal
// (INVALID_ARGUMENT, reason BAD_ATTRIBUTES, BAD_TOPIC or BAD_KEYS) `payloads` is unchanged.
NodeError wrap_in_envelopes(const std::vector<EntryAttributes>& attributes,
                            std::vector<std::string>* payloads);

}  // namespace raftlog::server

// The durability rules of the Ready driver that the simulator's self-test deliberately breaks.
//
// A LINK-TIME seam like the Raft core's (src/raft/rules.h): production targets (raftlog_replica,
// raftlog_replica_unbound) link durability_rules.cpp; the test-only targets
// raftlog_replica_broken_{ack,held} link the same replica objects with one rule replaced by
// src/replica/testing/broken_*_rules.cpp. No production code path can select a broken rule.
#pragma once

#include <cstdint>

namespace raftlog::replica::rules {

// The index up to which the core may count this node's own log as persisted (on a leader: toward the
// quorum that commits, and so acknowledges, an append). Sync flush mode: only what a flush covers.
// Async flush mode: what is written to the mapping (docs/durability.md).
std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async);

// Whether acknowledgements and votes that vouch for the log up to `required_index` may leave now
// that the log is durable through `durable_index`.
bool may_release_held(std::uint64_t required_index, std::uint64_t durable_index);

}  // namespace raftlog::replica::rules

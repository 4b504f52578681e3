// Producer: one-entry appends from many threads of one process, coalesced into shared Append RPCs.
//
// Why: a unary Append per entry costs the cluster a gRPC call, a Raft proposal and a wake-up on every
// node; an Append of 64 entries costs about the same as one of a single entry (docs/benchmarks.md,
// "batched"). Applications with many concurrent writers (a thread per request, a worker pool) each
// calling Producer::append(entry) get the batched cost without batching themselves, like Kafka's
// producer does. The caller's contract is unchanged: append() returns once the entry is committed on a
// majority, with the entry's own index.
//
// How: callers queue their entry and wait. Up to `lanes` Append RPCs run at once; each lane is a
// Client of its own (its own client id and sequence numbers, so retries stay idempotent and a server
// sees each lane's sequences in order). There is no thread of the Producer's own and no timer: a
// caller that finds a free lane takes the oldest queued entries (up to max_batch_entries and
// max_batch_bytes) and runs the RPC for all of them, then wakes each owner. Batches therefore form by
// themselves while the lanes are busy and a lone caller never waits for a batch to fill.
//
// Order and atomicity: entries get indexes in queue order within a batch; each append() returns after
// its own entry committed, so a thread's successive appends are in its order in the log. A batch is
// one atomic Append: when it fails, every entry in it fails with the same status and none was
// written — except INVALID_ARGUMENT (for example one entry larger than the server's limit, or a
// server whose max entries per append is below max_batch_entries): the entries of such a batch are
// then sent one by one, so only the bad entry fails.
//
// Bounds: at most max_queued_entries entries wait (RESOURCE_EXHAUSTED beyond that, nothing written);
// each queued entry belongs to a blocked caller, so the queue also never exceeds the number of
// calling threads. A call returns within about the lane client's retry_deadline_ms per RPC it runs or
// waits for (each lane's Client bounds its retries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "client/client.h"

namespace raftlog::client {

struct ProducerOptions {
  Options client;  // for every lane; client_id must be 0 (each lane draws its own)
  // Append RPCs in flight at once: 1..kMaxProducerLanes. One is the default: the leader already
  // pipelines one lane's consecutive batches through its group commit, and on the 2-core test machine
  // 64 callers got 12.6k appends/s with 1 lane, 11.5k with 2 and 9.4k with 4 (bigger batches cost
  // less per entry; docs/benchmarks.md). More lanes help when the round trip, not the flush, dominates.
  std::size_t lanes = 1;
  std::size_t max_batch_entries = 256;  // per RPC: 1..1024 (the server's default bound is 1024)
  std::size_t max_batch_bytes =
      1u << 20;  // payload bytes per RPC (an entry larger than this goes alone)
  std::size_t max_queued_entries = 65536;  // entries waiting for a lane, 1..1'048'576
};

inline constexpr std::size_t kMaxProducerLanes = 64;

// Empty when usable, otherwise a sentence naming the first problem.
std::string validate_producer_options(const ProducerOptions& options);

class Producer {
 public:
  // INVALID_ARGUMENT when validate_producer_options fails or a lane's Client cannot be created.
  static Result<std::unique_ptr<Producer>> create(ProducerOptions options);
  ~Producer();  // callers must have returned from append() (like any object they use)
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Appends one entry; returns once it is committed (first_index == last_index == its index, sequence
  // = the lane's sequence of the batch it travelled in). Thread-safe; concurrent calls share RPCs.
  Result<AppendResult> append(std::string payload);

  struct Stats {
    std::uint64_t rpcs = 0;     // Append RPCs run (including one-by-one resends)
    std::uint64_t entries = 0;  // entries those RPCs carried
    std::size_t queued = 0;     // entries waiting for a lane right now
  };
  Stats stats() const;

 private:
  class Impl;
  explicit Producer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::client

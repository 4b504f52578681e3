// The node's heap policy: freed large buffers are kept for reuse instead of being handed back to
// the kernel at once.
//
// Why: with glibc's defaults every buffer of 128 KiB or more (a client's 4 MiB entry, a peer's
// multi-MiB append, their protobuf copies) is a fresh mmap, and freeing it unmaps it; the next one is
// faulted in again page by page. On the machines measured (docs/benchmarks.md, "Large entries and
// leadership") those page faults were a third of a loaded node's CPU, and the stalls they caused in
// the Raft loop and gRPC's threads cost leadership. Keeping the memory makes the same load run two
// to five times faster.
//
// The price: a node's resident memory stays near its peak working set (bounded by the queue, stream
// and message bounds of docs/configuration.md) plus up to `retain_bytes` of freed heap per arena top.
#pragma once

#include <cstdint>
#include <string>

namespace raftlog::raftlogd {

// Largest value glibc accepts for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2): every buffer of
// at most this size comes from the heap, which covers the largest entry and peer message.
inline constexpr std::uint64_t kLargestHeapBufferBytes = std::uint64_t{32} << 20;
// mallopt takes an int.
inline constexpr std::uint64_t kMaxRetainBytes = (std::uint64_t{2} << 30) - 1;

// retain_bytes 0: glibc's defaults, untouched. Otherwise buffers up to kLargestHeapBufferBytes come
// from the heap and up to retain_bytes of free heap is kept before trimming. "" on success, else why
// glibc refused (the caller reports it; the node still runs, with glibc's defaults).
std::string apply_allocator_policy(std::uint64_t retain_bytes);

}  // namespace raftlog::raftlogd

#include "allocator_policy.h"

#include <malloc.h>

#include <limits>

namespace raftlog::raftlogd {

std::string apply_allocator_policy(std::uint64_t retain_bytes) {
  if (retain_bytes == 0) return {};
  static_assert(kMaxRetainBytes <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()));
  if (retain_bytes > kMaxRetainBytes)
    return "at most 2 GiB - 1 bytes of freed heap can be retained";
  // M_MMAP_THRESHOLD also turns off glibc's dynamic threshold, so the setting holds.
  if (::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargestHeapBufferBytes)) != 1) {
    return "glibc refused M_MMAP_THRESHOLD";
  }
  if (::mallopt(M_TRIM_THRESHOLD, static_cast<int>(retain_bytes)) != 1)
    return "glibc refused M_TRIM_THRESHOLD";
  return {};
}

}  // namespace raftlog::raftlogd

// The disk's free space, as the leader's append path sees it: a probe (statvfs in raftlogd, a
// scripted one in tests) and the watermark logic over it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "replica/results.h"

namespace raftlog::replica {

struct DiskSpace {
  std::uint64_t free_bytes = 0;  // available to this process
  double used_ratio = 0.0;       // of the file system, 0..1
};

class DiskProbe {
 public:
  virtual ~DiskProbe() = default;
  // nullopt when the space cannot be read (the store then decides on its own).
  virtual std::optional<DiskSpace> probe() = 0;
};

// statvfs(2) of a directory's file system.
class StatvfsDiskProbe final : public DiskProbe {
 public:
  explicit StatvfsDiskProbe(std::string path) : path_(std::move(path)) {}
  std::optional<DiskSpace> probe() override;

 private:
  std::string path_;
};

// The leader refuses an append the disk could not take, rather than accept it into Raft and then fail
// to write it (which would stop the node): it needs the append plus a whole segment to spare, since a
// roll-over preallocates the next segment in full. Followers cannot refuse what the leader sends; a
// follower whose disk fills stops (docs/operations.md).
//
// Before that hard limit comes the high watermark (a fraction of the file system in use): appends
// are refused with reason DISK_WATERMARK, so that operators get a clear signal, room to act
// (retention, trim, a bigger disk) and reads keep working. Hysteresis: appends resume only once use
// falls to the low watermark, so that a disk hovering at the limit does not flap. A high watermark
// of 1 turns the watermark off (the DISK_FULL check still applies).
class DiskWatermark {
 public:
  // How often the probe is read at most.
  static constexpr auto kCheckInterval = std::chrono::milliseconds(100);

  DiskWatermark(std::uint64_t node_id, std::string data_dir, double high, double low)
      : node_id_(node_id), data_dir_(std::move(data_dir)), high_(high), low_(low) {}

  // Whether an append of `append_bytes` may go ahead; otherwise `error` says why (kResourceExhausted).
  bool has_room(DiskProbe& probe, std::chrono::steady_clock::time_point now,
                std::uint64_t append_bytes, std::uint64_t segment_bytes, NodeError* error);
  // Reads the probe if kCheckInterval has passed since the last read: every node does on its ticks,
  // so that a follower's responses say whether its disk is past the watermark (a leader short of
  // disk hands leadership only to a follower with room).
  void refresh_if_due(DiskProbe& probe, std::chrono::steady_clock::time_point now);
  // Any thread (metrics, status).
  bool exceeded() const { return exceeded_.load(); }
  // The file system's use (0..1) at the last probe (0 before one, or when it could not be read).
  double used_ratio() const { return used_ratio_seen_.load(); }
  // Whether the last probe read the file system's use: before the first one (a node just started)
  // or after a failed one, used_ratio()'s 0 means "unknown", and status says so rather than 0 %.
  bool used_ratio_known() const { return used_ratio_known_.load(); }
  double high_watermark() const { return high_; }

 private:
  void refresh(DiskProbe& probe);

  const std::uint64_t node_id_;
  const std::string data_dir_;
  const double high_;
  const double low_;
  std::chrono::steady_clock::time_point checked_at_{};
  std::uint64_t free_bytes_ = 0;
  double used_ratio_ = 0.0;
  std::atomic<bool> exceeded_{false};
  std::atomic<double> used_ratio_seen_{0.0};  // used_ratio_, for readers on other threads
  std::atomic<bool> used_ratio_known_{false};
};

}  // namespace raftlog::replica

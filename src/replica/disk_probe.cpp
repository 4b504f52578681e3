#include "replica/disk_probe.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <cstdint>

namespace raftlog::replica {

std::optional<DiskSpace> StatvfsDiskProbe::probe() {
  struct statvfs fs {};
  if (::statvfs(path_.c_str(), &fs) != 0) return std::nullopt;
  DiskSpace space;
  space.free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  space.used_ratio =
      fs.f_blocks == 0 ? 0.0
                       : 1.0 - static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks);
  return space;
}

void DiskWatermark::refresh(DiskProbe& probe) {
  const std::optional<DiskSpace> space = probe.probe();
  if (space) {
    free_bytes_ = space->free_bytes;
    used_ratio_ = space->used_ratio;
  } else {
    free_bytes_ = UINT64_MAX;  // unknown: let the store decide
    used_ratio_ = 0.0;
  }
  used_ratio_seen_.store(used_ratio_);
  used_ratio_known_.store(space.has_value());
  const bool exceeded = exceeded_.load();
  if (!exceeded && high_ < 1.0 && used_ratio_ >= high_) {
    exceeded_.store(true);
    spdlog::warn(
        "node {}: disk {:.1f}% used in {} (high watermark {:.1f}%): until use falls to {:.1f}% "
        "it reports no room to its leader, and while it leads it refuses appends and hands "
        "leadership to a node with room",
        node_id_, used_ratio_ * 100, data_dir_, high_ * 100, low_ * 100);
  } else if (exceeded && used_ratio_ <= low_) {
    exceeded_.store(false);
    spdlog::info(
        "node {}: disk {:.1f}% used in {} (low watermark {:.1f}%): it reports room again, and "
        "accepts appends while it leads",
        node_id_, used_ratio_ * 100, data_dir_, low_ * 100);
  }
}

void DiskWatermark::refresh_if_due(DiskProbe& probe, std::chrono::steady_clock::time_point now) {
  if (now - checked_at_ < kCheckInterval) return;
  refresh(probe);
  checked_at_ = now;
}

bool DiskWatermark::has_room(DiskProbe& probe, std::chrono::steady_clock::time_point now,
                             std::uint64_t append_bytes, std::uint64_t segment_bytes,
                             NodeError* error) {
  refresh_if_due(probe, now);
  if (exceeded_.load()) {
    *error = make_error(
        ErrorCode::kResourceExhausted,
        fmt::format("disk {:.1f}% used on the leader ({}), above the high watermark {:.1f}%; "
                    "appends resume below {:.1f}% (free space or trim the log), reads keep working",
                    used_ratio_ * 100, data_dir_, high_ * 100, low_ * 100),
        kReasonDiskWatermark);
    return false;
  }
  const std::uint64_t needed = append_bytes + segment_bytes;
  if (free_bytes_ >= needed) return true;
  *error = make_error(ErrorCode::kResourceExhausted,
                      "disk full on the leader: " + std::to_string(free_bytes_) +
                          " bytes free in " + data_dir_ + ", " + std::to_string(needed) +
                          " needed (the append plus one segment); free space and retry",
                      kReasonDiskFull);
  free_bytes_ = 0;  // keep refusing until the next check
  return false;
}

}  // namespace raftlog::replica

#include "store/suspect_marker.h"

#include <spdlog/spdlog.h>

#include "store/commit_log_impl.h"
#include "store/endian.h"
#include "util/check.h"

namespace raftlog::store {
namespace {

constexpr std::uint32_t kSuspectMarkerVersion = 1;
constexpr std::size_t kSuspectMarkerBytes = 16;

}  // namespace

std::string encode_suspect_marker(std::uint64_t suspect_index) {
  std::string payload(kSuspectMarkerBytes, '\0');
  put_u32(payload.data(), kSuspectMarkerVersion);
  put_u32(payload.data() + 4, 0);
  put_u64(payload.data() + 8, suspect_index);
  RAFTLOG_CHECK(decode_suspect_marker(payload) == suspect_index,
                "an encoded suspect marker decodes back to its index");
  return payload;
}

std::optional<std::uint64_t> decode_suspect_marker(std::string_view payload) {
  if (payload.size() != kSuspectMarkerBytes) return std::nullopt;
  if (get_u32(payload.data()) != kSuspectMarkerVersion) return std::nullopt;
  return get_u64(payload.data() + 8);
}

Status CommitLog::Impl::load_suspect_marker() {
  suspect_index_ = 0;
  // Created by the first mark_suspect(): a directory that never had a suspect entry has no file.
  if (!env_->exists(join_path(dir_, kSuspectFileName))) return Status();
  auto file = DurableRecordFile::open(env_, join_path(dir_, kSuspectFileName), dir_);
  if (!file.ok()) return file.status();
  suspect_file_ = std::move(*file);
  if (const auto& payload = suspect_file_->current()) {
    if (auto index = decode_suspect_marker(*payload)) {
      suspect_index_ = *index;
    } else {
      spdlog::warn("raftlog store {}: {} has an unknown version; ignoring it", dir_,
                   kSuspectFileName);
    }
  }
  report_.suspect_index = suspect_index_;
  if (suspect_index_ != 0) {
    spdlog::warn(
        "raftlog store {}: entry {} was found corrupt while the log ran; verifying its segment "
        "in full",
        dir_, suspect_index_);
  }
  return Status();
}

Status CommitLog::Impl::clear_suspect_marker() {
  if (suspect_index_ == 0) return Status();
  RAFTLOG_RETURN_IF_ERROR(suspect_file_->write(encode_suspect_marker(0)));
  suspect_index_ = 0;
  return Status();
}

Status CommitLog::Impl::mark_suspect(std::uint64_t index) {
  std::lock_guard lock(suspect_mu_);
  if (closed_.load()) return Status::closed("the log is closed");
  if (index == 0) return Status::invalid_argument("index 0 cannot be suspect");
  spdlog::error("raftlog store {}: entry {} is corrupt; the next open verifies its segment in full",
                dir_, index);
  if (!suspect_file_) {
    auto file = DurableRecordFile::open(env_, join_path(dir_, kSuspectFileName), dir_);
    if (!file.ok()) return file.status();
    suspect_file_ = std::move(*file);
  }
  return suspect_file_->write(encode_suspect_marker(index));
}

}  // namespace raftlog::store

// The POSIX Env with a hook before and after each call that changes the file system (a test slows
// or times one kind of call: a segment's unlink, a directory sync, SNAPSHOT.next's write).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "store/env.h"

namespace raftlog::replica::testing {

class HookedEnv final : public store::Env {
 public:
  enum class Op { kOpen, kRename, kRemove, kSyncDir, kWriteFile };
  // Both on the calling thread (the replica's, or the store's flusher for its own files).
  std::function<void(Op, const std::string& path)> before;
  std::function<void(Op, const std::string& path, std::chrono::nanoseconds took)> after;

  store::Status create_dir(const std::string& path) override { return base_->create_dir(path); }
  store::Result<std::vector<std::string>> list_dir(const std::string& dir) const override {
    return base_->list_dir(dir);
  }
  bool exists(const std::string& path) const override { return base_->exists(path); }
  store::Result<std::unique_ptr<store::File>> open(const std::string& path, bool create) override {
    return hooked(Op::kOpen, path, [&] { return base_->open(path, create); });
  }
  store::Result<std::unique_ptr<store::File>> open_read_only(const std::string& path) override {
    return base_->open_read_only(path);
  }
  store::Status rename(const std::string& from, const std::string& to) override {
    return hooked(Op::kRename, to, [&] { return base_->rename(from, to); });
  }
  store::Status remove(const std::string& path) override {
    return hooked(Op::kRemove, path, [&] { return base_->remove(path); });
  }
  store::Status remove_dir(const std::string& path) override { return base_->remove_dir(path); }
  store::Status sync_dir(const std::string& dir) override {
    return hooked(Op::kSyncDir, dir, [&] { return base_->sync_dir(dir); });
  }
  store::Result<std::string> read_file(const std::string& path,
                                       std::size_t max_bytes) const override {
    return base_->read_file(path, max_bytes);
  }
  store::Status write_file(const std::string& path, std::string_view content) override {
    return hooked(Op::kWriteFile, path, [&] { return base_->write_file(path, content); });
  }
  store::Result<std::chrono::system_clock::time_point> modified_at(
      const std::string& path) const override {
    return base_->modified_at(path);
  }

 private:
  template <typename Call>
  std::invoke_result_t<Call> hooked(Op op, const std::string& path, Call&& call) {
    if (before) before(op, path);
    const auto started = std::chrono::steady_clock::now();
    auto result = call();
    if (after) after(op, path, std::chrono::steady_clock::now() - started);
    return result;
  }

  store::Env* base_ = store::Env::posix();
};

// A segment's file of the log (data or index), as the store names them under data_dir/log.
inline bool is_segment_file(const std::string& path) {
  return path.find("/log/") != std::string::npos &&
         (path.ends_with(".seg") || path.ends_with(".idx"));
}

}  // namespace raftlog::replica::testing

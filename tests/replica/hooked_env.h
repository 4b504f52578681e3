// An Env (the POSIX one unless given another, e.g. a MemoryEnv) with a hook before and after each
// call that changes the file system or makes it durable (a test slows, times or places one kind of
// call: a segment's unlink, a directory sync, SNAPSHOT.next's write, a sync of the log's CHECKPOINT
// or of a segment's index file, and on which thread it ran).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "store/env.h"

namespace raftlog::replica::testing {

class HookedEnv final : public store::Env {
 public:
  // kSync: a File::sync() or a Mapping::flush() of a file it opened (`path` names the file).
  enum class Op { kOpen, kRename, kRemove, kSyncDir, kWriteFile, kSync };
  explicit HookedEnv(store::Env* base = store::Env::posix()) : base_(base) {}
  // Both on the calling thread (the replica's, or the store's flusher for its own files).
  std::function<void(Op, const std::string& path)> before;
  std::function<void(Op, const std::string& path, std::chrono::nanoseconds took)> after;

  store::Status create_dir(const std::string& path) override { return base_->create_dir(path); }
  store::Result<std::vector<std::string>> list_dir(const std::string& dir) const override {
    return base_->list_dir(dir);
  }
  bool exists(const std::string& path) const override { return base_->exists(path); }
  store::Result<std::unique_ptr<store::File>> open(const std::string& path, bool create) override {
    auto file = hooked(Op::kOpen, path, [&] { return base_->open(path, create); });
    if (!file.ok()) return file;
    return std::unique_ptr<store::File>(std::make_unique<HookedFile>(this, path, std::move(*file)));
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
  class HookedMapping final : public store::Mapping {
   public:
    HookedMapping(HookedEnv* env, std::string path, std::shared_ptr<store::Mapping> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    char* data() override { return base_->data(); }
    const char* data() const override { return base_->data(); }
    std::size_t size() const override { return base_->size(); }
    store::Status flush(std::uint64_t offset, std::uint64_t length) override {
      return env_->hooked(Op::kSync, path_, [&] { return base_->flush(offset, length); });
    }

   private:
    HookedEnv* env_;
    std::string path_;
    std::shared_ptr<store::Mapping> base_;
  };
  class HookedFile final : public store::File {
   public:
    HookedFile(HookedEnv* env, std::string path, std::unique_ptr<store::File> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    store::Status allocate(std::uint64_t offset, std::uint64_t length) override {
      return base_->allocate(offset, length);
    }
    store::Status truncate(std::uint64_t size_bytes) override {
      return base_->truncate(size_bytes);
    }
    store::Result<std::uint64_t> size() const override { return base_->size(); }
    store::Result<std::shared_ptr<store::Mapping>> map(std::uint64_t length) override {
      auto mapping = base_->map(length);
      if (!mapping.ok()) return mapping;
      return std::shared_ptr<store::Mapping>(
          std::make_shared<HookedMapping>(env_, path_, std::move(*mapping)));
    }
    store::Status write_at(std::uint64_t offset, std::string_view data) override {
      return base_->write_at(offset, data);
    }
    store::Status sync() override {
      return env_->hooked(Op::kSync, path_, [&] { return base_->sync(); });
    }

   private:
    HookedEnv* env_;
    std::string path_;
    std::unique_ptr<store::File> base_;
  };

  template <typename Call>
  std::invoke_result_t<Call> hooked(Op op, const std::string& path, Call&& call) {
    if (before) before(op, path);
    const auto started = std::chrono::steady_clock::now();
    auto result = call();
    if (after) after(op, path, std::chrono::steady_clock::now() - started);
    return result;
  }

  store::Env* base_;
};

// A segment's file of the log (data or index), as the store names them under data_dir/log.
inline bool is_segment_file(const std::string& path) {
  return path.find("/log/") != std::string::npos &&
         (path.ends_with(".seg") || path.ends_with(".idx"));
}

}  // namespace raftlog::replica::testing

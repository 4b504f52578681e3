#include "store/memory_env.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace raftlog::store {

struct MemoryEnv::Inode {
  std::vector<char> data;     // volatile image
  std::vector<char> durable;  // durable image (same size: sizes are journaled metadata)
  int map_count = 0;
  std::uint64_t generation = 0;
  std::chrono::system_clock::time_point modified;  // by MemoryEnv::clock_
};

namespace {

std::string parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return path.substr(0, slash);
}
std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string normalize_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Copies bytes of a volatile image that another thread may be storing into through a mapping at the
// same time (the log writes index records through its mapping while the flusher syncs, and a
// simulated power cut can come at any instant). The kernel's msync or a real power cut reads such
// pages mid-store too, and the store must survive any torn result, so the race is what the test
// means. It is kept out of ThreadSanitizer's view on purpose (no_sanitize; a byte loop through a
// volatile pointer, since TSan intercepts memcpy and the compiler would turn a plain loop into one).
// Only MemoryEnv's sync and crash paths use it; every other access to the images is under mu_.
__attribute__((no_sanitize("thread"))) void copy_bytes_racing_stores(const char* from,
                                                                     std::size_t count, char* to) {
  const volatile char* source = from;
  for (std::size_t i = 0; i < count; ++i) to[i] = source[i];
}

std::vector<char> copy_image_racing_stores(const std::vector<char>& image) {
  std::vector<char> copy(image.size());
  copy_bytes_racing_stores(image.data(), image.size(), copy.data());
  return copy;
}

}  // namespace

const char* to_string(CrashMode mode) {
  switch (mode) {
    case CrashMode::kLoseUnflushed:
      return "lose-unflushed";
    case CrashMode::kTornWrite:
      return "torn-write";
    case CrashMode::kKeepRandomSectors:
      return "keep-random-sectors";
    case CrashMode::kFlipBits:
      return "flip-bits";
    case CrashMode::kKeepAll:
      return "keep-all";
  }
  return "unknown";
}

class MemoryMapping final : public Mapping {
 public:
  MemoryMapping(MemoryEnv* env, std::shared_ptr<MemoryEnv::Inode> inode, std::size_t size)
      : env_(env), inode_(std::move(inode)), size_(size) {}
  ~MemoryMapping() override {
    std::lock_guard lock(env_->mu_);
    --inode_->map_count;
  }
  char* data() override { return inode_->data.data(); }
  const char* data() const override { return inode_->data.data(); }
  std::size_t size() const override { return size_; }
  Status flush(std::uint64_t offset, std::uint64_t length) override {
    std::lock_guard lock(env_->mu_);
    RAFTLOG_RETURN_IF_ERROR(env_->check_alive_locked());
    if (inode_->generation != env_->generation_) return Status::io("stale mapping after restart");
    if (offset + length > size_) return Status::invalid_argument("flush past mapping");
    if (!env_->admit_sync_locked())
      return Status::io("MemoryEnv: msync failed (simulated crash or I/O error)");
    copy_bytes_racing_stores(inode_->data.data() + offset, length, inode_->durable.data() + offset);
    ++env_->sync_calls_;
    return Status();
  }

 private:
  MemoryEnv* env_;
  std::shared_ptr<MemoryEnv::Inode> inode_;
  std::size_t size_;
};

class MemoryFile final : public File {
 public:
  MemoryFile(MemoryEnv* env, std::shared_ptr<MemoryEnv::Inode> inode, std::string path)
      : env_(env), inode_(std::move(inode)), path_(std::move(path)) {}

  Status allocate(std::uint64_t offset, std::uint64_t length) override {
    std::lock_guard lock(env_->mu_);
    RAFTLOG_RETURN_IF_ERROR(check_locked());
    const std::uint64_t end = offset + length;
    if (end <= inode_->data.size()) {
      // Reserving blocks inside the file: counts against capacity as if the file were sparse.
      return Status();
    }
    return resize_locked(end);
  }
  Status truncate(std::uint64_t size_bytes) override {
    std::lock_guard lock(env_->mu_);
    RAFTLOG_RETURN_IF_ERROR(check_locked());
    return resize_locked(size_bytes);
  }
  Result<std::uint64_t> size() const override {
    std::lock_guard lock(env_->mu_);
    return static_cast<std::uint64_t>(inode_->data.size());
  }
  Result<std::shared_ptr<Mapping>> map(std::uint64_t length) override {
    std::lock_guard lock(env_->mu_);
    RAFTLOG_RETURN_IF_ERROR(check_locked());
    if (length > inode_->data.size()) return Status::invalid_argument("map past end of " + path_);
    ++inode_->map_count;
    return std::shared_ptr<Mapping>(std::make_shared<MemoryMapping>(env_, inode_, length));
  }
  Status write_at(std::uint64_t offset, std::string_view data) override {
    // Like a store through a mapping: lands in the volatile image only (and, after a simulated
    // crash, in the orphaned image of the dead "process", where nobody reads it again).
    std::lock_guard lock(env_->mu_);
    if (offset + data.size() > inode_->data.size()) {
      return Status::invalid_argument("write_at past end of " + path_);
    }
    std::memcpy(inode_->data.data() + offset, data.data(), data.size());
    inode_->modified = env_->clock_();
    return Status();
  }
  Status sync() override {
    std::lock_guard lock(env_->mu_);
    RAFTLOG_RETURN_IF_ERROR(check_locked());
    const bool injected_error = env_->failing_syncs_ > 0;
    if (!env_->admit_sync_locked()) {
      // Same size, so the buffer (and any mapping into it) stays where it is.
      if (injected_error && env_->drop_dirty_on_failed_sync_) inode_->data = inode_->durable;
      return Status::io("MemoryEnv: fdatasync failed (simulated crash or I/O error)");
    }
    inode_->durable = copy_image_racing_stores(inode_->data);
    ++env_->sync_calls_;
    return Status();
  }

 private:
  Status check_locked() const {
    RAFTLOG_RETURN_IF_ERROR(env_->check_alive_locked());
    if (inode_->generation != env_->generation_)
      return Status::io("stale file after restart: " + path_);
    return Status();
  }
  Status resize_locked(std::uint64_t size_bytes) {
    if (inode_->map_count > 0 && size_bytes != inode_->data.size()) {
      // Resizing would move the buffer under live mappings; the store never needs it.
      return Status::io("MemoryEnv: resize of a mapped file " + path_);
    }
    if (size_bytes > inode_->data.size() && env_->capacity_bytes_ != 0 &&
        env_->used_bytes_locked() + (size_bytes - inode_->data.size()) > env_->capacity_bytes_) {
      return Status::no_space("allocate " + path_ + ": No space left on device (simulated)");
    }
    if (size_bytes != inode_->data.size()) inode_->modified = env_->clock_();
    inode_->data.resize(size_bytes, 0);
    inode_->durable.resize(size_bytes, 0);
    return Status();
  }

  MemoryEnv* env_;
  std::shared_ptr<MemoryEnv::Inode> inode_;
  std::string path_;
};

MemoryEnv::MemoryEnv() = default;
MemoryEnv::~MemoryEnv() = default;

Status MemoryEnv::check_alive_locked() const {
  if (crashed_) return Status::io("MemoryEnv: crashed (simulated power loss)");
  return Status();
}

std::uint64_t MemoryEnv::used_bytes_locked() const {
  std::uint64_t total = 0;
  for (const auto& [path, inode] : volatile_names_) total += inode->data.size();
  return total;
}

Status MemoryEnv::create_dir(const std::string& path) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  dirs_.insert(normalize_dir(path));
  return Status();
}

Result<std::vector<std::string>> MemoryEnv::list_dir(const std::string& dir) const {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  const std::string d = normalize_dir(dir);
  if (dirs_.count(d) == 0) return Status::io("opendir " + dir + ": No such file or directory");
  std::vector<std::string> names;
  for (const auto& [path, inode] : volatile_names_) {
    if (parent_dir(path) == d) names.push_back(base_name(path));
  }
  // Subdirectories are entries too, as on a real file system (callers must tell them apart).
  for (const std::string& sub : dirs_) {
    if (sub != d && parent_dir(sub) == d) names.push_back(base_name(sub));
  }
  return names;
}

bool MemoryEnv::exists(const std::string& path) const {
  std::lock_guard lock(mu_);
  return volatile_names_.count(path) > 0 || dirs_.count(normalize_dir(path)) > 0;
}

Result<std::unique_ptr<File>> MemoryEnv::open(const std::string& path, bool create) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end()) {
    if (!create) return Status::io("open " + path + ": No such file or directory");
    if (dirs_.count(parent_dir(path)) == 0)
      return Status::io("open " + path + ": no such directory");
    auto inode = std::make_shared<Inode>();
    inode->generation = generation_;
    inode->modified = clock_();
    it = volatile_names_.emplace(path, std::move(inode)).first;
  }
  return std::unique_ptr<File>(std::make_unique<MemoryFile>(this, it->second, path));
}

Status MemoryEnv::rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  auto it = volatile_names_.find(from);
  if (it == volatile_names_.end()) return Status::io("rename " + from + ": No such file");
  auto inode = it->second;
  volatile_names_.erase(it);
  if (renames_kept_at_crash_) unsynced_renames_.push_back({from, to, inode});
  volatile_names_[to] = std::move(inode);
  return Status();
}

Status MemoryEnv::remove(const std::string& path) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  // As unlink(): a directory is EISDIR (remove_dir() removes those).
  if (dirs_.count(normalize_dir(path)) != 0)
    return Status::io("unlink " + path + ": Is a directory");
  if (remove_failure_armed_) {
    if (removes_until_failure_ == 0) {
      remove_failure_armed_ = false;
      return Status::io("unlink " + path + ": injected failure");
    }
    --removes_until_failure_;
  }
  bool durable_at_once = false;
  if (remove_crash_armed_) {
    if (removes_until_crash_ == 0) {
      crash_locked();
      return Status::io("unlink " + path + ": the power was cut");
    }
    --removes_until_crash_;
    durable_at_once = true;
  }
  volatile_names_.erase(path);
  if (durable_at_once) {
    durable_names_.erase(path);
    // The journal committed this unlink: a rename to this name before it cannot be kept after it.
    std::erase_if(unsynced_renames_,
                  [&](const UnsyncedRename& rename) { return rename.to == path; });
  }
  return Status();
}

Status MemoryEnv::remove_dir(const std::string& path) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  const std::string d = normalize_dir(path);
  if (dirs_.count(d) == 0) return Status();
  // As rmdir: files or subdirectories inside (ENOTEMPTY), or a file of that name (ENOTDIR), fail.
  for (const auto& [name, inode] : volatile_names_) {
    if (parent_dir(name) == d) return Status::io("rmdir " + path + ": Directory not empty");
  }
  for (const std::string& sub : dirs_) {
    if (sub != d && parent_dir(sub) == d)
      return Status::io("rmdir " + path + ": Directory not empty");
  }
  dirs_.erase(d);
  return Status();
}

Status MemoryEnv::sync_dir(const std::string& dir) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  const std::string d = normalize_dir(dir);
  if (!admit_sync_locked())
    return Status::io("MemoryEnv: fsync of " + dir + " failed (simulated crash or I/O error)");
  for (auto it = durable_names_.begin(); it != durable_names_.end();) {
    it = parent_dir(it->first) == d ? durable_names_.erase(it) : std::next(it);
  }
  for (const auto& [path, inode] : volatile_names_) {
    if (parent_dir(path) == d) durable_names_[path] = inode;
  }
  std::erase_if(unsynced_renames_,
                [&](const UnsyncedRename& rename) { return parent_dir(rename.to) == d; });
  ++sync_calls_;
  return Status();
}

Result<std::string> MemoryEnv::read_file(const std::string& path, std::size_t max_bytes) const {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end())
    return Status::io("open " + path + ": No such file or directory");
  if (it->second->data.size() > max_bytes) return Status::invalid_argument(path + " too large");
  return std::string(it->second->data.begin(), it->second->data.end());
}

Result<std::chrono::system_clock::time_point> MemoryEnv::modified_at(
    const std::string& path) const {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end())
    return Status::io("stat " + path + ": No such file or directory");
  return it->second->modified;
}

void MemoryEnv::set_clock(std::function<std::chrono::system_clock::time_point()> clock) {
  std::lock_guard lock(mu_);
  clock_ = std::move(clock);
}

Status MemoryEnv::write_file(const std::string& path, std::string_view content) {
  std::lock_guard lock(mu_);
  RAFTLOG_RETURN_IF_ERROR(check_alive_locked());
  if (dirs_.count(parent_dir(path)) == 0) return Status::io("open " + path + ": no such directory");
  if (!admit_sync_locked())
    return Status::io("MemoryEnv: write of " + path + " failed (simulated crash or I/O error)");
  auto inode = std::make_shared<Inode>();
  inode->generation = generation_;
  inode->modified = clock_();
  inode->data.assign(content.begin(), content.end());
  inode->durable = inode->data;
  volatile_names_[path] = std::move(inode);
  ++sync_calls_;
  return Status();
}

bool MemoryEnv::admit_sync_locked() {
  if (failing_syncs_ > 0) {
    --failing_syncs_;
    return false;
  }
  if (!crash_armed_) return true;
  if (syncs_until_crash_ > 0) {
    --syncs_until_crash_;
    return true;
  }
  crash_locked();
  return false;
}

void MemoryEnv::crash_after_syncs(std::uint64_t syncs_before_crash) {
  std::lock_guard lock(mu_);
  crash_armed_ = true;
  syncs_until_crash_ = syncs_before_crash;
}

void MemoryEnv::crash_after_removes(std::uint64_t removes_before_crash) {
  std::lock_guard lock(mu_);
  remove_crash_armed_ = true;
  removes_until_crash_ = removes_before_crash;
}

void MemoryEnv::fail_remove_after(std::uint64_t removes_before_failure) {
  std::lock_guard lock(mu_);
  remove_failure_armed_ = true;
  removes_until_failure_ = removes_before_failure;
}

void MemoryEnv::fail_next_syncs(std::uint64_t count, bool drop_dirty) {
  std::lock_guard lock(mu_);
  failing_syncs_ = count;
  drop_dirty_on_failed_sync_ = drop_dirty;
}

bool MemoryEnv::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

void MemoryEnv::crash() {
  std::lock_guard lock(mu_);
  crash_locked();
}

void MemoryEnv::keep_unsynced_renames(std::optional<std::size_t> count) {
  std::lock_guard lock(mu_);
  renames_kept_at_crash_ = count;
}

std::size_t MemoryEnv::unsynced_renames_at_last_crash() const {
  std::lock_guard lock(mu_);
  return unsynced_renames_at_last_crash_;
}

void MemoryEnv::crash_locked() {
  if (crashed_) return;
  crash_armed_ = false;
  remove_crash_armed_ = false;
  crashed_ = true;
  if (renames_kept_at_crash_) {
    // The journal committed each directory's first N renames, in order: the name moves in the
    // durable namespace (a file created since the last sync comes with its rename).
    std::map<std::string, std::size_t> per_dir;
    for (const UnsyncedRename& rename : unsynced_renames_) {
      std::size_t& seen = per_dir[parent_dir(rename.to)];
      ++seen;
      if (seen > *renames_kept_at_crash_) continue;
      durable_names_.erase(rename.from);
      durable_names_[rename.to] = rename.inode;
    }
    unsynced_renames_at_last_crash_ = 0;
    for (const auto& [dir, count] : per_dir) {
      unsynced_renames_at_last_crash_ = std::max(unsynced_renames_at_last_crash_, count);
    }
  }
  unsynced_renames_.clear();
  crash_snapshot_.clear();
  for (const auto& [path, inode] : durable_names_) {
    crash_snapshot_[path] = {inode->durable, copy_image_racing_stores(inode->data)};
  }
}

void MemoryEnv::restart(const CrashOptions& options) {
  std::lock_guard lock(mu_);
  std::mt19937_64 rng(options.seed);
  ++generation_;
  volatile_names_.clear();
  durable_names_.clear();
  unsynced_renames_.clear();
  for (auto& [path, images] : crash_snapshot_) {
    auto& [durable, seen] = images;
    std::vector<char> result = durable;
    std::size_t first_diff = durable.size();
    std::size_t last_diff = 0;
    for (std::size_t i = 0; i < durable.size(); ++i) {
      if (durable[i] != seen[i]) {
        first_diff = std::min(first_diff, i);
        last_diff = i;
      }
    }
    if (first_diff < durable.size()) {
      switch (options.mode) {
        case CrashMode::kLoseUnflushed:
          break;
        case CrashMode::kTornWrite: {
          const std::size_t cut = first_diff + rng() % (last_diff - first_diff + 2);
          std::copy(seen.begin() + static_cast<std::ptrdiff_t>(first_diff),
                    seen.begin() + static_cast<std::ptrdiff_t>(cut),
                    result.begin() + static_cast<std::ptrdiff_t>(first_diff));
          break;
        }
        case CrashMode::kKeepRandomSectors: {
          constexpr std::size_t kSector = 512;
          for (std::size_t s = first_diff / kSector * kSector; s <= last_diff; s += kSector) {
            if (rng() % 2 == 0) continue;
            const std::size_t end = std::min(s + kSector, durable.size());
            std::copy(seen.begin() + static_cast<std::ptrdiff_t>(s),
                      seen.begin() + static_cast<std::ptrdiff_t>(end),
                      result.begin() + static_cast<std::ptrdiff_t>(s));
          }
          break;
        }
        case CrashMode::kFlipBits: {
          result = seen;
          const int flips = 1 + static_cast<int>(rng() % 8);
          for (int f = 0; f < flips; ++f) {
            const std::size_t at = first_diff + rng() % (last_diff - first_diff + 1);
            result[at] = static_cast<char>(result[at] ^ static_cast<char>(1U << (rng() % 8)));
          }
          break;
        }
        case CrashMode::kKeepAll:
          result = seen;
          break;
      }
    }
    auto inode = std::make_shared<Inode>();
    inode->generation = generation_;
    inode->modified = clock_();
    inode->data = result;
    inode->durable = std::move(result);
    volatile_names_[path] = inode;
    durable_names_[path] = inode;
  }
  crash_snapshot_.clear();
  crashed_ = false;
}

void MemoryEnv::set_capacity_bytes(std::uint64_t capacity_bytes) {
  std::lock_guard lock(mu_);
  capacity_bytes_ = capacity_bytes;
}

std::uint64_t MemoryEnv::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_bytes_locked();
}

Status MemoryEnv::corrupt_byte(const std::string& path, std::uint64_t offset, int bit) {
  std::lock_guard lock(mu_);
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end() || offset >= it->second->data.size()) {
    return Status::invalid_argument("corrupt_byte: no such file/offset " + path);
  }
  const auto mask = static_cast<char>(1U << (bit & 7));
  it->second->data[offset] = static_cast<char>(it->second->data[offset] ^ mask);
  it->second->durable[offset] = static_cast<char>(it->second->durable[offset] ^ mask);
  return Status();
}

Status MemoryEnv::overwrite(const std::string& path, std::uint64_t offset,
                            const std::string& bytes) {
  std::lock_guard lock(mu_);
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end() || offset + bytes.size() > it->second->data.size()) {
    return Status::invalid_argument("overwrite: no such file/range " + path);
  }
  std::memcpy(it->second->data.data() + offset, bytes.data(), bytes.size());
  std::memcpy(it->second->durable.data() + offset, bytes.data(), bytes.size());
  return Status();
}

Result<std::string> MemoryEnv::content(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = volatile_names_.find(path);
  if (it == volatile_names_.end()) return Status::io("no such file " + path);
  return std::string(it->second->data.begin(), it->second->data.end());
}

std::uint64_t MemoryEnv::sync_calls() const {
  std::lock_guard lock(mu_);
  return sync_calls_;
}

}  // namespace raftlog::store

#include "derived/group_table.h"

#include <algorithm>
#include <mutex>

#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::derived {

using store::Status;

namespace {

constexpr const char* kFileName = "GROUPS";

using store::append_u32;
using store::append_u64;

void append_name(std::string* out, const std::string& name) {
  out->push_back(static_cast<char>(name.size()));  // names are at most 128 bytes
  *out += name;
}

// The store's bounded reader, plus the one-byte-length names of this format.
class Reader : public store::ByteReader {
 public:
  using store::ByteReader::ByteReader;
  bool name(std::string* v) {
    std::uint8_t size = 0;
    return u8(&size) && bytes(size, v);
  }
};

}  // namespace

// Layout (docs/storage-format.md, "Consumer group table"): magic, crc32c of [8, end), version,
// flags (bit 0: complete), cluster id (u32 size + bytes), boundary, boundary term, group count;
// per group its name (u8 size + bytes) and slot count (u32); per slot the topic (u8 size + bytes),
// known (u8 0/1), offset, commit index, commit term (u64 each).
std::string encode_group_table(const GroupTableState& state) {
  std::string out;
  append_u32(&out, kGroupTableMagic);
  append_u32(&out, 0);  // crc, below
  append_u32(&out, kGroupTableVersion);
  append_u32(&out, state.complete ? 1U : 0U);
  append_u32(&out, static_cast<std::uint32_t>(state.cluster_id.size()));
  out += state.cluster_id;
  append_u64(&out, state.boundary);
  append_u64(&out, state.boundary_term);
  append_u32(&out, static_cast<std::uint32_t>(state.groups.size()));
  for (const auto& [group, slots] : state.groups) {
    append_name(&out, group);
    append_u32(&out, static_cast<std::uint32_t>(slots.size()));
    for (const auto& [topic, slot] : slots) {
      append_name(&out, topic);
      out.push_back(slot.known ? '\1' : '\0');
      append_u64(&out, slot.value.offset);
      append_u64(&out, slot.value.index);
      append_u64(&out, slot.value.term);
    }
  }
  store::put_u32(out.data() + 4, util::crc32c::value(out.data() + 8, out.size() - 8));
  return out;
}

std::string encode_group_table_marker(const std::string& cluster_id) {
  std::string out;
  append_u32(&out, kGroupTableMarkerMagic);
  append_u32(&out, 0);  // crc, below
  append_u32(&out, kGroupTableMarkerVersion);
  append_u32(&out, static_cast<std::uint32_t>(cluster_id.size()));
  out += cluster_id;
  store::put_u32(out.data() + 4, util::crc32c::value(out.data() + 8, out.size() - 8));
  return out;
}

std::optional<std::string> decode_group_table_marker(const std::string& bytes) {
  Reader in(bytes);
  std::uint32_t magic = 0, crc = 0, version = 0, size = 0;
  std::string cluster_id;
  const bool ok = in.u32(&magic) && magic == kGroupTableMarkerMagic && in.u32(&crc) &&
                  crc == util::crc32c::value(bytes.data() + 8, bytes.size() - 8) &&
                  in.u32(&version) && version == kGroupTableMarkerVersion && in.u32(&size) &&
                  size <= 4096 && in.bytes(size, &cluster_id) && in.done();
  if (!ok) return std::nullopt;
  return cluster_id;
}

std::optional<GroupTableState> decode_group_table(const std::string& bytes, std::string* problem) {
  Reader in(bytes);
  std::uint32_t magic = 0, crc = 0, version = 0, flags = 0, cluster_size = 0, groups = 0;
  if (!in.u32(&magic) || magic != kGroupTableMagic) {
    *problem = "not a group table (bad magic)";
    return std::nullopt;
  }
  if (!in.u32(&crc) || crc != util::crc32c::value(bytes.data() + 8, bytes.size() - 8)) {
    *problem = "the group table fails its checksum";
    return std::nullopt;
  }
  if (!in.u32(&version) || version != kGroupTableVersion) {
    *problem = "group table of unknown version " + std::to_string(version);
    return std::nullopt;
  }
  GroupTableState state;
  bool ok = in.u32(&flags) && flags <= 1 && in.u32(&cluster_size) && cluster_size <= 4096 &&
            in.bytes(cluster_size, &state.cluster_id) && in.u64(&state.boundary) &&
            state.boundary >= 1 && in.u64(&state.boundary_term) && in.u32(&groups) &&
            groups <= kMaxStoredGroups;
  state.complete = (flags & 1U) != 0;
  for (std::uint32_t g = 0; ok && g < groups; ++g) {
    std::string group;
    std::uint32_t slots = 0;
    ok = in.name(&group) && group_problem(group).empty() && state.groups.count(group) == 0 &&
         in.u32(&slots) && slots >= 1 && slots <= kMaxStoredTopicsPerGroup;
    auto& table = state.groups[group];
    for (std::uint32_t s = 0; ok && s < slots; ++s) {
      std::string topic;
      std::uint8_t known = 0;
      GroupSlot slot;
      ok = in.name(&topic) && topic_problem(topic).empty() && table.count(topic) == 0 &&
           in.u8(&known) && known <= 1 && in.u64(&slot.value.offset) && in.u64(&slot.value.index) &&
           in.u64(&slot.value.term);
      // A known slot was set by an entry the table applied: below its boundary.
      ok = ok && (known == 0 || (slot.value.index >= 1 && slot.value.index < state.boundary));
      slot.known = known == 1;
      table.emplace(std::move(topic), slot);
    }
  }
  if (!ok || !in.done()) {
    *problem = "the group table is malformed";
    return std::nullopt;
  }
  return state;
}

std::optional<std::uint64_t> read_group_table_boundary(store::Env* env, const std::string& dir,
                                                       const std::string& cluster_id) {
  const std::string path = store::join_path(dir, kFileName);
  if (!env->exists(path)) return std::nullopt;
  auto bytes = env->read_file(path, kMaxGroupTableBytes);
  if (!bytes.ok()) return std::nullopt;
  std::string problem;
  std::optional<GroupTableState> state = decode_group_table(*bytes, &problem);
  if (!state || state->cluster_id != cluster_id) return std::nullopt;
  return state->boundary;
}

GroupTable::GroupTable(store::Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}

std::unique_ptr<GroupTable> GroupTable::open(store::Env* env, std::string dir,
                                             const std::string& marker_dir, std::string cluster_id,
                                             const LogView& log, OpenReport* report,
                                             Status* error) {
  std::unique_ptr<GroupTable> table(new GroupTable(env, dir));
  *report = OpenReport{};
  if (Status made = env->create_dir(dir); !made.ok()) {
    *error = made;
    return nullptr;
  }
  const std::uint64_t first = std::max<std::uint64_t>(log.first_index(), 1);
  const std::string path = store::join_path(dir, kFileName);
  // The marker goes to disk before the first table can: a node that has a table, or had one, has
  // the marker (a crash in between leaves a marker without a table: "lost", the safe side).
  const std::string marker = store::join_path(marker_dir, kGroupTableMarkerName);
  const bool had_table = env->exists(marker) || env->exists(path);
  if (!env->exists(marker)) {
    const std::string temp = marker + ".tmp";
    Status written = env->write_file(temp, encode_group_table_marker(cluster_id));
    if (written.ok()) written = env->rename(temp, marker);
    if (written.ok()) written = env->sync_dir(marker_dir);
    if (!written.ok()) {
      *error = written;
      return nullptr;
    }
  }
  std::string problem;
  std::optional<GroupTableState> loaded;
  if (!env->exists(path)) {
    problem = "missing";
  } else if (auto bytes = env->read_file(path, kMaxGroupTableBytes); !bytes.ok()) {
    problem = bytes.status().to_string();
  } else {
    loaded = decode_group_table(*bytes, &problem);
    if (loaded && loaded->cluster_id != cluster_id) {
      problem = "the group table belongs to cluster " + loaded->cluster_id;
      loaded.reset();
    }
  }
  if (!loaded) {
    // Replayed from the log's first index: exact when that is 1; else commits retention removed
    // are lost to this node, and the table says so (complete = false).
    // Never had a table: no commit can be below the log's first index (every node runs a version
    // with groups before the first commit), so the empty table is complete. Lost it: the commits
    // retention removed are lost to this node, and the table says so (complete = false).
    const bool never_had = problem == "missing" && !had_table;
    report->mode = problem == "missing" ? OpenMode::kFresh : OpenMode::kRebuilt;
    report->reason = never_had ? "no group table yet"
                     : problem == "missing"
                         ? "derived/GROUPS is missing (" + std::string(kGroupTableMarkerName) +
                               " says this node had one)"
                         : problem;
    table->state_.cluster_id = std::move(cluster_id);
    table->state_.boundary = first;
    table->state_.complete = first == 1 || never_had;
    if (!table->state_.complete)
      report->reason +=
          "; the log starts at " + std::to_string(first) + ": the table is incomplete";
  } else {
    table->state_ = std::move(*loaded);
    report->mode = OpenMode::kResumed;
    const std::uint64_t last_applied = table->state_.boundary - 1;
    const bool ahead = last_applied > log.last_index();
    const bool term_differs = !ahead && last_applied >= first && table->state_.boundary_term != 0 &&
                              log.term_at(last_applied) != table->state_.boundary_term;
    if (ahead || term_differs) {
      report->mode = OpenMode::kRolledBack;
      report->reason = ahead ? "the group table (" + std::to_string(table->state_.boundary) +
                                   ") is ahead of the log's last index " +
                                   std::to_string(log.last_index())
                             : "entry " + std::to_string(last_applied) +
                                   " has another term in the log than the group table saw";
      table->roll_back(log);
    } else if (table->state_.boundary < first) {
      report->reason = "the log was trimmed past the group table (" +
                       std::to_string(table->state_.boundary) + " < " + std::to_string(first) +
                       "): its offsets are unknown until committed again";
      table->forget_all();
      table->state_.boundary = first;
      table->state_.boundary_term = 0;
    }
  }
  report->boundary = table->state_.boundary;
  if (report->mode != OpenMode::kResumed || !report->reason.empty()) {
    if (Status persisted = table->persist(); !persisted.ok()) {
      *error = persisted;
      return nullptr;
    }
  }
  table->persisted_boundary_ = table->state_.boundary;
  return table;
}

void GroupTable::roll_back(const LogView& log) {
  const std::uint64_t first = std::max<std::uint64_t>(log.first_index(), 1);
  if (first == 1) {
    state_.groups.clear();  // the whole history replays: exact
    state_.complete = true;
  } else {
    // A commit below the log's first index was applied from an entry no cut can reach (a suffix
    // cut never goes below the first index): its slot is still right unless a later commit of the
    // same slot was cut, and such a slot has its index at or above `first` (last writer wins).
    for (auto& [group, slots] : state_.groups) {
      for (auto& [topic, slot] : slots) {
        if (slot.known && slot.value.index >= first) slot = GroupSlot{};
      }
    }
  }
  state_.boundary = first;
  state_.boundary_term = first > 1 ? log.term_at(first - 1).value_or(0) : 0;
}

void GroupTable::forget_all() {
  for (auto& [group, slots] : state_.groups) {
    for (auto& [topic, slot] : slots) slot = GroupSlot{};
  }
  state_.complete = false;
}

std::uint64_t GroupTable::boundary() const {
  std::shared_lock lock(mu_);
  return state_.boundary;
}

std::uint64_t GroupTable::persisted_boundary() const {
  std::shared_lock lock(mu_);
  return persisted_boundary_;
}

void GroupTable::apply_commit(const SourceEntry& entry) {
  GroupCommit commit;
  if (entry.has_envelope || decode_group_commit(entry.payload, &commit) != GroupCommitDecode::kOk) {
    ++bad_commits_;  // only a forged peer or a bug writes one: nothing to apply
    return;
  }
  auto group = state_.groups.find(commit.group);
  if (group == state_.groups.end()) {
    if (state_.groups.size() >= kMaxStoredGroups) {
      ++refused_commits_;
      return;
    }
    group = state_.groups.emplace(commit.group, std::map<std::string, GroupSlot>{}).first;
  }
  if (group->second.count(commit.topic) == 0 && group->second.size() >= kMaxStoredTopicsPerGroup) {
    ++refused_commits_;
    if (group->second.empty()) state_.groups.erase(group);
    return;
  }
  group->second[commit.topic] =
      GroupSlot{true, GroupOffset{commit.offset, entry.index, entry.term}};
  slots_changed_ = true;
  ++change_count_;
}

bool GroupTable::apply(const std::vector<SourceEntry>& entries) {
  std::unique_lock lock(mu_);
  if (!entries.empty() && entries.front().index != state_.boundary) return false;
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].index != entries[i - 1].index + 1) return false;
  }
  for (const SourceEntry& entry : entries) {
    if (entry.is_group_commit) apply_commit(entry);
    state_.boundary = entry.index + 1;
    state_.boundary_term = entry.term;
  }
  return true;
}

void GroupTable::skip_to(std::uint64_t index) {
  std::unique_lock lock(mu_);
  if (index <= state_.boundary) return;
  forget_all();
  slots_changed_ = true;
  ++change_count_;
  state_.boundary = index;
  state_.boundary_term = 0;
}

void GroupTable::replace(GroupTableState state) {
  std::unique_lock lock(mu_);
  state_ = std::move(state);
  slots_changed_ = true;
  replaced_at_change_ = ++change_count_;
}

Status GroupTable::persist() {
  auto [state, change_count] = state_for_persist();
  return persist_state(state, change_count);
}

std::pair<GroupTableState, std::uint64_t> GroupTable::state_for_persist() const {
  std::shared_lock lock(mu_);
  return {state_, change_count_};
}

Status GroupTable::persist_state(const GroupTableState& state, std::uint64_t change_count) {
  {
    std::shared_lock lock(mu_);
    // A state taken after a replace() the file does not hold yet is written whatever its
    // boundary: a leader's table may start below the file's (adopted because its completeness
    // differs), and the file must not keep the table it replaced.
    const bool replaces_the_file =
        replaced_at_change_ > persisted_change_ && change_count >= replaced_at_change_;
    if (state.boundary < persisted_boundary_ && !replaces_the_file) {
      return Status();  // the file is newer already
    }
  }
  const std::string bytes = encode_group_table(state);
  const std::uint64_t boundary = state.boundary;
  const std::string path = store::join_path(dir_, kFileName);
  const std::string temp = path + ".tmp";
  if (Status wrote = env_->write_file(temp, bytes); !wrote.ok()) return wrote;
  if (Status renamed = env_->rename(temp, path); !renamed.ok()) return renamed;
  if (Status synced = env_->sync_dir(dir_); !synced.ok()) return synced;
  std::unique_lock lock(mu_);
  persisted_boundary_ = boundary;
  persisted_change_ = std::max(persisted_change_, change_count);
  // One writer: what changed after `state` was taken is still to be persisted.
  slots_changed_ = change_count_ != change_count;
  return Status();
}

bool GroupTable::slots_changed() const {
  std::shared_lock lock(mu_);
  return slots_changed_;
}

GroupLookup GroupTable::lookup(const std::string& group, const std::string& topic,
                               GroupOffset* out) const {
  std::shared_lock lock(mu_);
  auto found = state_.groups.find(group);
  if (found != state_.groups.end()) {
    auto slot = found->second.find(topic);
    if (slot != found->second.end()) {
      if (!slot->second.known) return GroupLookup::kUnknown;
      *out = slot->second.value;
      return GroupLookup::kKnown;
    }
  }
  return state_.complete ? GroupLookup::kNone : GroupLookup::kUnknown;
}

GroupFetch GroupTable::fetch(const std::string& group) const {
  std::shared_lock lock(mu_);
  GroupFetch out;
  auto found = state_.groups.find(group);
  if (found == state_.groups.end()) return out;
  out.found = true;
  for (const auto& [topic, slot] : found->second) {
    if (slot.known) {
      out.offsets.emplace_back(topic, slot.value);
    } else {
      out.unknown_topics.push_back(topic);
    }
  }
  return out;
}

std::vector<GroupInfo> GroupTable::list() const {
  std::shared_lock lock(mu_);
  std::vector<GroupInfo> out;
  for (const auto& [group, slots] : state_.groups) {
    GroupInfo info{group, slots.size(), 0};
    for (const auto& [topic, slot] : slots) info.unknown_topics += slot.known ? 0 : 1;
    out.push_back(std::move(info));
  }
  return out;
}

bool GroupTable::complete() const {
  std::shared_lock lock(mu_);
  return state_.complete;
}

GroupTable::Fit GroupTable::fits(const std::string& group, const std::string& topic) const {
  std::shared_lock lock(mu_);
  auto found = state_.groups.find(group);
  if (found == state_.groups.end()) {
    return state_.groups.size() < kMaxGroups ? Fit::kFits : Fit::kTooManyGroups;
  }
  return found->second.count(topic) != 0 || found->second.size() < kMaxTopicsPerGroup
             ? Fit::kFits
             : Fit::kTooManyTopics;
}

std::size_t GroupTable::group_count() const {
  std::shared_lock lock(mu_);
  return state_.groups.size();
}
std::uint64_t GroupTable::bad_commits() const {
  std::shared_lock lock(mu_);
  return bad_commits_;
}
std::uint64_t GroupTable::refused_commits() const {
  std::shared_lock lock(mu_);
  return refused_commits_;
}
GroupTableState GroupTable::state() const {
  std::shared_lock lock(mu_);
  return state_;
}

}  // namespace raftlog::derived

// GroupTable: the consumer offsets of every group, derived on every node from the committed
// group-commit entries of its log, in log order (docs/design.md, "Consumer groups"). It is not
// the derived cursor (cursor.h): the cursor says how far the topic and key indexes are built; this
// table holds what consumers committed. Separate state, separate file (derived/GROUPS), separate
// boundary, so that neither can stand in for the other.
//
// The table is a function of the committed log prefix it covers, the same on every node (unlike
// topic offsets, which a rebuild after retention renumbers): a commit names its topic and offset.
// Last writer in log order wins; an offset may go backwards (a consumer rewinding).
//
// Each (group, topic) slot is either known (offset, and the index and term of the commit entry
// that set it) or unknown: its value may have come from a commit this node can no longer read. The
// table as a whole is complete when every slot it lacks is truly absent; an incomplete table (built
// from a log whose first entries retention had already removed) cannot say "no offset" for a slot
// it lacks, only "unknown". Queries answer kUnknown rather than guess.
//
// A node tells "never had a table" from "lost its table" by a marker file, GROUPS_CREATED in the
// node's data directory (not in derived/, which operators delete to rebuild the indexes), written
// durably before the node's first table. open() checks the file against the recovered log:
//   - missing and no marker (the node never had a table: a new node, or the first start after the
//     upgrade that brought consumer groups): created empty and complete, whatever the log's first
//     index, since no commit was written before every node ran a version with groups
//     (docs/operations.md, "Upgrading");
//   - missing beside a marker (lost), corrupt, of another version or another cluster: rebuilt by
//     replay from the log's first index (complete only when that is 1);
//   - ahead of the log, or whose boundary entry has another term there (the log's tail was cut
//     under it): rolled back to the log's first index F, keeping only slots set by commits below F
//     (which no cut can reach) and marking the others unknown until the replay sets them again (F
//     = 1: cleared, an exact rebuild);
//   - behind the log: kept; replay continues from boundary();
//   - the log trimmed past its boundary (commits it never applied are gone): every known slot
//     becomes unknown and the table incomplete. The node holds retention at the table's persisted
//     boundary (Dispatcher), and, when it runs without a table (the dispatcher could not open), at
//     the file's boundary or else the log's first index (Server), so only segments removed by
//     hand, or a file lost together with its log prefix, lead here.
// Thread-safe: one writer (the dispatcher), many readers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "derived/derived_indexes.h"
#include "derived/group_commit.h"
#include "store/env.h"

namespace raftlog::derived {

// The bounds the leader enforces when it admits a commit (GroupTable::fits, before proposing).
inline constexpr std::size_t kMaxGroups = 1024;
inline constexpr std::size_t kMaxTopicsPerGroup = 64;
// Commits admitted together can each pass fits() against the same table and all apply: the table
// may exceed a bound by at most the commits a leader admits at once (GroupsService's pending-call
// bound, which static_asserts it stays within this). Apply, and the file's decoder, accept up to
// bound + kGroupBoundSlack; only a forged peer or a bug writes past that (counted, refused, the
// same on every node since it depends only on the log).
inline constexpr std::size_t kGroupBoundSlack = 64;
inline constexpr std::size_t kMaxStoredGroups = kMaxGroups + kGroupBoundSlack;
inline constexpr std::size_t kMaxStoredTopicsPerGroup = kMaxTopicsPerGroup + kGroupBoundSlack;
inline constexpr std::uint32_t kGroupTableMagic = 0x54474C52U;  // "RLGT" in file order
inline constexpr std::uint32_t kGroupTableVersion = 1;
inline constexpr std::uint32_t kGroupTableMarkerMagic = 0x43474C52U;  // "RLGC" in file order
inline constexpr std::uint32_t kGroupTableMarkerVersion = 1;
inline constexpr const char* kGroupTableMarkerName = "GROUPS_CREATED";
// kMaxStoredGroups * (group + kMaxStoredTopicsPerGroup slots) is about 21 MiB.
inline constexpr std::size_t kMaxGroupTableBytes = 32U << 20;

struct GroupOffset {
  std::uint64_t offset = 0;
  std::uint64_t index = 0;  // log index of the commit entry that set it
  std::uint64_t term = 0;
  friend bool operator==(const GroupOffset&, const GroupOffset&) = default;
};

struct GroupSlot {
  bool known = false;
  GroupOffset value;  // when known
  friend bool operator==(const GroupSlot&, const GroupSlot&) = default;
};

// What the file holds (also what the tests compare).
struct GroupTableState {
  std::string cluster_id;
  std::uint64_t boundary = 1;       // the exclusive log index applied
  std::uint64_t boundary_term = 0;  // term of entry boundary - 1 (0: not known)
  bool complete = true;
  std::map<std::string, std::map<std::string, GroupSlot>> groups;
  friend bool operator==(const GroupTableState&, const GroupTableState&) = default;
};

std::string encode_group_table(const GroupTableState& state);
// GROUPS_CREATED: magic, crc32c of [8, end), version, cluster id (u32 size + bytes). Its presence
// is what counts (a damaged one still says a table existed); its contents name the cluster for
// operators and tools.
std::string encode_group_table_marker(const std::string& cluster_id);
std::optional<std::string> decode_group_table_marker(const std::string& bytes);
// nullopt with `problem` when the bytes are not a valid table of this version.
std::optional<GroupTableState> decode_group_table(const std::string& bytes, std::string* problem);

// The boundary the file derived/GROUPS under `dir` covers, when it decodes and belongs to
// `cluster_id`; nullopt otherwise (missing, unreadable, damaged). What the node holds retention at
// when it runs without a group table (Dispatcher::open failed), so that a later start that can open
// the table again finds every commit it has not applied still in the log.
std::optional<std::uint64_t> read_group_table_boundary(store::Env* env, const std::string& dir,
                                                       const std::string& cluster_id);

enum class GroupLookup { kKnown, kNone, kUnknown };

struct GroupInfo {
  std::string group;
  std::size_t topics = 0;  // slots, known or not
  std::size_t unknown_topics = 0;
};

struct GroupFetch {
  bool found = false;                                        // the group has at least one slot
  std::vector<std::pair<std::string, GroupOffset>> offsets;  // known slots, by topic
  std::vector<std::string> unknown_topics;
};

class GroupTable {
 public:
  // `dir` is the node's data_dir/derived (the table is derived/GROUPS), `marker_dir` its data_dir
  // (GROUPS_CREATED). nullptr with `error` only when the files cannot be written at all.
  static std::unique_ptr<GroupTable> open(store::Env* env, std::string dir,
                                          const std::string& marker_dir, std::string cluster_id,
                                          const LogView& log, OpenReport* report,
                                          store::Status* error);

  std::uint64_t boundary() const;
  // Applies `entries` (which must continue exactly at boundary(): false and nothing done
  // otherwise). Entries that are not group commits only move the boundary. Every commit that
  // decodes applies, whatever the bounds the leader admits by (fits()); one that does not decode
  // is counted (bad_commits), one past the stored bounds (kMaxStored*, reached only by a forged
  // peer or a bug) is counted (refused_commits); neither changes the table. Not durable until
  // persist().
  bool apply(const std::vector<SourceEntry>& entries);
  // Retention removed [boundary(), index) before it was applied (see above).
  void skip_to(std::uint64_t index);
  // Replaces the whole table by `state`: a leader's table, from the snapshot this node installed
  // (docs/raft.md, "Snapshots"), whose boundary is at or past the log's new first index. Replay
  // continues from its boundary: the commits below it, which the table already holds, are skipped.
  // Not durable until persist().
  void replace(GroupTableState state);
  // Writes derived/GROUPS.tmp (fdatasync), renames it over GROUPS, fsyncs the directory.
  store::Status persist();
  // The table as it stands and a count of its changes, for persist_state().
  std::pair<GroupTableState, std::uint64_t> state_for_persist() const;
  // persist() of a state state_for_persist() returned earlier (the dispatcher's: as of the start of
  // the indexes' persist that makes every record its commits can name durable). Nothing when the
  // file covers more already, unless the state is a replace()d table the file does not hold yet
  // (written whatever its boundary); what changed after it was taken stays to be persisted.
  store::Status persist_state(const GroupTableState& state, std::uint64_t change_count);
  // The boundary the file on disk covers (what retention may trim up to).
  std::uint64_t persisted_boundary() const;
  // Whether a slot (or completeness) changed since the last persist: when false, a persist would
  // only move the file's boundary, which the dispatcher does rarely (dispatcher.h).
  bool slots_changed() const;

  GroupLookup lookup(const std::string& group, const std::string& topic, GroupOffset* out) const;
  GroupFetch fetch(const std::string& group) const;
  std::vector<GroupInfo> list() const;
  bool complete() const;
  // Whether a commit of (group, topic) would fit the bounds as the table stands: the leader's
  // admission check, before it proposes (never applied on replay).
  enum class Fit { kFits, kTooManyGroups, kTooManyTopics };
  Fit fits(const std::string& group, const std::string& topic) const;
  std::size_t group_count() const;
  std::uint64_t bad_commits() const;
  std::uint64_t refused_commits() const;
  GroupTableState state() const;

 private:
  GroupTable(store::Env* env, std::string dir);
  void apply_commit(const SourceEntry& entry);
  void roll_back(const LogView& log);
  void forget_all();  // every known slot becomes unknown, the table incomplete

  store::Env* env_;
  std::string dir_;
  mutable std::shared_mutex mu_;
  GroupTableState state_;
  std::uint64_t persisted_boundary_ = 1;
  bool slots_changed_ = false;
  std::uint64_t change_count_ = 0;  // slot changes, replacements and skips since open
  std::uint64_t replaced_at_change_ = 0;  // change_count_ as the last replace() left it
  std::uint64_t persisted_change_ = 0;    // change_count_ of the last state persisted
  std::uint64_t bad_commits_ = 0;
  std::uint64_t refused_commits_ = 0;
};

}  // namespace raftlog::derived

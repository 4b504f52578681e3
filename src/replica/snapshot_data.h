// Snapshot data: the replica's own state as of a snapshot's index S that the entries S+1.. do not
// carry (docs/raft.md, "Snapshots"; docs/storage-format.md, "Snapshot data and SNAPSHOT"). The
// leader's replica fills raft::Snapshot::data with it before the kSnapshot message leaves; a
// follower's replica checks it before its Raft core sees the message, installs it (replica_snapshot.cpp)
// and keeps the same bytes in <data_dir>/SNAPSHOT, which a restart loads before it rebuilds from the
// log. It holds:
//   - S, its term and the configuration in force at S (with the members' addresses): the install
//     refuses data that does not name the snapshot it travels in;
//   - the topic table as of S (the next offset of every topic) and the timestamp floor, so that
//     offsets continue densely after S and timestamps never go backwards (TOPICSTATE's content);
//   - the dedup table's remembered appends whose ranges start at or below S (one that straddles S
//     whole, when the sender has committed its end), clients most recently used first, bounded: clients beyond the byte budget are left out (they then behave as clients
//     the table evicted: a retry of theirs is appended again), and the sender's view start;
//   - an opaque section for the node above the replica (raftlogd: the consumer group table,
//     derived/GROUPS's encoding, at a boundary past S: server/dispatcher.h): checked and adopted
//     by the node through ReplicaDeps, carried as bytes here (the replica does not depend on
//     src/derived's tables).
//
// The same encoding, with origin kTrim, is what a node's own trim saves in SNAPSHOT before it
// deletes segments: its dedup part (a restart keeps answering retries of appends the trim removed)
// and, from version 2 on, the topic table as of S (the log's new first index - 1), from version 3
// on the configuration in force at S, which the node needs to send a snapshot at its first index - 1
// (replica_snapshot.cpp). TOPICSTATE and CONFSTATE already cover the rest.
//
// Versions: 1, 2 and 3 share the layout below; version 3 adds two fields after the configuration.
// Version 1: an installed snapshot (its topic table and configuration are the ones as of S), or a
// trim's that knew neither (an older binary wrote its table empty and its configuration as a
// placeholder). Version 2: a trim's whose topic table is the one as of S (its configuration is a
// placeholder). Version 3 says what the data describes at S in a flags byte, and carries the ids
// retired as of S (an installed snapshot's, for the follower's CONFSTATE). Each data is written in
// the lowest version that can say it: version 3 only for a trim that knows its configuration at S
// or for an installed snapshot that carries retired ids, so every older node still decodes what
// it can use (an older follower refuses, and counts, a version-3 snapshot: it stays behind until
// it runs this version).
//
// Version 5 (unframed, since4): a trim's of version 3 that also carries the running max of the
// entries' stamps as of S (flag bit 2, then a u64 after the retired ids), read by the same scan as
// its topic table; the derived indexes seed their time lookups after the trim with it
// (docs/design.md, "Time lookups after a trim"). Every trim of this version writes it; nothing
// else does (an installed snapshot carries the stamp in its framed version 6 instead). An older
// file's stamp is not known (0).
//
// Version 4 (snapshot_frames.h) is framed, with its own magic: what a leader sends a peer that
// decodes it (an installed snapshot's data; decode_snapshot_data reads every version). Version 6
// is version 4 with the running max stamp (or "not known") in its head, for a peer that decodes
// it; an install keeps the bytes it received in SNAPSHOT, so either framed version is read back
// from there. A trim, and a leader's send to an older peer, still write versions 1..3 (and 5).
//
// Layout, little-endian: u32 magic "RLSD", u32 CRC32C of every byte after it, u32 version (1..3, 5),
// u64 index, u64 term, u8 origin (1 installed, 2 trim), u32 length + raft::encode_config bytes;
// versions 3 and 5: u8 flags (bit 0 the topic table is the one as of S, bit 1 the configuration is
// the one in force at S, both for an installed snapshot; bit 2 set in version 5 and only there; no
// other bit), u32 retired id count (at most raft::kMaxRetiredIds), each u64 (non-zero, unique, not
// a member of the configuration); version 5 only: u64 the running max stamp (origin 2 with bit 0);
// then u64 timestamp floor (ms), u32 topic count, per topic (strictly increasing byte order) u8
// length, the topic, u64 next offset (1..TopicOffsets::kMaxNextOffset); u32 length + the node's
// section; u64 the sender's dedup view start, u32 client count, per client u64 client id
// (non-zero, unique), u64 forgotten_below, u32 append count (at most kMaxAppendsPerClient), per
// append u64 sequence, u64 first, u64 last, u64 term, u32 digest (1 <= first <= index, first <=
// last, 1 <= term <= the snapshot's term, sequence at or above forgotten_below, unique within the
// client). Nothing may follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raft/types.h"
#include "replica/dedup_table.h"
#include "replica/topic_offsets.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

// The newest version of the unframed layout (a trim that knows its configuration at S, or an
// installed snapshot with retired ids); versions 1 and 2 are still written for everything else and
// read (see the top of this file). Version 4 is the framed one (snapshot_frames.h).
inline constexpr std::uint32_t kSnapshotDataVersion = 3;
// Version 5 (unframed): a trim's that also carries the running max stamp as of its index (version
// 4 is the framed one).
inline constexpr std::uint32_t kSnapshotDataVersionWithStamp = 5;
// The largest snapshot data any node decodes (a file or a message). A sender's own budget
// (ReplicaConfig::max_snapshot_data_bytes) is smaller: one peer message carries it whole.
inline constexpr std::size_t kMaxSnapshotDataBytes = 64U << 20;
// The node's section (raftlogd: the consumer group table, at most 32 MiB encoded).
inline constexpr std::size_t kMaxSnapshotSectionBytes = 48U << 20;
// Remembered appends per client a snapshot may carry; a sender whose table keeps more
// (--dedup-sequences-per-client) sends the highest sequences and raises forgotten_below.
inline constexpr std::size_t kMaxAppendsPerClient = 4096;

// Where a snapshot data came from: a leader's snapshot this node installed, or its own trim.
enum class SnapshotOrigin : std::uint8_t { kInstalled = 1, kTrim = 2 };

struct SnapshotData {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  SnapshotOrigin origin = SnapshotOrigin::kInstalled;
  raft::ConfState conf;
  std::uint64_t timestamp_floor_ms = 0;
  std::vector<TopicOffsets::TopicNext> topics;  // sorted by topic
  // The running max of the entries' stamps (envelopes the decoder accepts) up to `index`, as the
  // trims of this node read it (0: no stamp), when `stamp_at_index` (a trim's of version 5, or an
  // installed snapshot's of framed version 6 whose sender knew it; the derived indexes seed their
  // time lookups with it). Versions 1..4, and version 6 saying "not known": false, 0. Encoded only
  // in those two: for a trim's with its topic table (the scan reads both), and in version 6; left
  // out of any other data.
  std::uint64_t stamp_max_ms = 0;
  bool stamp_at_index = false;
  // `topics` is the topic table as of `index`. Always for kInstalled; for kTrim only when the trim
  // knew it (version 2, or version 3's flag).
  bool topics_at_index = true;
  // `conf` is the configuration in force at `index`. Always for kInstalled; for kTrim only when the
  // trim knew it (version 3's flag; a placeholder before).
  bool conf_at_index = true;
  // Ids retired (removed by a committed configuration change, never members again) as of
  // `index`, as the sender knew them: the follower's install writes them into CONFSTATE, so that it
  // refuses to add them again (ID_RETIRED) once it leads. At most raft::kMaxRetiredIds, non-zero,
  // unique, none a member of `conf`; oldest retirement first. Empty for a trim (its CONFSTATE has
  // them).
  std::vector<raft::NodeId> retired_ids;
  std::string section;  // the node's own state (opaque here)
  std::uint64_t dedup_view_start = 0;
  // Version 4 only (snapshot_frames.h): the dedup view starts of the other leaders whose blocks a
  // follower kept when a new leader continued their transfer (sorted, distinct, none equal to
  // dedup_view_start, each at most index + 1; fewer than kMaxSnapshotSenders). A range starting at
  // any of them may be the tail of an append the table never saw whole (DedupTable::replace).
  std::vector<std::uint64_t> spliced_view_starts;
  // Most recently used first as a sender gathers them (versions 1..3 keep that order); ascending
  // client id as version 4 decodes them. The receiver's table orders them itself
  // (DedupTable::replace).
  std::vector<DedupTable::ClientState> dedup_clients;
  friend bool operator==(const SnapshotData&, const SnapshotData&) = default;
};

// Bytes `data` encodes to without its dedup clients, and what one client adds: the sender fills
// the dedup part up to its budget with them.
std::size_t encoded_size_without_dedup(const SnapshotData& data);
std::size_t encoded_client_size(const DedupTable::ClientState& client);

// One client of the sender's dedup table (DedupTable::for_each_client_through) as a snapshot of
// term `term` may carry it, satisfying every rule decode_snapshot_data checks: the table itself can
// hold a sequence twice (a re-proposal after a truncation, or a retry re-appended by a node whose
// table had forgotten the client: DedupTable::find answers from the newest, so only that one is
// kept) and a sequence below forgotten_below (remembered after a truncation made room; dropped:
// the receiver answers it kTooOld, a refusal, never a duplicate). A range of a term above `term`
// is dropped too. Beyond kMaxAppendsPerClient the highest sequences stay and forgotten_below rises
// to the lowest one kept. The remembered order (what the receiver's table evicts by) is kept.
DedupTable::ClientState exportable_client(const DedupTable::ClientState& client,
                                          std::uint64_t term);

// Precondition: `data` satisfies every rule decode_snapshot_data checks (the leader's own state
// does), and encoded_size_without_dedup + the clients' sizes <= kMaxSnapshotDataBytes.
std::string encode_snapshot_data(const SnapshotData& data);
// kCorruption naming the first problem for anything but a well-formed snapshot data of a known
// version (1..3, 5, or the framed 4 and 6: decode_framed_snapshot_data): it comes from the network
// or the disk, so nothing is trusted.
store::Result<SnapshotData> decode_snapshot_data(std::string_view bytes);

// <data_dir>/SNAPSHOT: the encoded data of the snapshot this node's log starts after (the last one
// it installed, or its own last trim's), and <data_dir>/SNAPSHOT.next: the one an install or a trim
// under way wrote before its commit point (the log reset, the prefix truncation). Both through `env`
// (nullptr: the POSIX Env), so that the simulator's power cuts apply to them. Never rewriting
// SNAPSHOT before the commit point keeps the previous state whole until the new one is durable:
//   write_snapshot_next: SNAPSHOT.next.tmp, fdatasync, rename to SNAPSHOT.next, directory fsync;
//   promote_snapshot_next (after the commit point): rename it over SNAPSHOT, directory fsync;
//   remove_snapshot_next: delete a SNAPSHOT.next whose commit point never came (a no-op if none).
// The open (Replica::load_snapshot_state) takes whichever file describes the log's start and
// finishes the promotion or removes the stale one. read: nullopt when the file does not exist.
// A follower's install prepares its data off the Raft loop (replica_snapshot_receive.cpp) in
// <data_dir>/SNAPSHOT.install:
//   write_snapshot_install: the file written and (sync) fdatasync'd, off the loop;
//   promote_snapshot_install (the install's step 2, on the loop): renamed to SNAPSHOT.next,
//     directory fsync; from there the install goes on as above;
//   remove_snapshot_install: an abandoned or failed preparation's, and one a crash left (the open).
// A SNAPSHOT.install is never read: nothing in it counts until it is renamed.
store::Status write_snapshot_install(store::Env* env, const std::string& data_dir,
                                     std::string_view bytes, bool sync);
store::Status promote_snapshot_install(store::Env* env, const std::string& data_dir);
store::Status remove_snapshot_install(store::Env* env, const std::string& data_dir);
enum class SnapshotFile { kCurrent, kNext };
store::Status write_snapshot_next(store::Env* env, const std::string& data_dir,
                                  std::string_view bytes);
store::Status promote_snapshot_next(store::Env* env, const std::string& data_dir);
store::Status remove_snapshot_next(store::Env* env, const std::string& data_dir);
store::Result<std::optional<SnapshotData>> read_snapshot_file(
    store::Env* env, const std::string& data_dir, SnapshotFile which = SnapshotFile::kCurrent);

}  // namespace raftlog::replica

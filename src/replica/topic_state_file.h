// TOPICSTATE: the replica's saved topic table and timestamp floor (docs/storage-format.md,
// "TOPICSTATE"), so that a restart knows every topic's next offset and the newest timestamp even
// when the entries that carried them are far back in the log or trimmed by retention.
//
// It describes the committed log up to `through_index`: what it holds is a function of that prefix,
// which no node's log can ever change, so a copy older than the log's end is still right (open()
// reads the entries after it) and one ahead of the log (a storage fault cut the log below it) is
// right too (the cut entries come back identical from the leader). Written atomically (TOPICSTATE.tmp,
// fdatasync, rename, directory fsync) through the store's Env, like the log, so the simulator's
// power cuts apply to it.
//
// Layout, little-endian: u32 magic "RLTS", u32 CRC32C of every byte after it, u32 version (1),
// u64 through_index, u64 timestamp floor (ms since the Unix epoch), u32 topic count (at most
// TopicOffsets::kMaxTopics), then per topic, in strictly increasing byte order: u8 length, the
// topic (envelope.h's charset), u64 next offset (1..kMaxTopicOffset + 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replica/topic_offsets.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

struct TopicState {
  std::uint64_t through_index = 0;
  std::uint64_t timestamp_floor_ms = 0;
  std::vector<TopicOffsets::TopicNext> topics;  // sorted by topic
  friend bool operator==(const TopicState&, const TopicState&) = default;
};

std::string encode_topic_state(const TopicState& state);
// kCorruption for anything but a well-formed record of a known version.
store::Result<TopicState> decode_topic_state(const std::string& bytes);

// <data_dir>/TOPICSTATE through `env` (nullptr: the POSIX Env). nullopt when there is none.
store::Result<std::optional<TopicState>> read_topic_state(store::Env* env,
                                                          const std::string& data_dir);
store::Status write_topic_state(store::Env* env, const std::string& data_dir,
                                const TopicState& state);

}  // namespace raftlog::replica

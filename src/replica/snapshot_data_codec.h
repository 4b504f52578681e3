// The record codecs shared by the snapshot data's versions (snapshot_data.cpp: versions 1 to 3;
// snapshot_frames.cpp: the framed version 4). Internal to those two files: each checks what
// snapshot_data.h's layout says of the record (nothing trusted), with `data`'s index and term as
// the bounds of a client's appends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replica/snapshot_data.h"
#include "store/byte_io.h"

namespace raftlog::replica::detail {

// An index near 2^64 would wrap index + 1 (the log's new start) and strand the node for good: the
// same bound as terms, far beyond any real log.
inline constexpr std::uint64_t kMaxSnapshotIndex = std::uint64_t{1} << 62;

store::Status snapshot_corrupt(const std::string& why);
store::Status decode_topics(store::ByteReader& in, SnapshotData* data);
store::Status decode_retired_ids(store::ByteReader& in, std::uint32_t count, SnapshotData* data);
store::Status decode_client(store::ByteReader& in, const SnapshotData& data,
                            DedupTable::ClientState* client);
void append_topics(std::string* out, const std::vector<TopicOffsets::TopicNext>& topics);
void append_client(std::string* out, const DedupTable::ClientState& client);
// Bytes of one topic's and one client's record.
std::size_t encoded_topic_size(const TopicOffsets::TopicNext& topic);

}  // namespace raftlog::replica::detail

#include "replica/snapshot_data.h"

#include "replica/snapshot_data_codec.h"
#include "replica/snapshot_frames.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "derived/envelope.h"
#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kMagic = 0x44534C52;  // "RLSD" in file order
constexpr const char* kSnapshotFileName = "SNAPSHOT";
// magic, CRC, version, index, term, origin, conf length
constexpr std::size_t kHeaderBytes = 4 + 4 + 4 + 8 + 8 + 1 + 4;
constexpr std::size_t kAppendBytes = 8 + 8 + 8 + 8 + 4;
constexpr std::size_t kClientHeaderBytes = 8 + 8 + 4;

store::Status corrupt(const std::string& why) { return detail::snapshot_corrupt(why); }

using detail::kMaxSnapshotIndex;

using Reader = store::ByteReader;

// Version 3's flags byte (snapshot_data.h); version 5 adds the third.
constexpr std::uint8_t kTopicsAtIndex = 1;
constexpr std::uint8_t kConfAtIndex = 2;
constexpr std::uint8_t kStampAtIndex = 4;

// The lowest version that says what `data` holds (the top of snapshot_data.h).
std::uint32_t version_for(const SnapshotData& data) {
  const bool trim = data.origin == SnapshotOrigin::kTrim;
  if (trim && data.topics_at_index && data.stamp_at_index) return kSnapshotDataVersionWithStamp;
  if (!data.retired_ids.empty() || (trim && data.conf_at_index)) return 3;
  return trim && data.topics_at_index ? 2 : 1;
}

}  // namespace

std::size_t encoded_client_size(const DedupTable::ClientState& client) {
  return kClientHeaderBytes + client.appends.size() * kAppendBytes;
}

DedupTable::ClientState exportable_client(const DedupTable::ClientState& client,
                                          std::uint64_t term) {
  DedupTable::ClientState kept{client.client_id, client.forgotten_below, {}};
  // Newest first, so the first record seen for a sequence is the one find() answers from.
  std::set<std::uint64_t> seen;
  for (auto append = client.appends.rbegin(); append != client.appends.rend(); ++append) {
    if (append->range.term > term || !seen.insert(append->sequence).second) continue;
    kept.appends.push_back(*append);
  }
  std::reverse(kept.appends.begin(), kept.appends.end());
  if (kept.appends.size() > kMaxAppendsPerClient) {
    // `seen` is sorted: the lowest sequence of the kMaxAppendsPerClient highest.
    auto lowest_kept = seen.end();
    std::advance(lowest_kept, -static_cast<std::ptrdiff_t>(kMaxAppendsPerClient));
    kept.forgotten_below = std::max(kept.forgotten_below, *lowest_kept);
  }
  std::erase_if(kept.appends, [&](const DedupTable::RememberedAppend& append) {
    return append.sequence < kept.forgotten_below;
  });
  return kept;
}

std::size_t encoded_size_without_dedup(const SnapshotData& data) {
  std::size_t size = kHeaderBytes + raft::encode_config(data.conf).size() + 8 + 4;
  if (version_for(data) >= 3) size += 1 + 4 + 8 * data.retired_ids.size();
  if (version_for(data) == kSnapshotDataVersionWithStamp) size += 8;
  for (const TopicOffsets::TopicNext& topic : data.topics) size += detail::encoded_topic_size(topic);
  return size + 4 + data.section.size() + 8 + 4;
}

std::string encode_snapshot_data(const SnapshotData& data) {
  std::string out;
  store::append_u32(&out, kMagic);
  store::append_u32(&out, 0);  // the CRC, below
  // A version only where a lower one cannot say it (the top of snapshot_data.h).
  const std::uint32_t version = version_for(data);
  store::append_u32(&out, version);
  store::append_u64(&out, data.index);
  store::append_u64(&out, data.term);
  out.push_back(static_cast<char>(data.origin));
  const std::string conf = raft::encode_config(data.conf);
  store::append_u32(&out, static_cast<std::uint32_t>(conf.size()));
  out += conf;
  if (version >= 3) {
    out.push_back(static_cast<char>(
        (data.topics_at_index ? kTopicsAtIndex : 0) | (data.conf_at_index ? kConfAtIndex : 0) |
        (version == kSnapshotDataVersionWithStamp ? kStampAtIndex : 0)));
    store::append_u32(&out, static_cast<std::uint32_t>(data.retired_ids.size()));
    for (raft::NodeId id : data.retired_ids) store::append_u64(&out, id);
  }
  if (version == kSnapshotDataVersionWithStamp) store::append_u64(&out, data.stamp_max_ms);
  store::append_u64(&out, data.timestamp_floor_ms);
  detail::append_topics(&out, data.topics);
  store::append_u32(&out, static_cast<std::uint32_t>(data.section.size()));
  out += data.section;
  store::append_u64(&out, data.dedup_view_start);
  store::append_u32(&out, static_cast<std::uint32_t>(data.dedup_clients.size()));
  for (const DedupTable::ClientState& client : data.dedup_clients) {
    detail::append_client(&out, client);
  }
  store::put_u32(out.data() + 4, util::crc32c::value(out.data() + 8, out.size() - 8));
  return out;
}

namespace detail {

store::Status snapshot_corrupt(const std::string& why) {
  return store::Status::corruption("snapshot data: " + why);
}

std::size_t encoded_topic_size(const TopicOffsets::TopicNext& topic) {
  return 1 + topic.topic.size() + 8;
}

store::Status decode_topics(Reader& in, SnapshotData* data) {
  std::uint32_t count = 0;
  if (!in.u32(&count)) return corrupt("truncated before the topic table");
  if (count > TopicOffsets::kMaxTopics) return corrupt(std::to_string(count) + " topics");
  // Each topic takes at least 10 bytes: a count beyond what is left is refused before reserving.
  if (count > in.remaining() / 10) return corrupt("truncated topic table");
  data->topics.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t size = 0;
    TopicOffsets::TopicNext topic;
    if (!in.u8(&size) || !in.bytes(size, &topic.topic) || !in.u64(&topic.next_offset)) {
      return corrupt("truncated topic table");
    }
    if (!derived::topic_problem(topic.topic).empty()) return corrupt("an invalid topic name");
    if (!data->topics.empty() && topic.topic <= data->topics.back().topic) {
      return corrupt("topics out of order");
    }
    if (topic.next_offset == 0 || topic.next_offset > TopicOffsets::kMaxNextOffset) {
      return corrupt("a bad next offset");
    }
    data->topics.push_back(std::move(topic));
  }
  return store::Status();
}

}  // namespace detail

namespace {

// Version 3's flags and retired ids, after the configuration (version 5: its flag says the running
// max stamp follows; always set there, never in version 3).
store::Status decode_version_3_fields(Reader& in, std::uint32_t version, SnapshotData* data) {
  std::uint8_t flags = 0;
  std::uint32_t count = 0;
  if (!in.u8(&flags) || !in.u32(&count)) return corrupt("truncated before the retired ids");
  const bool with_stamp = version == kSnapshotDataVersionWithStamp;
  if ((flags & ~(kTopicsAtIndex | kConfAtIndex | kStampAtIndex)) != 0 ||
      ((flags & kStampAtIndex) != 0) != with_stamp) {
    return corrupt("unknown flags " + std::to_string(flags) + " for version " +
                   std::to_string(version));
  }
  data->topics_at_index = (flags & kTopicsAtIndex) != 0;
  data->conf_at_index = (flags & kConfAtIndex) != 0;
  data->stamp_at_index = with_stamp;
  if (data->origin == SnapshotOrigin::kInstalled &&
      (!data->topics_at_index || !data->conf_at_index)) {
    return corrupt("an installed snapshot that does not describe its index");
  }
  return detail::decode_retired_ids(in, count, data);
}

}  // namespace

namespace detail {

store::Status decode_retired_ids(Reader& in, std::uint32_t count, SnapshotData* data) {
  if (count > raft::kMaxRetiredIds || count > in.remaining() / 8) {
    return corrupt(std::to_string(count) + " retired ids");
  }
  data->retired_ids.resize(count);
  std::set<raft::NodeId> seen;
  for (raft::NodeId& id : data->retired_ids) {
    (void)in.u64(&id);
    if (id == raft::kNoNode || !seen.insert(id).second || raft::is_member(data->conf, id)) {
      return corrupt("a retired id 0, repeated or a member");
    }
  }
  return store::Status();
}

store::Status decode_client(Reader& in, const SnapshotData& data, DedupTable::ClientState* client) {
  std::uint32_t count = 0;
  if (!in.u64(&client->client_id) || !in.u64(&client->forgotten_below) || !in.u32(&count)) {
    return corrupt("truncated dedup table");
  }
  if (client->client_id == 0) return corrupt("a dedup client 0");
  if (count > kMaxAppendsPerClient)
    return corrupt("a client with " + std::to_string(count) + " appends");
  if (count > in.remaining() / kAppendBytes) return corrupt("truncated dedup table");
  client->appends.resize(count);
  std::set<std::uint64_t> sequences;
  for (DedupTable::RememberedAppend& append : client->appends) {
    if (!in.u64(&append.sequence) || !in.u64(&append.range.first) || !in.u64(&append.range.last) ||
        !in.u64(&append.range.term) || !in.u32(&append.digest)) {
      return corrupt("truncated dedup table");
    }
    // It starts at or below the snapshot's index; it may end after it (kept whole when committed).
    if (append.range.first == 0 || append.range.first > append.range.last ||
        append.range.first > data.index) {
      return corrupt("a remembered append starting outside 1.." + std::to_string(data.index));
    }
    if (append.range.term == 0 || append.range.term > data.term) {
      return corrupt("a remembered append of term " + std::to_string(append.range.term));
    }
    if (append.sequence < client->forgotten_below || !sequences.insert(append.sequence).second) {
      return corrupt("a remembered sequence forgotten or repeated");
    }
  }
  return store::Status();
}

void append_topics(std::string* out, const std::vector<TopicOffsets::TopicNext>& topics) {
  store::append_u32(out, static_cast<std::uint32_t>(topics.size()));
  for (const TopicOffsets::TopicNext& topic : topics) {
    out->push_back(static_cast<char>(topic.topic.size()));
    *out += topic.topic;
    store::append_u64(out, topic.next_offset);
  }
}

void append_client(std::string* out, const DedupTable::ClientState& client) {
  store::append_u64(out, client.client_id);
  store::append_u64(out, client.forgotten_below);
  store::append_u32(out, static_cast<std::uint32_t>(client.appends.size()));
  for (const DedupTable::RememberedAppend& append : client.appends) {
    store::append_u64(out, append.sequence);
    store::append_u64(out, append.range.first);
    store::append_u64(out, append.range.last);
    store::append_u64(out, append.range.term);
    store::append_u32(out, append.digest);
  }
}

}  // namespace detail

store::Result<SnapshotData> decode_snapshot_data(std::string_view bytes) {
  if (bytes.size() > kMaxSnapshotDataBytes) return corrupt(std::to_string(bytes.size()) + " bytes");
  // Version 4 has its own magic (snapshot_frames.h): no version-1..3 data starts with it.
  if (bytes.size() >= 4 && store::get_u32(bytes.data()) == kFramedSnapshotMagic) {
    return decode_framed_snapshot_data(bytes);
  }
  if (bytes.size() < kHeaderBytes) return corrupt("shorter than its header");
  if (store::get_u32(bytes.data()) != kMagic) return corrupt("bad magic");
  if (store::get_u32(bytes.data() + 4) != util::crc32c::value(bytes.data() + 8, bytes.size() - 8)) {
    return corrupt("checksum mismatch");
  }
  const std::uint32_t version = store::get_u32(bytes.data() + 8);
  if (version < 1 || (version > kSnapshotDataVersion && version != kSnapshotDataVersionWithStamp)) {
    return corrupt("unknown version " + std::to_string(version));
  }
  Reader in(bytes.substr(12));
  SnapshotData data;
  std::uint32_t conf_size = 0;
  std::uint8_t origin = 0;
  (void)in.u64(&data.index);
  (void)in.u64(&data.term);
  (void)in.u8(&origin);
  (void)in.u32(&conf_size);
  if (origin != static_cast<std::uint8_t>(SnapshotOrigin::kInstalled) &&
      origin != static_cast<std::uint8_t>(SnapshotOrigin::kTrim)) {
    return corrupt("unknown origin " + std::to_string(origin));
  }
  data.origin = static_cast<SnapshotOrigin>(origin);
  // Version 2 is only ever a trim's (one encoding per content: the version is not a free choice).
  if (version == 2 && data.origin != SnapshotOrigin::kTrim)
    return corrupt("version 2 not a trim's");
  data.topics_at_index = data.origin == SnapshotOrigin::kInstalled || version >= 2;
  data.conf_at_index = data.origin == SnapshotOrigin::kInstalled;  // version 3: its flags, below
  // An index near 2^64 would wrap index + 1 (the log's new start) and strand the node for good:
  // the same bound as terms, far beyond any real log.
  if (data.index == 0 || data.index > kMaxSnapshotIndex || data.term == 0 ||
      data.term > raft::kMaxTerm) {
    return corrupt("index " + std::to_string(data.index) + " term " + std::to_string(data.term));
  }
  std::string conf;
  if (conf_size > raft::kMaxConfigBytes || !in.bytes(conf_size, &conf)) {
    return corrupt("a bad configuration length");
  }
  std::optional<raft::ConfState> decoded_conf = raft::decode_config(conf);
  if (!decoded_conf) return corrupt("a configuration that does not decode");
  data.conf = std::move(*decoded_conf);
  if (version >= 3) {
    RAFTLOG_RETURN_IF_ERROR(decode_version_3_fields(in, version, &data));
    if (version == kSnapshotDataVersionWithStamp) {
      if (!in.u64(&data.stamp_max_ms)) return corrupt("truncated before the running max stamp");
      // Only a trim's, which knows its topic table as of the index (the scan that reads both).
      if (data.origin != SnapshotOrigin::kTrim || !data.topics_at_index) {
        return corrupt("version 5 not a trim's with its topic table");
      }
    }
    // One encoding per content: version 3 (or 5) only where a lower one cannot say it.
    if (version_for(data) != version) {
      return corrupt("version " + std::to_string(version) + " for what another version says");
    }
  }
  if (!in.u64(&data.timestamp_floor_ms)) return corrupt("truncated before the timestamp floor");
  RAFTLOG_RETURN_IF_ERROR(detail::decode_topics(in, &data));
  std::uint32_t section_size = 0;
  if (!in.u32(&section_size) || section_size > kMaxSnapshotSectionBytes ||
      !in.bytes(section_size, &data.section)) {
    return corrupt("a bad node section");
  }
  std::uint32_t clients = 0;
  if (!in.u64(&data.dedup_view_start) || !in.u32(&clients)) return corrupt("truncated dedup table");
  if (data.dedup_view_start > data.index + 1) return corrupt("a dedup view start past the index");
  if (clients > in.remaining() / kClientHeaderBytes) return corrupt("truncated dedup table");
  data.dedup_clients.resize(clients);
  std::set<std::uint64_t> ids;
  for (DedupTable::ClientState& client : data.dedup_clients) {
    RAFTLOG_RETURN_IF_ERROR(detail::decode_client(in, data, &client));
    if (!ids.insert(client.client_id).second) return corrupt("a dedup client listed twice");
  }
  if (in.remaining() != 0) return corrupt("trailing bytes");
  return data;
}

namespace {

std::string snapshot_path(const std::string& data_dir, SnapshotFile which) {
  const std::string path = store::join_path(data_dir, kSnapshotFileName);
  return which == SnapshotFile::kNext ? path + ".next" : path;
}

}  // namespace

store::Status write_snapshot_next(store::Env* env, const std::string& data_dir,
                                  std::string_view bytes) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = snapshot_path(data_dir, SnapshotFile::kNext);
  const std::string temp = path + ".tmp";
  RAFTLOG_RETURN_IF_ERROR(env->write_file(temp, bytes));
  RAFTLOG_RETURN_IF_ERROR(env->rename(temp, path));
  return env->sync_dir(data_dir);
}

namespace {

std::string snapshot_install_path(const std::string& data_dir) {
  return data_dir + "/SNAPSHOT.install";
}

}  // namespace

store::Status write_snapshot_install(store::Env* env, const std::string& data_dir,
                                     std::string_view bytes, bool sync) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = snapshot_install_path(data_dir);
  if (sync) return env->write_file(path, bytes);  // written, then fdatasync
  // Only the planted bug (durability_rules.h, install_syncs_prepared_snapshot) writes unsynced.
  auto file = env->open(path, /*create=*/true);
  if (!file.ok()) return file.status();
  RAFTLOG_RETURN_IF_ERROR((*file)->truncate(bytes.size()));  // MemoryEnv writes within its size
  return (*file)->write_at(0, bytes);
}

store::Status promote_snapshot_install(store::Env* env, const std::string& data_dir) {
  if (env == nullptr) env = store::Env::posix();
  RAFTLOG_RETURN_IF_ERROR(env->rename(snapshot_install_path(data_dir),
                                      snapshot_path(data_dir, SnapshotFile::kNext)));
  return env->sync_dir(data_dir);
}

store::Status remove_snapshot_install(store::Env* env, const std::string& data_dir) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = snapshot_install_path(data_dir);
  if (!env->exists(path)) return store::Status();
  RAFTLOG_RETURN_IF_ERROR(env->remove(path));
  return env->sync_dir(data_dir);
}

store::Status promote_snapshot_next(store::Env* env, const std::string& data_dir) {
  if (env == nullptr) env = store::Env::posix();
  RAFTLOG_RETURN_IF_ERROR(env->rename(snapshot_path(data_dir, SnapshotFile::kNext),
                                      snapshot_path(data_dir, SnapshotFile::kCurrent)));
  return env->sync_dir(data_dir);
}

store::Status remove_snapshot_next(store::Env* env, const std::string& data_dir) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = snapshot_path(data_dir, SnapshotFile::kNext);
  if (!env->exists(path)) return store::Status();
  RAFTLOG_RETURN_IF_ERROR(env->remove(path));
  return env->sync_dir(data_dir);
}

store::Result<std::optional<SnapshotData>> read_snapshot_file(store::Env* env,
                                                              const std::string& data_dir,
                                                              SnapshotFile which) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = snapshot_path(data_dir, which);
  if (!env->exists(path)) return std::optional<SnapshotData>();
  auto bytes = env->read_file(path, kMaxSnapshotDataBytes);
  if (!bytes.ok()) return bytes.status();
  auto data = decode_snapshot_data(*bytes);
  if (!data.ok()) return store::Status::corruption(path + ": " + data.status().message());
  return std::optional<SnapshotData>(std::move(*data));
}

}  // namespace raftlog::replica

#include "replica/topic_state_file.h"

#include "derived/envelope.h"
#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kMagic = 0x53544C52;  // "RLTS"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 4 + 4 + 4 + 8 + 8 + 4;
constexpr std::size_t kMaxBytes =
    kHeaderBytes + TopicOffsets::kMaxTopics * (1 + derived::kMaxTopicBytes + 8);
constexpr const char* kFileName = "TOPICSTATE";

store::Status corrupt(const std::string& why) {
  return store::Status::corruption("TOPICSTATE: " + why);
}

}  // namespace

std::string encode_topic_state(const TopicState& state) {
  std::string out;
  store::append_u32(&out, kMagic);
  store::append_u32(&out, 0);  // the CRC, below
  store::append_u32(&out, kVersion);
  store::append_u64(&out, state.through_index);
  store::append_u64(&out, state.timestamp_floor_ms);
  store::append_u32(&out, static_cast<std::uint32_t>(state.topics.size()));
  for (const TopicOffsets::TopicNext& topic : state.topics) {
    out.push_back(static_cast<char>(topic.topic.size()));
    out.append(topic.topic);
    store::append_u64(&out, topic.next_offset);
  }
  store::put_u32(out.data() + 4, util::crc32c::value(out.data() + 8, out.size() - 8));
  return out;
}

store::Result<TopicState> decode_topic_state(const std::string& bytes) {
  if (bytes.size() < kHeaderBytes) return corrupt("shorter than its header");
  if (store::get_u32(bytes.data()) != kMagic) return corrupt("bad magic");
  if (store::get_u32(bytes.data() + 4) != util::crc32c::value(bytes.data() + 8, bytes.size() - 8)) {
    return corrupt("checksum mismatch");
  }
  if (const std::uint32_t version = store::get_u32(bytes.data() + 8); version != kVersion) {
    return corrupt("unknown version " + std::to_string(version));
  }
  TopicState state;
  state.through_index = store::get_u64(bytes.data() + 12);
  state.timestamp_floor_ms = store::get_u64(bytes.data() + 20);
  const std::uint32_t count = store::get_u32(bytes.data() + 28);
  if (count > TopicOffsets::kMaxTopics) return corrupt(std::to_string(count) + " topics");
  std::size_t at = kHeaderBytes;
  state.topics.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    if (at >= bytes.size()) return corrupt("truncated topic list");
    const std::size_t size = static_cast<unsigned char>(bytes[at++]);
    if (bytes.size() - at < size + 8) return corrupt("truncated topic list");
    std::string topic = bytes.substr(at, size);
    at += size;
    const std::uint64_t next = store::get_u64(bytes.data() + at);
    at += 8;
    if (!derived::topic_problem(topic).empty()) return corrupt("an invalid topic name");
    if (!state.topics.empty() && topic <= state.topics.back().topic) {
      return corrupt("topics out of order");
    }
    if (next == 0 || next > TopicOffsets::kMaxNextOffset) return corrupt("a bad next offset");
    state.topics.push_back(TopicOffsets::TopicNext{std::move(topic), next});
  }
  if (at != bytes.size()) return corrupt("trailing bytes");
  return state;
}

store::Result<std::optional<TopicState>> read_topic_state(store::Env* env,
                                                          const std::string& data_dir) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = store::join_path(data_dir, kFileName);
  if (!env->exists(path)) return std::optional<TopicState>();
  auto bytes = env->read_file(path, kMaxBytes);
  if (!bytes.ok()) return bytes.status();
  auto state = decode_topic_state(*bytes);
  if (!state.ok()) return state.status();
  return std::optional<TopicState>(std::move(*state));
}

store::Status write_topic_state(store::Env* env, const std::string& data_dir,
                                const TopicState& state) {
  if (env == nullptr) env = store::Env::posix();
  const std::string path = store::join_path(data_dir, kFileName);
  const std::string temp = path + ".tmp";
  RAFTLOG_RETURN_IF_ERROR(env->write_file(temp, encode_topic_state(state)));
  RAFTLOG_RETURN_IF_ERROR(env->rename(temp, path));
  return env->sync_dir(data_dir);
}

}  // namespace raftlog::replica

// Shared by the derived index tests: a log of entries with topics and keys (FakeLog, a LogView),
// replay into DerivedIndexes, and a full description of an index's answers for comparisons with an
// index rebuilt from scratch.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "derived/derived_indexes.h"
#include "derived/envelope.h"
#include "shared/v1_envelope.h"
#include "store/memory_env.h"
#include "util/prng.h"

namespace raftlog::derived::testing {

class FakeLog final : public LogView {
 public:
  std::uint64_t first = 1;
  std::vector<SourceEntry> entries;  // entries[i].index == first + i

  std::uint64_t first_index() const override { return first; }
  std::uint64_t last_index() const override { return first + entries.size() - 1; }
  std::optional<std::uint64_t> term_at(std::uint64_t index) const override {
    if (index < first || index > last_index()) return std::nullopt;
    return entries[index - first].term;
  }
  // What a leader stamps next per topic (src/replica/topic_offsets.h does it for real).
  std::map<std::string, std::uint64_t> next_offsets;

  // An entry with a version-2 envelope whose topic offset continues its topic, as a leader stamps it.
  void add(std::uint64_t term, const std::string& topic, std::vector<std::string> keys,
           std::uint64_t timestamp, const std::string& body = "x") {
    SourceEntry entry;
    entry.index = first + entries.size();
    entry.term = term;
    entry.has_envelope = true;
    encode_envelope(timestamp, topic, keys, body, &entry.payload);
    if (!topic.empty()) {
      EXPECT_TRUE(stamp_envelope(&entry.payload, timestamp, next_offsets[topic]++));
    }
    entries.push_back(std::move(entry));
  }
  // An entry with a version-1 envelope (no topic offset: written before offsets were assigned).
  void add_v1(std::uint64_t term, const std::string& topic, std::uint64_t timestamp,
              const std::string& body = "x") {
    SourceEntry entry;
    entry.index = first + entries.size();
    entry.term = term;
    entry.has_envelope = true;
    entry.payload = ::raftlog::testing::v1_envelope(topic, body, timestamp);
    if (!topic.empty()) ++next_offsets[topic];
    entries.push_back(std::move(entry));
  }
  void add_plain(std::uint64_t term) {
    SourceEntry entry;
    entry.index = first + entries.size();
    entry.term = term;
    entry.payload = "plain";
    entries.push_back(std::move(entry));
  }
  // Cuts the tail; the next offsets of its topics go back to what the cut entries had (a leader's
  // table after a truncation). Version-2 entries only.
  void truncate_from(std::uint64_t index) {
    std::map<std::string, std::uint64_t> restored;
    for (std::uint64_t i = index; i <= last_index(); ++i) {
      DecodedEnvelope envelope;
      const SourceEntry& entry = entries[i - first];
      if (!entry.has_envelope || decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk ||
          !envelope.has_topic_offset) {
        continue;
      }
      restored.emplace(std::string(envelope.topic), envelope.topic_offset);
    }
    for (const auto& [topic, next] : restored) next_offsets[topic] = next;
    entries.resize(index - first);
  }
  void trim_to(std::uint64_t new_first) {
    entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(new_first - first));
    first = new_first;
  }
};

// A seeded log: topics t0..t3, keys k0..k9, timestamps that mostly grow (and sometimes repeat or
// step back, as a leader with a slower clock would stamp them before the max is taken; never with
// `monotonic`, as leaders whose clocks differ by less than the replica's 60 s skew bound stamp).
inline FakeLog random_log(std::uint64_t seed, std::size_t count, bool monotonic = false) {
  util::Prng prng(seed);
  FakeLog log;
  std::uint64_t term = 1;
  std::uint64_t time = 1'000'000;
  for (std::size_t i = 0; i < count; ++i) {
    if (prng.next_u64() % 50 == 0) ++term;
    time += prng.next_u64() % 5;
    if (prng.next_u64() % 10 == 0 && !monotonic) time -= 2;
    if (prng.next_u64() % 7 == 0) {
      log.add_plain(term);
      continue;
    }
    std::vector<std::string> keys;
    for (std::uint64_t k = prng.next_u64() % 3; k > 0; --k) keys.push_back("k" + std::to_string(prng.next_u64() % 10));
    const std::string topic = prng.next_u64() % 5 == 0 ? "" : "t" + std::to_string(prng.next_u64() % 4);
    log.add(term, topic, keys, time);
  }
  return log;
}

// Each topic's next offset after the entries of `full` below `first` (the topic table a trim's
// snapshot saves: what the dispatcher seeds the indexes with).
inline std::vector<TopicNextOffset> table_before(const FakeLog& full, std::uint64_t first) {
  std::map<std::string, std::uint64_t> next;
  for (std::uint64_t index = full.first; index < first; ++index) {
    const SourceEntry& entry = full.entries[index - full.first];
    DecodedEnvelope envelope;
    if (!entry.has_envelope || decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk ||
        envelope.topic.empty()) {
      continue;
    }
    ++next[std::string(envelope.topic)];
  }
  std::vector<TopicNextOffset> table;
  for (const auto& [topic, offset] : next) table.push_back({topic, offset});
  return table;
}

// The running max of the stamps of `full`'s entries below `first` (0: none): what a trim's SNAPSHOT
// of version 5 carries beside the table, and the dispatcher seeds with it.
inline std::uint64_t stamp_before(const FakeLog& full, std::uint64_t first) {
  std::uint64_t max = 0;
  for (std::uint64_t index = full.first; index < first; ++index) {
    const SourceEntry& entry = full.entries[index - full.first];
    DecodedEnvelope envelope;
    if (entry.has_envelope && decode_envelope(entry.payload, &envelope) == EnvelopeDecode::kOk) {
      max = std::max(max, envelope.timestamp_ms);
    }
  }
  return max;
}

// Applies every entry of `log` from the index's boundary on, in batches of `batch`.
inline void replay(DerivedIndexes& indexes, const FakeLog& log, std::size_t batch = 7) {
  while (indexes.boundary() <= log.last_index()) {
    const std::uint64_t from = indexes.boundary();
    std::vector<SourceEntry> entries;
    for (std::uint64_t i = from; i <= log.last_index() && entries.size() < batch; ++i) {
      entries.push_back(log.entries[i - log.first]);
    }
    ASSERT_TRUE(indexes.apply(entries));
  }
}

// Every answer the index gives about `log` (all topics read whole, every key, a time sweep).
inline std::string describe(const DerivedIndexes& indexes, const FakeLog& log) {
  std::ostringstream out;
  const std::uint64_t visible = log.last_index();
  for (const TopicInfo& topic : indexes.list_topics(visible, log.first)) {
    out << "topic " << topic.topic << " [" << topic.first_offset << "," << topic.end_offset << "):";
    const TopicRead read =
        indexes.read_topic(topic.topic, topic.first_offset, 1'000'000, visible, log.first);
    for (const QueueRecord& r : read.records)
      out << " " << r.offset << "=" << r.index << "@" << r.timestamp_ms;
    out << "\n";
  }
  for (int k = 0; k < 10; ++k) {
    out << "key k" << k << ":";
    for (std::uint64_t index : indexes.lookup_key("k" + std::to_string(k), 1'000'000, visible, log.first))
      out << " " << index;
    out << "\n";
  }
  for (std::uint64_t t = 999'990; t < 1'000'000 + 5 * log.entries.size() + 10; t += 3) {
    out << indexes.find_by_time(t, visible, log.first) << ",";
  }
  return out.str();
}

// Opens the indexes of `env`'s /derived against `log` (a test failure when they do not open).
// `records_per_segment`: small in the tests where retention must drop segments.
inline std::unique_ptr<DerivedIndexes> open_indexes(
    store::MemoryEnv& env, const LogView& log, OpenReport* report,
    LogIdentity identity = LogIdentity{"c", 1},
    std::uint64_t records_per_segment = kRecordsPerSegment) {
  store::Status error;
  auto indexes = DerivedIndexes::open(&env, "/derived", std::move(identity), log, report, &error,
                                      records_per_segment);
  EXPECT_NE(indexes, nullptr) << error.to_string();
  return indexes;
}

// Opens the indexes as the dispatcher does: seeded with the topic table and the running max stamp
// as of the log's first index - 1 when the log was trimmed (Dispatcher::seed_topics_from_snapshot,
// at every open).
inline std::unique_ptr<DerivedIndexes> open_seeded(
    store::MemoryEnv& env, const FakeLog& full, const FakeLog& log, OpenReport* report,
    std::uint64_t records_per_segment = kRecordsPerSegment) {
  auto indexes = open_indexes(env, log, report, LogIdentity{"c", 1}, records_per_segment);
  if (indexes != nullptr && log.first > 1) {
    (void)indexes->seed_topic_offsets(log.first, table_before(full, log.first),
                                      stamp_before(full, log.first));
  }
  return indexes;
}

// An index built from nothing over `log`, in a fresh MemoryEnv.
inline std::string describe_from_scratch(const FakeLog& log) {
  store::MemoryEnv env;
  OpenReport report;
  store::Status error;
  auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, &report, &error);
  EXPECT_NE(indexes, nullptr) << error.to_string();
  if (indexes == nullptr) return "";
  replay(*indexes, log);
  return describe(*indexes, log);
}

}  // namespace raftlog::derived::testing

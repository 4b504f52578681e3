// Topic, key and time queries (proto raftlog.v1.Topics; docs/client-protocol.md, "Topics and
// keys"). Every node answers from its own indexes, so a call goes to the first endpoint that
// answers: one that is down, shutting down or has no usable indexes (UNAVAILABLE,
// DEADLINE_EXCEEDED) is left for the next, after a short backoff, within retry_deadline_ms. Every
// other error is returned at once (INVALID_ARGUMENT, OUT_OF_RANGE with TOPIC_OFFSET_TRIMMED).
// Appending with a topic and keys is Client::append(payloads, attributes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "client/client.h"

namespace raftlog::client {

struct TopicSummary {
  std::string topic;
  std::uint64_t first_offset = 0;
  std::uint64_t end_offset = 0;
};

struct TopicListing {
  std::vector<TopicSummary> topics;
  std::uint64_t commit_index = 0;
  std::uint64_t indexed_through = 0;
  std::string served_by;
};

struct TopicEntry {
  std::uint64_t offset = 0;
  Entry entry;
};

struct TopicReadResult {
  std::vector<TopicEntry> entries;
  std::uint64_t first_offset = 0;
  std::uint64_t end_offset = 0;  // the next from_offset
  std::uint64_t indexed_through = 0;
  std::string served_by;
};

struct TimeLookup {
  bool found = false;
  std::uint64_t index = 0;
  std::uint64_t offset = 0;  // with a topic
};

// Called for each tailed entry in offset order, each offset once. Return false to end the tail.
using TopicTailCallback = std::function<bool(const TopicEntry& entry)>;

class Topics {
 public:
  static Result<std::unique_ptr<Topics>> create(Options options);
  ~Topics();
  Topics(const Topics&) = delete;
  Topics& operator=(const Topics&) = delete;

  Result<TopicListing> list();
  Result<TopicReadResult> read(const std::string& topic, std::uint64_t from_offset,
                               std::uint32_t max_entries);
  // Follows `topic` from `from_offset` until the callback returns false, `stop` is requested or
  // `duration_ms` (0 = no limit) passes; reconnects to the next endpoint when a stream breaks,
  // resuming at the next offset. Returns the next offset not delivered.
  Result<std::uint64_t> tail(const std::string& topic, std::uint64_t from_offset,
                             std::uint64_t duration_ms, std::stop_token stop,
                             const TopicTailCallback& on_entry);
  Result<std::vector<Entry>> lookup_key(const std::string& key, std::uint32_t max_entries);
  Result<TimeLookup> find_by_time(std::uint64_t timestamp_ms, const std::string& topic);

 private:
  class Impl;
  explicit Topics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "2026-12-01T09:00Z", "2026-12-01T09:00:30Z", "2026-12-01T09:00:30.250Z", "2026-12-01" (UTC
// midnight), or milliseconds since the Unix epoch; false for anything else.
bool parse_time(const std::string& text, std::uint64_t* timestamp_ms);

}  // namespace raftlog::client

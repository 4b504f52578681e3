// Consumer groups (proto raftlog.v1.Groups; docs/client-protocol.md, "Consumer groups"): a group
// commits, per topic, the next offset it will read, through the replicated log, and fetches it
// back. Every call goes to the leader (NOT_LEADER hints are followed, UNAVAILABLE and
// DEADLINE_EXCEEDED retried within retry_deadline_ms, like appends). A fetch sees every commit
// acknowledged before it started, on whichever leader answers it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"

namespace raftlog::client {

struct GroupTopicOffset {
  std::string topic;
  std::uint64_t offset = 0;
  std::uint64_t commit_index = 0;  // the log index of the commit that set it
};

struct GroupOffsets {
  std::vector<GroupTopicOffset> offsets;  // by topic; a topic absent has no committed offset
  std::uint64_t read_index = 0;
  std::string served_by;
};

struct GroupSummary {
  std::string group;
  std::uint32_t topics = 0;
  std::uint32_t unknown_topics = 0;
};

struct GroupListing {
  std::vector<GroupSummary> groups;  // by name
  bool complete = true;  // false: this leader's table cannot rule out groups it does not list
  std::uint64_t read_index = 0;
  std::string served_by;
};

struct GroupCommitResult {
  std::uint64_t index = 0;  // the commit entry's log index
  std::uint64_t term = 0;
};

class Groups {
 public:
  static Result<std::unique_ptr<Groups>> create(Options options);
  ~Groups();
  Groups(const Groups&) = delete;
  Groups& operator=(const Groups&) = delete;

  // Sets `group`'s offset for `topic`. Retrying a commit is harmless (same value again), but two
  // writers of one group and topic race: the last commit in log order wins.
  Result<GroupCommitResult> commit(const std::string& group, const std::string& topic,
                                   std::uint64_t offset);
  // The group's offsets: every topic it has (`topics` empty), or only those named.
  Result<GroupOffsets> fetch(const std::string& group, const std::vector<std::string>& topics = {});
  Result<GroupListing> list();

 private:
  class Impl;
  explicit Groups(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::client

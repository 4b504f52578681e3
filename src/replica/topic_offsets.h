// TopicOffsets: the next offset of every topic as this node's log stands, so that a leader can
// write each new entry's per-topic offset into its envelope (docs/design.md, "Topic offsets").
//
// The table is a function of the log: for each topic, one more than the offset of the topic's
// newest entry in the log (a version-2 envelope carries its offset; a version-1 entry's offset is
// one more than the previous entry of its topic, 0 for the first). Every entry this node's log
// gains is recorded (a leader's proposals when it proposes them, replicated entries when they are
// written, and at open the entries the saved table (topic_state_file.h) does not cover yet). A
// truncation of the uncommitted tail is undone from a journal that holds, for every recorded topic
// entry above the commit index, the topic's previous next offset: the table is then exactly what
// it was before the cut entries were recorded. Committed entries are never cut, so their journal
// records are dropped as the commit index passes them.
//
// Why this gives dense offsets that agree on every node: a leader stamps offsets that continue its
// own log, so every log, the leaders' and (by Raft's log matching) the followers' copies of their
// prefixes, has each topic's offsets consecutive in log order; the committed log is such a prefix.
//
// Bounds: at most kMaxTopics topics (a leader refuses an append that would add more: reason
// TOO_MANY_TOPICS); the journal holds one record (24 bytes) per topic entry above the commit index:
// in steady state at most the leader's uncommitted window (raft::Config::max_uncommitted_entries).
// Single-threaded (the replica's thread).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace raftlog::replica {

class TopicOffsets {
 public:
  // The most topics one log may hold: the saved table (topic_state_file.h) is then at most about
  // 14 MB, and the leader refuses appends that would add another.
  static constexpr std::size_t kMaxTopics = 100000;

  // The largest next offset the table holds: one past the largest offset an envelope may carry
  // (derived::kMaxTopicOffset, 2^62), the bound TOPICSTATE's decoder accepts. record() saturates.
  static constexpr std::uint64_t kMaxNextOffset = (std::uint64_t{1} << 62) + 1;

  struct TopicNext {
    std::string topic;
    std::uint64_t next_offset = 0;
    friend bool operator==(const TopicNext&, const TopicNext&) = default;
  };

  // The highest log index the table covers.
  std::uint64_t through() const { return through_; }
  // Up to here nothing can be undone any more (committed(), or what reset() loaded).
  std::uint64_t committed_through() const { return committed_; }
  // The offset the next entry of `topic` gets (0 for a topic the log does not hold).
  std::uint64_t next_offset(std::string_view topic) const;
  bool knows(std::string_view topic) const { return next_.find(topic) != next_.end(); }
  std::size_t topic_count() const { return next_.size(); }
  std::size_t journal_size() const { return journal_.size(); }

  // Records the entry at `index`, which must be above through() (an index at or below it is
  // already covered: ignored, false). `topic` empty: an entry without a topic (only through()
  // moves). `offset`: the version-2 envelope's topic offset; nullopt for a version-1 envelope (the
  // offset is counted). False as well when the topic is new and kMaxTopics are held (not tracked).
  bool record(std::uint64_t index, std::string_view topic, std::optional<std::uint64_t> offset);
  // Undoes every recorded entry at or above `from` (a truncation of the uncommitted tail). False
  // when the journal does not reach back to `from` (a committed entry would be cut: the caller's
  // invariant is broken); the table is then left unchanged.
  bool truncate_from(std::uint64_t from);
  // Entries up to `index` are committed: never undone, their journal records dropped.
  void committed(std::uint64_t index);

  // The table as of `index` (at least the commit index last reported, at most through()): the
  // current table with every journal record above `index` undone. Sorted by topic.
  std::vector<TopicNext> table_at(std::uint64_t index) const;
  // Replaces everything by a saved table covering the log up to `through` (empty journal).
  void reset(std::uint64_t through, const std::vector<TopicNext>& table);

 private:
  using Table = std::map<std::string, std::uint64_t, std::less<>>;
  struct Undo {
    std::uint64_t index = 0;
    Table::iterator topic;
    std::uint64_t previous_next = 0;  // 0: the topic was not in the table (a present one is >= 1)
  };

  Table next_;
  std::deque<Undo> journal_;  // by index, oldest first
  std::uint64_t through_ = 0;
  std::uint64_t committed_ = 0;
};

}  // namespace raftlog::replica

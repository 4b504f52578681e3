#include "replica/topic_offsets.h"

#include <algorithm>
#include <unordered_map>

#include "derived/envelope.h"

namespace raftlog::replica {

static_assert(TopicOffsets::kMaxNextOffset == derived::kMaxTopicOffset + 1,
              "the table's bound is one past the envelope's, which TOPICSTATE accepts");

std::uint64_t TopicOffsets::next_offset(std::string_view topic) const {
  auto it = next_.find(topic);
  return it == next_.end() ? 0 : it->second;
}

bool TopicOffsets::record(std::uint64_t index, std::string_view topic,
                          std::optional<std::uint64_t> offset) {
  if (index <= through_) return false;
  through_ = index;
  if (topic.empty()) return true;
  auto it = next_.find(topic);
  std::uint64_t previous = 0;
  if (it == next_.end()) {
    if (next_.size() >= kMaxTopics) return false;
    it = next_.emplace(std::string(topic), 0).first;
  } else {
    previous = it->second;
  }
  // A version-2 entry carries its offset; a version-1 entry is the next one of its topic. Saturated
  // at kMaxNextOffset (only a forged entry gets there): the table never holds a value TOPICSTATE
  // refuses, and a leader refuses to stamp past the envelope's bound (the topic is full).
  const std::uint64_t counted = offset.has_value() ? *offset : previous;
  it->second = counted >= kMaxNextOffset ? kMaxNextOffset : counted + 1;
  if (index > committed_) journal_.push_back(Undo{index, it, previous});
  return true;
}

bool TopicOffsets::truncate_from(std::uint64_t from) {
  if (from > through_) return true;
  if (from <= committed_) return false;
  while (!journal_.empty() && journal_.back().index >= from) {
    const Undo& undo = journal_.back();
    if (undo.previous_next == 0) {
      next_.erase(
          undo.topic);  // recorded first by the entry being undone: no older record names it
    } else {
      undo.topic->second = undo.previous_next;
    }
    journal_.pop_back();
  }
  through_ = from - 1;
  return true;
}

void TopicOffsets::committed(std::uint64_t index) {
  committed_ = std::max(committed_, std::min(index, through_));
  while (!journal_.empty() && journal_.front().index <= committed_) journal_.pop_front();
}

std::vector<TopicOffsets::TopicNext> TopicOffsets::table_at(std::uint64_t index) const {
  // The value of a topic as of `index` is the previous next offset of its oldest journal record
  // above `index` (0: absent then), else its current one. The journal holds only entries above the
  // commit index, so this side table is small; the big one is walked once, in order, with no copy.
  std::unordered_map<const std::string*, std::uint64_t> undone;
  for (const Undo& undo : journal_) {
    if (undo.index > index) undone.emplace(&undo.topic->first, undo.previous_next);
  }
  std::vector<TopicNext> out;
  out.reserve(next_.size());
  for (const auto& [topic, next] : next_) {
    auto it = undone.find(&topic);
    if (it == undone.end()) {
      out.push_back(TopicNext{topic, next});
    } else if (it->second != 0) {
      out.push_back(TopicNext{topic, it->second});
    }
  }
  return out;
}

void TopicOffsets::reset(std::uint64_t through, const std::vector<TopicNext>& table) {
  journal_.clear();
  next_.clear();
  for (const TopicNext& entry : table) next_[entry.topic] = entry.next_offset;
  through_ = through;
  committed_ = through;
}

}  // namespace raftlog::replica

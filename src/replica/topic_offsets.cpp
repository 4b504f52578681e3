#include "replica/topic_offsets.h"

#include <algorithm>

namespace raftlog::replica {

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
  // A version-2 entry carries its offset; a version-1 entry is the next one of its topic.
  it->second = offset.has_value() ? *offset + 1 : previous + 1;
  if (index > committed_) journal_.push_back(Undo{index, it, previous});
  return true;
}

bool TopicOffsets::truncate_from(std::uint64_t from) {
  if (from > through_) return true;
  if (from <= committed_) return false;
  while (!journal_.empty() && journal_.back().index >= from) {
    const Undo& undo = journal_.back();
    if (undo.previous_next == 0) {
      next_.erase(undo.topic);  // recorded first by the entry being undone: no older record names it
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
  Table copy;
  for (const auto& [topic, next] : next_) copy.emplace(topic, next);
  for (auto undo = journal_.rbegin(); undo != journal_.rend() && undo->index > index; ++undo) {
    if (undo->previous_next == 0) {
      copy.erase(undo->topic->first);
    } else {
      copy[undo->topic->first] = undo->previous_next;
    }
  }
  std::vector<TopicNext> out;
  out.reserve(copy.size());
  for (auto& [topic, next] : copy) out.push_back(TopicNext{topic, next});
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

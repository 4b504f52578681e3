#include "server/entry_envelopes.h"

#include "derived/envelope.h"

namespace raftlog::server {

NodeError wrap_in_envelopes(const std::vector<EntryAttributes>& attributes,
                            std::vector<std::string>* payloads) {
  if (attributes.size() != payloads->size()) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::to_string(attributes.size()) + " attributes for " +
                          std::to_string(payloads->size()) +
                          " entries: give none, or exactly one per entry",
                      replica::kReasonBadAttributes);
  }
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    const EntryAttributes& entry = attributes[i];
    if (!entry.topic.empty()) {
      if (std::string problem = derived::topic_problem(entry.topic); !problem.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "entry " + std::to_string(i) + ": " + problem,
                          replica::kReasonBadTopic);
      }
    }
    if (std::string problem = derived::keys_problem(entry.keys); !problem.empty()) {
      return make_error(ErrorCode::kInvalidArgument, "entry " + std::to_string(i) + ": " + problem,
                        replica::kReasonBadKeys);
    }
  }
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    std::string wrapped;
    wrapped.reserve(derived::envelope_bytes(attributes[i].topic, attributes[i].keys) +
                    (*payloads)[i].size());
    derived::encode_envelope(0, attributes[i].topic, attributes[i].keys, (*payloads)[i], &wrapped);
    (*payloads)[i] = std::move(wrapped);
  }
  return NodeError{};
}

}  // namespace raftlog::server

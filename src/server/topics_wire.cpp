#include "server/topics_wire.h"

#include "derived/envelope.h"

namespace raftlog::server {

std::vector<EntryAttributes> take_attributes(raftlog::v1::AppendRequest* request) {
  std::vector<EntryAttributes> out;
  out.reserve(static_cast<std::size_t>(request->attributes_size()));
  for (raftlog::v1::EntryAttributes& wire : *request->mutable_attributes()) {
    EntryAttributes attributes;
    attributes.topic = std::move(*wire.mutable_topic());
    for (std::string& key : *wire.mutable_keys()) attributes.keys.push_back(std::move(key));
    out.push_back(std::move(attributes));
  }
  return out;
}

bool fill_envelope(const raft::Entry& entry, raftlog::v1::Entry* out) {
  if (!entry.has_envelope) return false;
  derived::DecodedEnvelope envelope;
  if (derived::decode_envelope(entry.payload.view(), &envelope) != derived::EnvelopeDecode::kOk) {
    return false;
  }
  out->set_payload(envelope.user_bytes.data(), envelope.user_bytes.size());
  out->set_has_attributes(true);
  out->set_topic(envelope.topic.data(), envelope.topic.size());
  for (std::string_view key : envelope.keys) out->add_keys(key.data(), key.size());
  out->set_timestamp_ms(envelope.timestamp_ms);
  return true;
}

void entry_to_wire(const raft::Entry& entry, raftlog::v1::Entry* out) {
  out->set_index(entry.index);
  out->set_term(entry.term);
  if (!fill_envelope(entry, out)) out->set_payload(entry.payload.view().data(), entry.payload.size());
  out->set_client_id(entry.client_id);
  out->set_sequence(entry.sequence);
  switch (entry.type) {
    case raft::EntryType::kNormal:
      out->set_type(entry.is_group_commit ? raftlog::v1::ENTRY_TYPE_GROUP_COMMIT
                                          : raftlog::v1::ENTRY_TYPE_NORMAL);
      break;
    case raft::EntryType::kNoop:
      out->set_type(raftlog::v1::ENTRY_TYPE_NOOP);
      break;
    case raft::EntryType::kConfig:
      out->set_type(raftlog::v1::ENTRY_TYPE_CONFIG);
      break;
  }
}

}  // namespace raftlog::server

#include "api_errors/status_details.h"

#include <charconv>
#include <cstdint>

#include "raftlog/v1/error_model.pb.h"

namespace raftlog::api_errors {

namespace {

using Metadata = google::protobuf::Map<std::string, std::string>;

void put(Metadata* metadata, std::string_view key, std::string value) {
  (*metadata)[std::string(key)] = std::move(value);
}

// The value of `key` when it is a whole decimal number that fits 64 bits.
std::optional<std::uint64_t> number_at(const Metadata& metadata, std::string_view key) {
  const auto found = metadata.find(std::string(key));
  if (found == metadata.end() || found->second.empty()) return std::nullopt;
  const std::string& text = found->second;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string status_details(grpc::StatusCode code, const std::string& message,
                           const ErrorDetails& details) {
  google::rpc::ErrorInfo info;
  info.set_reason(details.reason);
  info.set_domain(std::string(kErrorDomain));
  Metadata* metadata = info.mutable_metadata();
  if (details.leader_id != 0)
    put(metadata, metadata_key::kLeaderId, std::to_string(details.leader_id));
  if (!details.leader_address.empty())
    put(metadata, metadata_key::kLeaderAddress, details.leader_address);
  if (details.first_index)
    put(metadata, metadata_key::kFirstIndex, std::to_string(*details.first_index));
  if (details.commit_index)
    put(metadata, metadata_key::kCommitIndex, std::to_string(*details.commit_index));

  google::rpc::Status status;
  status.set_code(static_cast<int>(code));
  status.set_message(message);
  // PackFrom's default prefix is "type.googleapis.com/", the one standard tooling looks up.
  status.add_details()->PackFrom(info);
  return status.SerializeAsString();
}

std::optional<ErrorDetails> details_from_status_details(std::string_view serialized) {
  google::rpc::Status status;
  if (!status.ParseFromArray(serialized.data(), static_cast<int>(serialized.size())))
    return std::nullopt;
  for (const google::protobuf::Any& detail : status.details()) {
    google::rpc::ErrorInfo info;
    if (detail.type_url() != kErrorInfoTypeUrl || !detail.UnpackTo(&info)) continue;
    if (info.domain() != kErrorDomain) continue;
    ErrorDetails details;
    details.reason = info.reason();
    details.leader_id = number_at(info.metadata(), metadata_key::kLeaderId).value_or(0);
    if (const auto address = info.metadata().find(std::string(metadata_key::kLeaderAddress));
        address != info.metadata().end()) {
      details.leader_address = address->second;
    }
    details.first_index = number_at(info.metadata(), metadata_key::kFirstIndex);
    details.commit_index = number_at(info.metadata(), metadata_key::kCommitIndex);
    return details;
  }
  return std::nullopt;
}

}  // namespace raftlog::api_errors

// Node's requests: what gRPC threads (and the transport) ask of the Raft loop — appends, group
// commits, ReadIndex, leadership transfer, membership changes, trims and peer messages — validated
// here and queued as inputs (node_impl.h); the loop answers each through its callback.
#include <utility>

#include "server/entry_envelopes.h"
#include "server/node_impl.h"

namespace raftlog::server {

void Node::trim(std::uint64_t before_index, TrimCallback done) {
  if (impl_->stopping_.load()) {
    done(TrimResult{
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown), 0,
        0});
    return;
  }
  impl_->push(TrimInput{before_index, std::move(done)}, /*droppable=*/false);
}

void Node::append(std::vector<std::string> payloads, std::uint64_t client_id,
                  std::uint64_t sequence, AppendCallback done,
                  std::vector<EntryAttributes> attributes) {
  std::optional<Input> input = impl_->prepare_append(std::move(payloads), client_id, sequence,
                                                     std::move(done), std::move(attributes));
  if (input) impl_->push(std::move(*input), false);
}

void Node::append_all(std::vector<AppendCall> calls) {
  std::vector<Input> inputs;
  inputs.reserve(calls.size());
  for (AppendCall& call : calls) {
    std::optional<Input> input =
        impl_->prepare_append(std::move(call.payloads), call.client_id, call.sequence,
                              std::move(call.done), std::move(call.attributes));
    if (input) inputs.push_back(std::move(*input));
  }
  impl_->push_all(std::move(inputs));
}

std::optional<Input> Node::Impl::prepare_append(std::vector<std::string> payloads,
                                                std::uint64_t client_id, std::uint64_t sequence,
                                                AppendCallback done,
                                                std::vector<EntryAttributes> attributes) {
  const NodeConfig& config = config_;
  if (stopping_.load()) {
    done(failed_append(
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown)));
    return std::nullopt;
  }
  if (payloads.empty()) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                  "empty append: at least one entry is required",
                                  replica::kReasonEmptyAppend)));
    return std::nullopt;
  }
  if (payloads.size() > config.max_entries_per_append) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                  "too many entries: " + std::to_string(payloads.size()) + " > " +
                                      std::to_string(config.max_entries_per_append) + " per append",
                                  replica::kReasonTooManyEntries)));
    return std::nullopt;
  }
  const bool has_envelopes = !attributes.empty();
  if (has_envelopes) {
    if (NodeError bad = wrap_in_envelopes(attributes, &payloads); bad.code != ErrorCode::kOk) {
      done(failed_append(bad));
      return std::nullopt;
    }
  }
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i].size() > config.store.max_entry_size_bytes) {
      done(failed_append(
          make_error(ErrorCode::kInvalidArgument,
                     "entry " + std::to_string(i) + " is " + std::to_string(payloads[i].size()) +
                         " bytes, larger than the maximum entry size of " +
                         std::to_string(config.store.max_entry_size_bytes) + " bytes",
                     replica::kReasonEntryTooLarge)));
      return std::nullopt;
    }
    bytes += payloads[i].size();
  }
  if (bytes > config.max_append_bytes) {
    done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                  "append of " + std::to_string(bytes) +
                                      " bytes exceeds the per-append limit of " +
                                      std::to_string(config.max_append_bytes) + " bytes",
                                  replica::kReasonAppendTooLarge)));
    return std::nullopt;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(config.append_timeout_ms);
  return Input(AppendInput{std::move(payloads), client_id, sequence, std::move(done), deadline,
                           has_envelopes});
}

void Node::hold_log_from(std::uint64_t index) { impl_->replica_->hold_log_from(index); }

void Node::append_group_commit(std::string payload, AppendCallback done) {
  if (impl_->stopping_.load()) {
    done(failed_append(
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown)));
    return;
  }
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(impl_->config_.append_timeout_ms);
  AppendInput input{{std::move(payload)}, 0, 0, std::move(done), deadline, false};
  input.group_commits = true;
  impl_->push(std::move(input), false);
}

void Node::read_index(ReadIndexCallback done) {
  if (impl_->stopping_.load()) {
    done(ReadIndexResult{
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown),
        0});
    return;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(impl_->config_.append_timeout_ms);
  impl_->push(ReadIndexInput{std::move(done), deadline}, false);
}

void Node::transfer_leadership(std::uint64_t target_id, TransferCallback done) {
  if (impl_->stopping_.load()) {
    done(TransferResult{
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown), 0,
        0});
    return;
  }
  impl_->push(TransferInput{target_id, std::move(done)}, false);
}

void Node::change_membership(raft::ConfChange change, std::string address,
                             Clock::time_point deadline, MembershipCallback done) {
  if (impl_->stopping_.load()) {
    done(MembershipResult{
        make_error(ErrorCode::kUnavailable, "node shutting down", replica::kReasonShuttingDown), 0,
        0, {}});
    return;
  }
  MembershipInput input;
  input.change = std::move(change);
  input.address = std::move(address);
  input.done = std::move(done);
  input.deadline = deadline;
  impl_->push(std::move(input), /*droppable=*/false);
}

void Node::receive(raft::Message message) {
  if (impl_->stopping_.load()) return;
  impl_->push(MessageInput{std::move(message)}, true);
}

}  // namespace raftlog::server

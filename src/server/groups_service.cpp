#include "server/groups_service.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "api_errors/error_details.h"
#include "derived/group_commit.h"
#include "derived/group_table.h"
#include "server/node_error_status.h"

namespace raftlog::server {

namespace v1 = raftlog::v1;

namespace {

constexpr const char* kReasonIndexesUnavailable = "INDEXES_UNAVAILABLE";  // as the Topics service

// Counts a call in flight for its lifetime; `admitted` is false past the bound.
class PendingCall {
 public:
  PendingCall(std::atomic<int>* pending, int max) : pending_(pending) {
    admitted_ = pending_->fetch_add(1) < max;
  }
  ~PendingCall() { pending_->fetch_sub(1); }
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;
  bool admitted() const { return admitted_; }

 private:
  std::atomic<int>* pending_;
  bool admitted_ = false;
};

grpc::Status too_many_pending(grpc::ServerContext* context) {
  return reason_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                       "too many consumer group calls waiting on this node (" +
                           std::to_string(GroupsService::kMaxPendingCalls) + "); retry later",
                       replica::kReasonTooManyPending);
}

grpc::Status bad_group(grpc::ServerContext* context, const std::string& group) {
  return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, derived::group_problem(group),
                       std::string(api_errors::reason::kBadGroup));
}

// Every server-side wait ends by kApplyWaitMs or the client's own deadline, whichever comes
// first: an answer nobody waits for any more only holds a server thread.
std::chrono::steady_clock::time_point apply_deadline(const grpc::ServerContext* context) {
  const auto ours =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(GroupsService::kApplyWaitMs);
  const auto client_deadline = context->deadline();  // system_clock; max() when none
  if (client_deadline == std::chrono::system_clock::time_point::max()) return ours;
  const auto left = client_deadline - std::chrono::system_clock::now();
  return std::min(ours, std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(left));
}

// No reason word: the client that cancelled (or whose deadline passed) reads no answer.
grpc::Status cancelled() {
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "the call was cancelled or its deadline passed before the commit was "
                      "proposed; nothing was written");
}

grpc::Status unknown_offsets(grpc::ServerContext* context, const std::string& group,
                             const std::string& what) {
  return reason_status(context, grpc::StatusCode::FAILED_PRECONDITION,
                       "group " + group + ": " + what +
                           " cannot be told on this node (their commits were trimmed before its "
                           "group table applied them); commit them again",
                       std::string(api_errors::reason::kGroupOffsetsUnknown));
}

}  // namespace

GroupsService::GroupsService(Node* node, const Dispatcher* dispatcher)
    : node_(node), dispatcher_(dispatcher) {}

grpc::Status GroupsService::unavailable(grpc::ServerContext* context) const {
  if (stopping_.load() || node_->stopping()) {
    return reason_status(context, grpc::StatusCode::UNAVAILABLE, "node shutting down",
                         replica::kReasonShuttingDown);
  }
  return reason_status(context, grpc::StatusCode::UNAVAILABLE,
                       "this node has no usable derived state (see its log): consumer groups "
                       "cannot be served; ask another node",
                       kReasonIndexesUnavailable);
}

grpc::Status GroupsService::after_read_barrier(
    grpc::ServerContext* context, bool with_indexes,
    absl::FunctionRef<grpc::Status(std::uint64_t read_index)> serve) {
  if (dispatcher_ == nullptr || stopping_.load()) return unavailable(context);
  PendingCall call(&pending_, kMaxPendingCalls);
  if (!call.admitted()) return too_many_pending(context);
  std::uint64_t read_index = 0;
  if (grpc::Status barrier = read_barrier(context, &read_index, with_indexes); !barrier.ok()) {
    return barrier;
  }
  return serve(read_index);
}

grpc::Status GroupsService::read_barrier(grpc::ServerContext* context, std::uint64_t* read_index,
                                         bool with_indexes) const {
  std::promise<ReadIndexResult> promise;
  std::future<ReadIndexResult> future = promise.get_future();
  node_->read_index([&promise](ReadIndexResult result) { promise.set_value(std::move(result)); });
  const ReadIndexResult result = future.get();  // the node answers every input, by its deadline
  if (!result.error.ok()) return to_grpc(context, result.error);
  const auto deadline = apply_deadline(context);
  const bool applied =
      dispatcher_->wait_groups_applied(result.read_index, deadline) &&
      (!with_indexes || dispatcher_->wait_indexes_applied(result.read_index, deadline));
  if (!applied) {
    if (!dispatcher_->failure().empty() || stopping_.load()) return unavailable(context);
    return reason_status(context, grpc::StatusCode::UNAVAILABLE,
                         std::string(with_indexes ? "the topic indexes or " : "") +
                             "the consumer group table has not applied through the read index " +
                             std::to_string(result.read_index) + " within " +
                             std::to_string(kApplyWaitMs) + " ms; retry",
                         std::string(api_errors::reason::kGroupsBehind));
  }
  *read_index = result.read_index;
  return grpc::Status::OK;
}

grpc::Status GroupsService::check_commit(grpc::ServerContext* context,
                                         const v1::CommitOffsetRequest& request,
                                         std::uint64_t read_index) const {
  const std::uint64_t first = node_->log_bounds().first;
  bool known = false;
  std::uint64_t end = 0;
  for (const derived::TopicInfo& info : dispatcher_->indexes().list_topics(read_index, first)) {
    if (info.topic == request.topic()) {
      known = true;
      end = info.end_offset;
    }
  }
  if (!known && dispatcher_->indexes().topics_full()) {
    return not_indexed_status(context, request.topic(), dispatcher_->indexes().unqueued_entries());
  }
  if (!known) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT,
                         "topic " + request.topic() + " has no entries on the leader",
                         std::string(api_errors::reason::kUnknownTopic));
  }
  if (request.offset() > end) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT,
                         "offset " + std::to_string(request.offset()) + " is past the end offset " +
                             std::to_string(end) + " of topic " + request.topic(),
                         std::string(api_errors::reason::kOffsetBeyondEnd));
  }
  switch (dispatcher_->groups().fits(request.group(), request.topic())) {
    case derived::GroupTable::Fit::kFits:
      return grpc::Status::OK;
    case derived::GroupTable::Fit::kTooManyGroups:
      return reason_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "the cluster has " + std::to_string(derived::kMaxGroups) +
                               " consumer groups, the most it keeps",
                           std::string(api_errors::reason::kTooManyGroups));
    case derived::GroupTable::Fit::kTooManyTopics:
      return reason_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "group " + request.group() + " has offsets for " +
                               std::to_string(derived::kMaxTopicsPerGroup) +
                               " topics, the most a group keeps",
                           std::string(api_errors::reason::kTooManyGroupTopics));
  }
  return grpc::Status::OK;
}

grpc::Status GroupsService::CommitOffset(grpc::ServerContext* context,
                                         const v1::CommitOffsetRequest* request,
                                         v1::CommitOffsetResponse* response) {
  if (!derived::group_problem(request->group()).empty())
    return bad_group(context, request->group());
  if (std::string problem = derived::topic_problem(request->topic()); !problem.empty()) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, problem,
                         replica::kReasonBadTopic);
  }
  // The barrier makes the topic's end offset (and the bounds) those of every entry committed so
  // far, not those of a new leader that has not yet caught up.
  return after_read_barrier(context, /*with_indexes=*/true, [&](std::uint64_t read_index) {
    return commit_after_barrier(context, *request, read_index, response);
  });
}

grpc::Status GroupsService::commit_after_barrier(grpc::ServerContext* context,
                                                 const v1::CommitOffsetRequest& request,
                                                 std::uint64_t read_index,
                                                 v1::CommitOffsetResponse* response) {
  // The bounds are enforced here, when the leader admits the commit, never when a table applies it
  // (which must be a function of the log alone: docs/design.md, "Consumer groups").
  if (grpc::Status refused = check_commit(context, request, read_index); !refused.ok()) {
    return refused;
  }
  if (context->IsCancelled()) return cancelled();
  std::promise<AppendResult> promise;
  std::future<AppendResult> future = promise.get_future();
  node_->append_group_commit(
      derived::encode_group_commit({request.group(), request.topic(), request.offset()}),
      [&promise](AppendResult result) { promise.set_value(std::move(result)); });
  const AppendResult result = future.get();  // answered by the append timeout at the latest
  if (!result.error.ok()) return to_grpc(context, result.error);
  if (!dispatcher_->wait_groups_applied(result.first_index, apply_deadline(context))) {
    if (!dispatcher_->failure().empty() || stopping_.load()) return unavailable(context);
    return reason_status(context, grpc::StatusCode::UNAVAILABLE,
                         "the commit is in the log at index " + std::to_string(result.first_index) +
                             " but the group table has not applied it yet; retrying is harmless",
                         std::string(api_errors::reason::kGroupsBehind));
  }
  response->set_index(result.first_index);
  response->set_term(result.term);
  return grpc::Status::OK;
}

grpc::Status GroupsService::FetchOffsets(grpc::ServerContext* context,
                                         const v1::FetchOffsetsRequest* request,
                                         v1::FetchOffsetsResponse* response) {
  if (!derived::group_problem(request->group()).empty())
    return bad_group(context, request->group());
  if (request->topics_size() > static_cast<int>(derived::kMaxTopicsPerGroup)) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT,
                         std::to_string(request->topics_size()) + " topics named, more than the " +
                             std::to_string(derived::kMaxTopicsPerGroup) + " a group keeps",
                         replica::kReasonBadTopic);
  }
  for (const std::string& topic : request->topics()) {
    if (std::string problem = derived::topic_problem(topic); !problem.empty()) {
      return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, problem,
                           replica::kReasonBadTopic);
    }
  }
  return after_read_barrier(context, /*with_indexes=*/false, [&](std::uint64_t read_index) {
    return fetch_after_barrier(context, *request, read_index, response);
  });
}

grpc::Status GroupsService::fetch_after_barrier(grpc::ServerContext* context,
                                                const v1::FetchOffsetsRequest& request,
                                                std::uint64_t read_index,
                                                v1::FetchOffsetsResponse* response) const {
  const derived::GroupTable& table = dispatcher_->groups();
  std::vector<std::pair<std::string, derived::GroupOffset>> offsets;
  if (request.topics_size() == 0) {
    const derived::GroupFetch fetched = table.fetch(request.group());
    if (!fetched.unknown_topics.empty()) {
      return unknown_offsets(context, request.group(),
                             "the offsets of " + std::to_string(fetched.unknown_topics.size()) +
                                 " topic(s), first " + fetched.unknown_topics.front() + ",");
    }
    if (!table.complete()) {
      return unknown_offsets(context, request.group(),
                             "the full list of topics (this node's table is incomplete; name the "
                             "topics)");
    }
    offsets = fetched.offsets;
  } else {
    std::vector<std::string> topics(request.topics().begin(), request.topics().end());
    std::sort(topics.begin(), topics.end());
    topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
    for (const std::string& topic : topics) {
      derived::GroupOffset offset;
      switch (table.lookup(request.group(), topic, &offset)) {
        case derived::GroupLookup::kKnown:
          offsets.emplace_back(topic, offset);
          break;
        case derived::GroupLookup::kNone:
          break;
        case derived::GroupLookup::kUnknown:
          return unknown_offsets(context, request.group(), "the offset of topic " + topic);
      }
    }
  }
  for (const auto& [topic, offset] : offsets) {
    v1::GroupTopicOffset* out = response->add_offsets();
    out->set_topic(topic);
    out->set_offset(offset.offset);
    out->set_commit_index(offset.index);
  }
  response->set_read_index(read_index);
  return grpc::Status::OK;
}

grpc::Status GroupsService::ListGroups(grpc::ServerContext* context, const v1::ListGroupsRequest*,
                                       v1::ListGroupsResponse* response) {
  return after_read_barrier(context, /*with_indexes=*/false, [&](std::uint64_t read_index) {
    for (const derived::GroupInfo& info : dispatcher_->groups().list()) {
      v1::GroupSummary* out = response->add_groups();
      out->set_group(info.group);
      out->set_topics(static_cast<std::uint32_t>(info.topics));
      out->set_unknown_topics(static_cast<std::uint32_t>(info.unknown_topics));
    }
    response->set_complete(dispatcher_->groups().complete());
    response->set_read_index(read_index);
    return grpc::Status::OK;
  });
}

}  // namespace raftlog::server

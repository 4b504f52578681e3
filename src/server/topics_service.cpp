#include "server/topics_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "derived/envelope.h"
#include "server/node_error_status.h"
#include "server/topics_wire.h"

namespace raftlog::server {

namespace v1 = raftlog::v1;

namespace {
// docs/errors.md: UNAVAILABLE because this node's derived indexes cannot answer (none usable, or
// the dispatcher stopped on a storage error); another node can. Not STORAGE_ERROR, which errors.md
// maps to INTERNAL. Kept here (not in replica/results.h) since only the Topics service returns it.
constexpr const char* kReasonIndexesUnavailable = "INDEXES_UNAVAILABLE";
}  // namespace

TopicsService::TopicsService(Node* node, const Dispatcher* dispatcher, std::uint64_t max_read_bytes,
                             std::chrono::milliseconds stall_timeout)
    : node_(node),
      dispatcher_(dispatcher),
      max_read_bytes_(max_read_bytes),
      tail_watchdog_("TailTopic stream", stall_timeout) {}

bool TopicsService::serves_nothing() const {
  return dispatcher_ == nullptr || stopping_.load() || node_->removed();
}

grpc::Status TopicsService::unavailable(grpc::ServerContext* context) const {
  if (stopping_.load() || node_->stopping()) {
    return reason_status(context, grpc::StatusCode::UNAVAILABLE, "node shutting down",
                         replica::kReasonShuttingDown);
  }
  if (const NodeError removed = node_->removed_refusal(); !removed.ok()) {
    return to_grpc(context, removed);  // UNAVAILABLE, NODE_REMOVED
  }
  return reason_status(context, grpc::StatusCode::UNAVAILABLE,
                       "this node has no usable derived indexes (see its log); ask another node",
                       kReasonIndexesUnavailable);
}

grpc::Status TopicsService::ListTopics(grpc::ServerContext* context, const v1::ListTopicsRequest*,
                                       v1::ListTopicsResponse* response) {
  if (serves_nothing()) return unavailable(context);
  const std::uint64_t commit = node_->commit_index();
  const std::uint64_t first = node_->log_bounds().first;
  for (const derived::TopicInfo& topic : dispatcher_->indexes().list_topics(commit, first)) {
    v1::TopicInfo* out = response->add_topics();
    out->set_topic(topic.topic);
    out->set_first_offset(topic.first_offset);
    out->set_end_offset(topic.end_offset);
  }
  response->set_commit_index(commit);
  response->set_indexed_through(std::min(indexed_through(), commit));
  return grpc::Status::OK;
}

grpc::Status TopicsService::read_topic(grpc::ServerContext* context, const std::string& topic,
                                       std::uint64_t from_offset, std::uint32_t max_entries,
                                       v1::ReadTopicResponse* response) const {
  if (std::string problem = derived::topic_problem(topic); !problem.empty()) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, problem,
                         replica::kReasonBadTopic);
  }
  const std::size_t max = max_entries == 0 ? kDefaultEntries : std::min(max_entries, kMaxEntries);
  const std::uint64_t commit = node_->commit_index();
  const std::uint64_t first = node_->log_bounds().first;
  const derived::TopicRead read =
      dispatcher_->indexes().read_topic(topic, from_offset, max, commit, first);
  response->set_commit_index(commit);
  response->set_indexed_through(std::min(indexed_through(), commit));
  response->set_first_offset(read.first_offset);
  response->set_end_offset(std::max(read.first_offset, from_offset));
  if (read.status == derived::TopicReadStatus::kUnknownTopic) {
    // An empty answer would claim the topic has no entries, which may be false (outside test).
    const derived::DerivedIndexes& indexes = dispatcher_->indexes();
    if (indexes.topics_full()) {
      return not_indexed_status(context, topic, indexes.unqueued_entries());
    }
    response->set_first_offset(0);
    response->set_end_offset(from_offset);
    return grpc::Status::OK;
  }
  if (read.status == derived::TopicReadStatus::kTrimmed) {
    return reason_status(context, grpc::StatusCode::OUT_OF_RANGE,
                         "offset " + std::to_string(from_offset) + " of topic " + topic +
                             " is below its first retained offset " +
                             std::to_string(read.first_offset) + " (trimmed by retention)",
                         replica::kReasonTopicOffsetTrimmed);
  }
  std::uint64_t bytes = 0;
  for (const derived::QueueRecord& record : read.records) {
    std::vector<raft::Entry> entries;
    const NodeError error = node_->read_committed(record.index, 1, max_read_bytes_, &entries);
    if (!error.ok()) {
      if (response->entries_size() > 0) break;  // answer what was read; the next read retries
      if (error.reason == replica::kReasonIndexTrimmed) {
        return reason_status(context, grpc::StatusCode::OUT_OF_RANGE,
                             "offset " + std::to_string(record.offset) + " of topic " + topic +
                                 " was trimmed by retention",
                             replica::kReasonTopicOffsetTrimmed);
      }
      return to_grpc(context, error);
    }
    if (entries.empty() || entries[0].index != record.index) break;
    if (response->entries_size() > 0 && bytes + entries[0].payload.size() > max_read_bytes_) break;
    bytes += entries[0].payload.size();
    v1::TopicEntry* out = response->add_entries();
    out->set_offset(record.offset);
    entry_to_wire(entries[0], out->mutable_entry());
    response->set_end_offset(record.offset + 1);
  }
  return grpc::Status::OK;
}

grpc::Status TopicsService::ReadTopic(grpc::ServerContext* context,
                                      const v1::ReadTopicRequest* request,
                                      v1::ReadTopicResponse* response) {
  if (serves_nothing()) return unavailable(context);
  return read_topic(context, request->topic(), request->from_offset(), request->max_entries(),
                    response);
}

grpc::Status TopicsService::TailTopic(grpc::ServerContext* context,
                                      const v1::ReadTopicRequest* request,
                                      grpc::ServerWriter<v1::ReadTopicResponse>* writer) {
  if (serves_nothing()) return unavailable(context);
  if (tails_.fetch_add(1) >= kMaxTopicTails) {
    tails_.fetch_sub(1);
    return reason_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                         "too many topic tails open on this node (" +
                             std::to_string(kMaxTopicTails) + "); retry later or on another node",
                         replica::kReasonTooManyPending);
  }
  struct Release {
    std::atomic<int>* tails;
    ~Release() { tails->fetch_sub(1); }
  } release{&tails_};
  std::uint64_t next = request->from_offset();
  while (!context->IsCancelled()) {
    if (stopping_.load() || node_->stopping() || node_->removed()) return unavailable(context);
    // A stopped dispatcher indexes nothing more: the tail would wait forever. The client resumes
    // on another node from `next`.
    if (std::string failure = dispatcher_->failure(); !failure.empty()) {
      return reason_status(context, grpc::StatusCode::UNAVAILABLE,
                           "this node's derived indexes stopped (" + failure +
                               "); resume on another node from offset " + std::to_string(next),
                           kReasonIndexesUnavailable);
    }
    v1::ReadTopicResponse response;
    const std::uint64_t seen_commit = node_->commit_index();
    if (grpc::Status status =
            read_topic(context, request->topic(), next, request->max_entries(), &response);
        !status.ok()) {
      return status;
    }
    if (response.entries_size() > 0) {
      next = response.end_offset();
      // A reader that takes nothing blocks this Write for as long as its connection stays up; the
      // watchdog then cancels the call, which makes the Write return false.
      WriteStallWatchdog::Guard watched = tail_watchdog_.arm(context);
      const bool written = writer->Write(response);
      if (std::optional<grpc::Status> stalled = watched.disarm()) return *stalled;
      if (!written) return grpc::Status::OK;  // the client went away: nobody reads the status
      continue;
    }
    // Nothing new: while the indexes lag the commit index, poll them every 10 ms; else wait for
    // the commit index to move (at most 200 ms, then cancellation and shutdown are checked).
    if (indexed_through() < seen_commit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      node_->wait_for_commit(seen_commit,
                             std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    }
  }
  return grpc::Status::OK;
}

grpc::Status TopicsService::LookupKey(grpc::ServerContext* context,
                                      const v1::LookupKeyRequest* request,
                                      v1::LookupKeyResponse* response) {
  if (serves_nothing()) return unavailable(context);
  if (std::string problem = derived::keys_problem({request->key()}); !problem.empty()) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, problem,
                         replica::kReasonBadKeys);
  }
  const std::size_t max = request->max_entries() == 0
                              ? kMaxEntries
                              : std::min<std::size_t>(request->max_entries(), kMaxEntries);
  const std::uint64_t commit = node_->commit_index();
  const std::uint64_t first = node_->log_bounds().first;
  response->set_commit_index(commit);
  response->set_indexed_through(std::min(indexed_through(), commit));
  // Candidates by hash; each is read and its keys compared, so a hash collision never answers.
  std::uint64_t bytes = 0;
  for (std::uint64_t index : dispatcher_->indexes().lookup_key(request->key(), max, commit, first)) {
    std::vector<raft::Entry> entries;
    const NodeError error = node_->read_committed(index, 1, max_read_bytes_, &entries);
    if (!error.ok()) {
      if (error.reason == replica::kReasonIndexTrimmed) continue;
      return to_grpc(context, error);
    }
    if (entries.empty()) continue;
    v1::Entry entry;
    entry_to_wire(entries[0], &entry);
    if (std::find(entry.keys().begin(), entry.keys().end(), request->key()) == entry.keys().end())
      continue;
    if (response->entries_size() > 0 && bytes + entry.payload().size() > max_read_bytes_) break;
    bytes += entry.payload().size();
    *response->add_entries() = std::move(entry);
  }
  return grpc::Status::OK;
}

grpc::Status TopicsService::FindByTime(grpc::ServerContext* context,
                                       const v1::FindByTimeRequest* request,
                                       v1::FindByTimeResponse* response) {
  if (serves_nothing()) return unavailable(context);
  const std::uint64_t commit = node_->commit_index();
  const std::uint64_t first = node_->log_bounds().first;
  response->set_indexed_through(std::min(indexed_through(), commit));
  const derived::DerivedIndexes& indexes = dispatcher_->indexes();
  if (request->topic().empty()) {
    // The indexes alone answer (the running max as of the log's start included): the log is not
    // read, so no damage to it or trim under way can fail a lookup (review of dispatch3, L3).
    const std::uint64_t index = indexes.find_by_time(request->timestamp_ms(), commit, first);
    response->set_found(index != 0);
    response->set_index(index);
    return grpc::Status::OK;
  }
  if (std::string problem = derived::topic_problem(request->topic()); !problem.empty()) {
    return reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, problem,
                         replica::kReasonBadTopic);
  }
  const std::optional<std::uint64_t> offset = indexes.find_topic_offset_by_time(
      request->topic(), request->timestamp_ms(), commit, first);
  if (!offset) return grpc::Status::OK;
  response->set_offset(*offset);
  const derived::TopicRead at = indexes.read_topic(request->topic(), *offset, 1, commit, first);
  if (!at.records.empty()) {
    response->set_found(true);
    response->set_index(at.records[0].index);
  }
  return grpc::Status::OK;
}

}  // namespace raftlog::server

#include "client/tail.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "api_errors/error_details.h"
#include "client/wire.h"
#include "raftlog/v1/client.grpc.pb.h"

namespace raftlog::client::internal {

namespace {

// Sleeps `duration` unless `stop` is requested first. Returns false when stopped.
bool sleep_unless_stopped(Clock::duration duration, const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any wakeup;
  std::unique_lock lock(mutex);
  return !wakeup.wait_for(lock, stop, duration, [] { return false; }) && !stop.stop_requested();
}

// Whether a stream that ended with `ended` is worth reopening on another node. A refused range or
// request is not: another node would refuse it too.
bool worth_reconnecting(const Status& ended) {
  switch (ended.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kResourceExhausted:
      return true;
    case StatusCode::kFailedPrecondition:
      return is_leader_error(ended);
    default:
      return false;
  }
}

// Waits until the node accepted the stream or ended it: true when its initial metadata carries
// the accepted key (docs/client-protocol.md, section 6). A node that sends neither within
// `timeout` (unreachable, wedged, or a node from before the signal on a quiet log) is given up:
// the call is cancelled and *timed_out set. A node from before the signal that has entries to
// send still works: its headers come with the first message, and the entries count.
bool wait_until_accepted(grpc::ClientContext& context, grpc::ClientReader<pb::TailResponse>& reader,
                         Milliseconds timeout, bool* timed_out) {
  std::mutex mutex;
  std::condition_variable wakeup;
  bool headers = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!wakeup.wait_for(lock, timeout, [&] { return headers; })) {
      *timed_out = true;
      context.TryCancel();
    }
  });
  reader.WaitForInitialMetadata();
  {
    std::lock_guard lock(mutex);
    headers = true;
  }
  wakeup.notify_all();
  watchdog.join();
  if (*timed_out) return false;
  const auto& metadata = context.GetServerInitialMetadata();
  return metadata.find(std::string(api_errors::kTailAcceptedMetadataKey)) != metadata.end();
}

// One tail call: the state that carries over from one stream to the next.
class TailFollower {
 public:
  TailFollower(const TailOptions& options, const TailCallback& on_entry,
               const TailResources& resources)
      : options_(options),
        on_entry_(on_entry),
        resources_(resources),
        bounded_(options.duration_ms > 0),
        end_at_(Clock::now() + Milliseconds(options.duration_ms)),
        next_(options.from_index),
        target_(resources.endpoints.preferred()),
        stall_since_(Clock::now()),
        backoff_ms_(resources.retry.first_backoff_ms()) {}

  Result<std::uint64_t> run();

 private:
  // How one stream ended.
  struct StreamEnd {
    std::optional<Status> verdict;  // set when the tail must end for a reason found while reading
    bool progressed = false;        // delivered at least one entry
    bool established = false;       // accepted by the node (its headers), or delivered an entry
    Status ended;                   // why the stream ended (when no verdict)
  };

  bool finished() const {
    return options_.stop.stop_requested() || (bounded_ && Clock::now() >= end_at_);
  }
  StreamEnd follow_one_stream();

  const TailOptions& options_;
  const TailCallback& on_entry_;
  const TailResources& resources_;
  const bool bounded_;
  const Clock::time_point end_at_;
  std::uint64_t next_;  // the next index to deliver
  std::string target_;
  // When the tail last had a working stream: a stream's start, its last entry, or the end of an
  // established stream. The give-up deadline counts from here, so a stream idle on a quiet log for
  // longer than the deadline still resumes elsewhere when its node fails (docs/client-protocol.md, 6).
  Clock::time_point stall_since_;
  std::uint32_t backoff_ms_;
};

Result<std::uint64_t> TailFollower::run() {
  // Ends when stopped, when the duration elapses, on a terminal error, or when the tail has had no
  // working stream for retry_deadline_ms (stall_since_); an unbounded tail of a healthy cluster
  // runs until stopped.
  while (!finished()) {
    StreamEnd stream = follow_one_stream();
    if (stream.verdict) {
      if (stream.verdict->ok()) return next_;
      return *stream.verdict;
    }
    if (stream.established) stall_since_ = Clock::now();
    if (stream.progressed) {
      backoff_ms_ = resources_.retry.first_backoff_ms();
      resources_.endpoints.set_preferred(target_);
    }
    if (finished()) break;
    if (!worth_reconnecting(stream.ended)) return stream.ended;
    const auto stalled = Clock::now() - stall_since_;
    if (stalled > Milliseconds(resources_.retry_deadline_ms)) {
      return Status(StatusCode::kUnavailable,
                    "tail: no node served index " + std::to_string(next_) + " for " +
                        std::to_string(std::chrono::duration_cast<Milliseconds>(stalled).count()) +
                        " ms; last error: " + stream.ended.to_string(),
                    stream.ended.details());
    }
    target_ = resources_.endpoints.next_after(target_);
    Clock::duration pause = resources_.retry.jittered(backoff_ms_);
    if (bounded_)
      pause = std::min(pause, std::max(Clock::duration::zero(), end_at_ - Clock::now()));
    if (!sleep_unless_stopped(pause, options_.stop)) break;
    backoff_ms_ = resources_.retry.next_backoff_ms(backoff_ms_);
  }
  return next_;
}

TailFollower::StreamEnd TailFollower::follow_one_stream() {
  grpc::ClientContext context;
  if (bounded_) context.set_deadline(to_system(end_at_));
  const std::stop_callback cancel_on_stop(options_.stop, [&context] { context.TryCancel(); });
  pb::TailRequest request;
  request.set_from_index(next_);
  request.set_max_bytes_per_message(options_.max_bytes_per_message);
  auto stub = pb::Log::NewStub(resources_.channels.get(target_));
  std::unique_ptr<grpc::ClientReader<pb::TailResponse>> reader = stub->Tail(&context, request);

  StreamEnd end;
  bool not_accepted_in_time = false;
  end.established = wait_until_accepted(context, *reader, Milliseconds(resources_.call_timeout_ms),
                                        &not_accepted_in_time);
  pb::TailResponse response;
  while (!end.verdict && !not_accepted_in_time && reader->Read(&response)) {
    for (const pb::Entry& wire : response.entries()) {
      if (wire.index() < next_) continue;  // delivered before the reconnect: skip the overlap
      if (wire.index() > next_) {
        end.verdict = Status(StatusCode::kDataLoss, target_ + ": tail jumped from index " +
                                                        std::to_string(next_) + " to " +
                                                        std::to_string(wire.index()));
        break;
      }
      ++next_;
      end.progressed = true;
      if (!on_entry_(entry_from_wire(wire))) {
        end.verdict = Status();
        break;
      }
    }
  }
  if (end.verdict) context.TryCancel();
  const grpc::Status finish = reader->Finish();
  end.established = end.established || end.progressed;
  if (!end.verdict && not_accepted_in_time && !options_.stop.stop_requested()) {
    end.ended = Status(StatusCode::kUnavailable,
                       target_ + ": the node did not accept the tail stream within " +
                           std::to_string(resources_.call_timeout_ms) + " ms");
  } else if (!end.verdict) {
    end.ended = finish.ok() ? Status(StatusCode::kUnavailable,
                                     target_ + ": the server ended the tail stream")
                            : from_grpc(finish, context, target_);
  }
  return end;
}

}  // namespace

Result<std::uint64_t> follow_log(const TailOptions& options, const TailCallback& on_entry,
                                 const TailResources& resources) {
  if (options.from_index == 0)
    return Status(StatusCode::kInvalidArgument, "tail from index 0: indexes start at 1");
  if (!on_entry) return Status(StatusCode::kInvalidArgument, "tail needs a callback");
  return TailFollower(options, on_entry, resources).run();
}

}  // namespace raftlog::client::internal

// Internal to the client library: one AppendStream call per process and endpoint, shared by every
// Client that appends there (Options::share_append_stream).
//
// Why: with a stream per Client, each append is one message each way, and each costs a wake-up of a
// gRPC thread on both sides; at 64 Clients that was most of the CPU per append on the client and
// the leader (docs/benchmarks.md, "Cheaper appends"). Sharing the stream lets one message carry the
// appends of every Client that is waiting at the same moment.
//
// How: an append is queued; whichever caller finds no exchange in progress becomes the writer. It
// takes the queued appends (its own among them; bounded: kMaxAppendsPerMessage or the node's
// announced bound, kMaxBytesPerMessage payload bytes unless one append alone is larger), sends them
// in one message, reads until every one of them is answered, hands each caller its own outcome and
// wakes the first caller still queued to be the next writer. Nothing else changes for a Client: it
// keeps its own client id, sequence, retries, redirects and deadlines (a Client has one append in
// flight, so the node still sees its sequences in order). Each append is answered on its own: a
// refusal of one (NOT_LEADER, too large, ...) does not touch the others. A broken stream (node gone,
// a deadline passed, a protocol error) fails every append of the exchange that is not answered yet,
// with the call's status, exactly as a per-Client stream would; each Client retries with the same
// sequence, and the next exchange opens a new call. An append whose deadline passed while queued is
// answered DEADLINE_EXCEEDED without being sent, so it cannot cut the stream of the others.
//
// One exchange is in flight at a time: appends arriving meanwhile wait and leave together in the
// next message. Threads: one watchdog thread per shared stream (deadlines, idle close).
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "client/append_stream_call.h"

namespace raftlog::client::internal {

class SharedAppendStream {
 public:
  SharedAppendStream(std::shared_ptr<grpc::Channel> channel, std::string endpoint,
                     Clock::duration idle_close);
  ~SharedAppendStream();
  SharedAppendStream(const SharedAppendStream&) = delete;
  SharedAppendStream& operator=(const SharedAppendStream&) = delete;

  const std::string& endpoint() const { return endpoint_; }

  // As AppendStreamCall::append (its request_id is set here), with the appends of other callers
  // that are queued at the same moment. Thread-safe; the caller blocks until its own answer.
  StreamAppendOutcome append(pb::AppendStreamRequest* request, Clock::time_point deadline,
                             pb::AppendResponse* response);

  // Exchanges completed so far (for tests: appends of several Clients shared a message when this
  // is below the number of appends).
  std::uint64_t exchanges() const;

 private:
  struct Waiter {
    pb::AppendStreamRequest* request;
    Clock::time_point deadline;
    pb::AppendResponse* response;
    std::size_t bytes;  // payload bytes
    StreamAppendOutcome outcome;
    bool taken = false;  // a writer took it off the queue
    bool done = false;   // outcome is set
    std::condition_variable wake;
  };

  // The writer's part: takes a batch off queue_ (with mu_ held), exchanges it without mu_.
  std::deque<Waiter*> take_batch();
  void exchange(std::deque<Waiter*>& batch);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::string endpoint_;

  mutable std::mutex mu_;
  // Appends waiting for a writer; at most one per thread appending (each waits for its own).
  std::deque<Waiter*> queue_;
  bool writing_ = false;          // guarded by mu_: an exchange is in progress
  std::uint64_t exchanges_ = 0;   // guarded by mu_

  // Touched only by the writer (writing_ set), and by the destructor.
  CallWatchdog watchdog_;  // before call_: outlives it
  std::unique_ptr<AppendStreamCall> call_;
};

// The process's shared stream for `key` (endpoint plus every option that shapes its channel),
// created with `channel` when no Client holds one. The registry keeps weak references only: a
// stream lives as long as a Client holds it. Thread-safe.
std::shared_ptr<SharedAppendStream> shared_append_stream(
    const std::string& key, const std::string& endpoint,
    const std::shared_ptr<grpc::Channel>& channel, Clock::duration idle_close);

}  // namespace raftlog::client::internal

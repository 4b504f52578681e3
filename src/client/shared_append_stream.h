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
//
// Wake-ups: each waiting caller sleeps on a futex of its own (Waiter::wakes), and the writer wakes
// the callers of its batch after releasing mu_; a caller woken with its outcome returns without
// taking mu_. (With a condition variable notified under mu_, each woken caller first blocked on
// mu_ held by the writer: two sleeps and wake-ups per append instead of one, most of the client's
// CPU per append at 64 Clients, docs/benchmarks.md.) A Waiter is shared between its caller and the
// writer, so a wake-up that comes after its caller returned touches nothing freed.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
    pb::AppendStreamRequest* request = nullptr;
    Clock::time_point deadline;
    pb::AppendResponse* response = nullptr;
    std::size_t bytes = 0;  // payload bytes
    StreamAppendOutcome outcome;  // written by the writer before done is set
    bool taken = false;           // guarded by mu_: a writer took it off the queue
    std::atomic<bool> done{false};  // set (release) once outcome is final; also under mu_
    std::atomic<std::uint32_t> wakes{0};  // bumped for every wake-up; the caller waits on it
  };
  using WaiterPtr = std::shared_ptr<Waiter>;

  // The writer's part: takes a batch off queue_ (with mu_ held; appends whose deadline passed are
  // answered and added to `to_wake`), exchanges it without mu_.
  std::deque<WaiterPtr> take_batch(std::vector<WaiterPtr>* to_wake);
  void exchange(std::deque<WaiterPtr>& batch);
  static void wake(Waiter& waiter);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::string endpoint_;

  mutable std::mutex mu_;
  // Appends waiting for a writer; at most one per thread appending (each waits for its own).
  std::deque<WaiterPtr> queue_;
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

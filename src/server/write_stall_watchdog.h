// WriteStallWatchdog: the stall bound (stream_limits.h, end_stalled_stream) for streams served by
// gRPC's *synchronous* API, such as TailTopic. A synchronous ServerWriter::Write blocks its thread
// until the message is taken; a reader that takes nothing leaves it blocked for as long as its
// connection stays up (HTTP/2 flow control), holding the thread and the stream's slot. The
// callback-API streams (Tail, AppendStream) bound this themselves; a synchronous writer cannot wait
// with a timeout, so this watchdog's own thread ends the stalled call instead: a write armed for
// longer than `timeout` has its call cancelled with RESOURCE_EXHAUSTED, which completes the write
// with false and frees the thread.
//
// One thread per watchdog, looking every timeout / 4 (10 ms .. 1 s), so a stalled write ends between
// timeout and 1.25 x timeout (plus scheduling). Bounded: one armed write per stream, and the owner
// bounds its streams (TailTopic: TopicsService::kMaxTopicTails).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace raftlog::server {

class WriteStallWatchdog {
 public:
  // `stream` names the stream kind in the status message ("TailTopic stream").
  WriteStallWatchdog(std::string stream, std::chrono::milliseconds timeout);
  ~WriteStallWatchdog();  // stops and joins the thread
  WriteStallWatchdog(const WriteStallWatchdog&) = delete;
  WriteStallWatchdog& operator=(const WriteStallWatchdog&) = delete;

  // One write under watch, from arm() until it is destroyed (after the write returned). `context`
  // must outlive the guard: the watchdog may cancel the call until the guard is gone.
  class Guard {
   public:
    Guard(WriteStallWatchdog* owner, std::uint64_t id) : owner_(owner), id_(id) {}
    ~Guard() { (void)disarm(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    // Stops watching; the status the call was ended with when the watchdog ended it, else nullopt.
    std::optional<grpc::Status> disarm();

   private:
    WriteStallWatchdog* owner_;
    std::uint64_t id_;
    bool disarmed_ = false;
  };

  // Call right before a blocking Write on `context`'s call.
  Guard arm(grpc::ServerContextBase* context);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Armed {
    grpc::ServerContextBase* context;
    std::chrono::steady_clock::time_point deadline;
    std::optional<grpc::Status> ended;  // set when the watchdog cancelled the call
  };
  void run();
  std::optional<grpc::Status> disarm(std::uint64_t id);

  const std::string stream_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                 // guarded by mu_
  std::uint64_t next_id_ = 1;             // guarded by mu_
  std::map<std::uint64_t, Armed> armed_;  // guarded by mu_; one entry per write in flight
  std::thread thread_;                    // last: runs over the members above
};

}  // namespace raftlog::server

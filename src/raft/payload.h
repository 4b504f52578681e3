// Payload: an entry's bytes, shared rather than copied.
//
// Why: a multi-MiB entry is held at once by the core's unstable log, the Ready batch handed to the
// driver, and every append message to a follower. With a plain std::string each of those was a copy
// on the Raft loop thread (and each copy page-faulted fresh memory in), which under load delayed the
// loop's ticks and heartbeats for long enough to cost leadership (docs/benchmarks.md, "Large entries
// and leadership"). A Payload is immutable once made, so copies share one buffer and are safe to read
// from any thread; making one from a std::string&& moves the bytes in.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace raftlog::raft {

class Payload {
 public:
  Payload() = default;
  Payload(std::string bytes)  // NOLINT(google-explicit-constructor): a payload is its bytes
      : bytes_(bytes.empty() ? nullptr : std::make_shared<const std::string>(std::move(bytes))) {}
  Payload(const char* bytes)
      : Payload(std::string(bytes)) {}  // NOLINT(google-explicit-constructor)

  const std::string& str() const { return bytes_ ? *bytes_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  std::string_view view() const { return str(); }
  std::size_t size() const { return str().size(); }
  bool empty() const { return str().empty(); }
  const char* data() const { return str().data(); }
  // The same buffer (not merely equal bytes): what sharing buys, for tests.
  bool shares_bytes_with(const Payload& other) const {
    return bytes_ != nullptr && bytes_ == other.bytes_;
  }

  friend bool operator==(const Payload& a, const Payload& b) {
    return a.bytes_ == b.bytes_ || a.str() == b.str();
  }
  friend bool operator==(const Payload& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const Payload& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const Payload& a, const char* b) {
    return a.view() == std::string_view(b);
  }

 private:
  static const std::string& empty_string() {
    static const std::string kEmpty;
    return kEmpty;
  }
  std::shared_ptr<const std::string> bytes_;  // null for an empty payload
};

}  // namespace raftlog::raft

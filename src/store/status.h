// Error reporting for the store: a small Status / Result<T> pair. The store never throws across its
// API; every fallible call returns one of these, and the message names the file and offset involved
// whenever there is one (operators read these messages, so they must be specific).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "util/check.h"

namespace raftlog::store {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // caller error: empty batch, non-contiguous index, oversized entry, bad option
  kOutOfRange,  // index outside [first_index - 1, last_index] (or the requested range is empty)
  kCorruption,  // a checksum, magic or continuity check failed on data that must be intact
  kNoSpace,     // ENOSPC or a failed preallocation/mapping: nothing was written, retry later
  kIo,          // any other operating-system I/O failure
  kClosed,      // the log was closed (or failed and refuses further writes)
  kFailedPrecondition,  // e.g. truncating below the commit index without `force`
  kTruncated,  // a sync append's entries were removed by truncate_suffix() before it returned
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  static Status invalid_argument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status no_space(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
  static Status io(std::string m) { return {StatusCode::kIo, std::move(m)}; }
  static Status closed(std::string m) { return {StatusCode::kClosed, std::move(m)}; }
  static Status failed_precondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  // Maps an errno value from a failed system call to a Status (ENOSPC/EDQUOT -> kNoSpace, else kIo).
  static Status from_errno(int error_number, const std::string& what);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", or "OK".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    RAFTLOG_CHECK(!status_.ok(), "Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    RAFTLOG_CHECK(ok(), "value() of a Result that holds an error");
    return *value_;
  }
  const T& value() const& {
    RAFTLOG_CHECK(ok(), "value() of a Result that holds an error");
    return *value_;
  }
  T&& value() && {
    RAFTLOG_CHECK(ok(), "value() of a Result that holds an error");
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace raftlog::store

// Propagates a non-OK Status from an expression returning Status.
#define RAFTLOG_RETURN_IF_ERROR(expr)      \
  do {                                     \
    ::raftlog::store::Status _st = (expr); \
    if (!_st.ok()) return _st;             \
  } while (0)

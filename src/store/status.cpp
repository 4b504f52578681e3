#include "store/status.h"

#include <cerrno>
#include <cstring>

namespace raftlog::store {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kCorruption:
      return "CORRUPTION";
    case StatusCode::kNoSpace:
      return "NO_SPACE";
    case StatusCode::kIo:
      return "IO_ERROR";
    case StatusCode::kClosed:
      return "CLOSED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kTruncated:
      return "TRUNCATED";
  }
  return "UNKNOWN";
}

Status Status::from_errno(int error_number, const std::string& what) {
  std::string message = what + ": " + std::strerror(error_number);
  if (error_number == ENOSPC || error_number == EDQUOT) return no_space(std::move(message));
  return io(std::move(message));
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(raftlog::store::to_string(code_)) + ": " + message_;
}

}  // namespace raftlog::store

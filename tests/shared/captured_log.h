// The log lines the default spdlog logger writes while a CapturedLog lives, for tests that assert
// what a node says (a warning at open, a reason for stepping down). With a level, the logger is
// set to it for the scope (TestCluster turns the log off) and put back after.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

namespace raftlog::testing {

class CapturedLog {
 public:
  explicit CapturedLog(std::optional<spdlog::level::level_enum> level = std::nullopt)
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(lines_)),
        level_before_(spdlog::default_logger()->level()) {
    spdlog::default_logger()->sinks().push_back(sink_);
    if (level) spdlog::set_level(*level);
  }
  ~CapturedLog() {
    spdlog::set_level(level_before_);
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const { return lines_.str(); }

 private:
  std::ostringstream lines_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum level_before_;
};

}  // namespace raftlog::testing

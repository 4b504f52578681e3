// The version and git revision this binary was built from: `--version` on every tool, the
// `version`/`revision` fields of Status and the raftlog_build_info metric.
//
// The version is the CMake project version (CMakeLists.txt); the revision is computed on every build
// by cmake/build_info.cmake (a 12-digit commit, "-dirty" when the checkout had changes, "unknown"
// without git; -DRAFTLOG_GIT_REVISION=... overrides it). Both contain only [A-Za-z0-9._+-].
#pragma once

#include <string>
#include <string_view>

namespace raftlog::util {

std::string_view build_version();
std::string_view build_revision();

// "raftlogd 0.1.0 (revision 0123456789ab)": what `PROGRAM --version` prints.
std::string version_line(std::string_view program);

}  // namespace raftlog::util

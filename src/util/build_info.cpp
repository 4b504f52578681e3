#include "util/build_info.h"

namespace raftlog::util {

std::string version_line(std::string_view program) {
  std::string line(program);
  line += ' ';
  line += build_version();
  line += " (revision ";
  line += build_revision();
  line += ')';
  return line;
}

}  // namespace raftlog::util

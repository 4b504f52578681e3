// Helpers shared by the node's small checksummed text records (IDENTITY: node_identity.cpp; JOIN:
// join.cpp): each is a few "key value\n" lines ending in "crc32c <8 lowercase hex digits>\n" over the
// lines before it.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "util/crc32c.h"

namespace raftlog::server::text_record {

// The 8 lowercase hex digits of the CRC32C of `covered`, as the records' last line holds them.
inline std::string crc_hex(std::string_view covered) {
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(util::crc32c::value(covered)));
  return hex;
}

// The next line of `*rest` without its "\n"; false when there is no complete line.
inline bool take_line(std::string_view* rest, std::string_view* line) {
  const std::size_t newline = rest->find('\n');
  if (newline == std::string_view::npos) return false;
  *line = rest->substr(0, newline);
  rest->remove_prefix(newline + 1);
  return true;
}

}  // namespace raftlog::server::text_record

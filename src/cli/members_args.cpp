#include "cli/members_args.h"

#include "cli/flags.h"
#include "util/host_port.h"

namespace raftlog::cli {

namespace {

constexpr std::size_t kMaxAddressBytes = 128;  // raft::kMaxMemberAddressBytes

bool is_help(std::string_view arg) { return arg == "-h" || arg == "--help"; }

}  // namespace

std::string parse_members_args(std::span<const std::string> args,
                               std::span<const PositionalSpec> spec, MembersArgs* out) {
  *out = MembersArgs{};
  std::size_t i = 0;
  for (; i < spec.size(); ++i) {
    if (i >= args.size() || args[i].starts_with("-")) {
      if (i < args.size() && is_help(args[i])) break;
      std::string expected;
      for (const PositionalSpec& item : spec) expected += " " + std::string(item.name);
      return "expected" + expected + " (missing " + std::string(spec[i].name) + ")";
    }
    const std::string& arg = args[i];
    if (spec[i].kind == PositionalKind::kNodeId) {
      std::uint64_t id = 0;
      if (!parse_uint(arg, &id) || id == 0) {
        // parse_uint refuses values past 2^64-1 as well as non-numbers: name the range, not "1 or
        // more", which reads wrong for an id that is too large.
        return std::string(spec[i].name) + " '" + arg +
               "' is not a node id (a number from 1 to 18446744073709551615)";
      }
      out->ids.push_back(id);
    } else {
      if (arg.size() > kMaxAddressBytes) {
        return std::string(spec[i].name) + " is longer than " +
               std::to_string(kMaxAddressBytes) + " bytes";
      }
      if (std::string problem = util::parse_host_port(arg, util::PortZero::kRefused, nullptr);
          !problem.empty()) {
        return std::string(spec[i].name) + " '" + arg + "' " + problem;
      }
      out->addresses.push_back(arg);
    }
  }
  for (; i < args.size(); ++i) {
    if (out->flags.empty() && !args[i].starts_with("-") && !is_help(args[i]) &&
        out->ids.size() + out->addresses.size() == spec.size()) {
      return "unexpected argument '" + args[i] + "'";
    }
    out->flags.push_back(args[i]);
  }
  return "";
}

}  // namespace raftlog::cli

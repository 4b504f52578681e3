// The positional arguments of `raftlogctl members add|promote|remove|replace`: node ids and member
// addresses, checked before anything is sent (a usage error exits 2). Flags follow the positionals
// (`members add 4 10.0.0.4:7001 --learner`); global flags given before the command word are moved
// after them by hoist_leading_flags.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace raftlog::cli {

enum class PositionalKind { kNodeId, kAddress };

struct PositionalSpec {
  std::string_view name;  // "ID", "ADDR", ... for messages
  PositionalKind kind;
};

struct MembersArgs {
  std::vector<std::uint64_t> ids;        // the kNodeId positionals, in order
  std::vector<std::string> addresses;    // the kAddress positionals, in order
  std::vector<std::string> flags;        // everything after the positionals
};

// Splits `args` into exactly `spec.size()` leading positionals (each checked: an id is a decimal
// number in 1..2^64-1; an address is HOST:PORT with a port in 1..65535, at most 128 bytes) and the
// flags after them. "" on success, else the usage error. A leading -h/--help is left to the flags.
std::string parse_members_args(std::span<const std::string> args,
                               std::span<const PositionalSpec> spec, MembersArgs* out);

}  // namespace raftlog::cli

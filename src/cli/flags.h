// A small command-line flag parser shared by raftlogd, raftlogctl and raftlog-bench.
//
// Why our own: the tools need a handful of typed `--name value` flags, generated usage text and one
// exit-code convention; absl flags are process-global (two subcommands could not define `--dir`
// differently) and would pull Abseil's flag registry into every tool (docs/configuration.md).
//
// Accepted syntax: `--name value`, `--name=value`, boolean `--name` (or `--name=true|false`),
// `-h`/`--help`. Anything else — unknown flag, missing or malformed value, stray positional
// argument, a flag given twice, a number outside the flag's range — is a usage error.
//
// Numbers are bound to variables of their real type with an allowed range: a 32-bit field gets a
// 32-bit flag, so a value is never narrowed after parsing (`--tick-ms 4294967316` is refused, not
// taken as 20). The range is shown in the usage text and named in the error.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/host_port.h"

namespace raftlog::cli {

// Exit codes every raftlog tool uses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and found a problem (e.g. corruption)
inline constexpr int kExitUsage = 2;    // the command line itself was wrong

// Upper bound on the flags one command can define; keeps usage text and lookups trivially small.
inline constexpr std::size_t kMaxFlagsPerCommand = 64;

enum class ParseStatus {
  kOk,
  kHelp,   // -h/--help was given: print usage() to stdout and exit kExitOk
  kError,  // print error() and usage() to stderr and exit kExitUsage
};

// Inclusive bounds of an unsigned flag. The defaults of each registration are its type's range.
struct UintRange {
  std::uint64_t min = 0;
  std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
};
inline constexpr UintRange kUint32Range{0, std::numeric_limits<std::uint32_t>::max()};

class FlagSet {
 public:
  // `command_path` is the full invocation prefix shown in usage, e.g. "raftlogctl log verify".
  FlagSet(std::string command_path, std::string summary);

  // Each registration binds a flag to a caller-owned variable, whose current value is the default.
  // `value_name` is shown in usage ("--dir DIR").
  void string_flag(std::string name, std::string* value, std::string value_name, std::string help);
  // A value outside `range` is refused with a message naming the flag, the value and the range. For
  // a std::uint32_t variable the range is further capped at 2^32-1.
  void uint_flag(std::string name, std::uint64_t* value, std::string value_name, std::string help,
                 UintRange range = {});
  void uint_flag(std::string name, std::uint32_t* value, std::string value_name, std::string help,
                 UintRange range = kUint32Range);
  // Accepts plain numbers and binary suffixes: 512, 4K, 4KiB, 1M, 1MiB, 4G, 4GiB (case-insensitive).
  void bytes_flag(std::string name, std::uint64_t* value, std::string value_name, std::string help,
                  UintRange range = {});
  void bytes_flag(std::string name, std::uint32_t* value, std::string value_name, std::string help,
                  UintRange range = kUint32Range);
  // A HOST:PORT address (IPv6 as [ADDR]:PORT) with a port in 1..65535, or 0..65535 with
  // util::PortZero::kAllowed. An empty default means "not set"; an empty value given is refused.
  void host_port_flag(std::string name, std::string* value, std::string value_name,
                      std::string help, util::PortZero port_zero = util::PortZero::kRefused);
  void double_flag(std::string name, double* value, std::string value_name, std::string help);
  // Comma-separated unsigned values, e.g. `--writers 1,16,64`; an empty element is an error.
  void uint_list_flag(std::string name, std::vector<std::uint64_t>* value, std::string value_name,
                      std::string help);
  // Like uint_list_flag but each element may carry a bytes suffix, e.g. `--sizes 128,1KiB,16KiB`.
  void bytes_list_flag(std::string name, std::vector<std::uint64_t>* value, std::string value_name,
                       std::string help);
  void bool_flag(std::string name, bool* value, std::string help);

  // A flag that must appear on the command line (checked by parse()).
  void require(std::string_view name);

  ParseStatus parse(std::span<const std::string> args);

  const std::string& error() const { return error_; }
  std::string usage() const;
  // True when the flag appeared on the command line (not merely defaulted).
  bool was_set(std::string_view name) const;

 private:
  struct Flag {
    std::string name;
    std::string value_name;  // empty for boolean flags
    std::string help;
    std::string default_text;
    bool required = false;
    bool seen = false;
    // Parses and stores `text`; returns an error description or "" on success.
    std::function<std::string(std::string_view text)> assign;
    std::string range_text;  // "1..10000" when narrower than the variable's type, else empty
  };

  void add(Flag flag);
  // Shared by the uint/bytes registrations: parses with `parse` (strict, overflow-checked), checks
  // `range`, then stores through `store`.
  void add_ranged(std::string name, std::string value_name, std::string help,
                  std::uint64_t default_value, bool bytes, UintRange range, std::uint64_t type_max,
                  std::function<void(std::uint64_t)> store);
  Flag* find(std::string_view name);
  const Flag* find(std::string_view name) const;

  std::string command_path_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::string error_;
};

// Strict parsers, exposed for tools that read values outside a FlagSet. Return false on any junk,
// overflow or empty input.
bool parse_uint(std::string_view text, std::uint64_t* out);
bool parse_bytes(std::string_view text, std::uint64_t* out);
bool parse_double(std::string_view text, double* out);

// "4 KiB", "1.5 GiB": human-readable byte counts for output.
std::string format_bytes(std::uint64_t bytes);

}  // namespace raftlog::cli

// The tools' FlagSet: typed, range-checked number flags (a value is refused, never narrowed), byte
// counts with suffixes, HOST:PORT flags, and the messages and usage text they produce.
#include "cli/flags.h"

#include "cli/commands.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string_view>
#include <string>
#include <vector>

#include "util/host_port.h"

namespace raftlog::cli {
namespace {

// Parses `args` into `flags`; returns "" on success, else the error.
std::string parse(FlagSet& flags, const std::vector<std::string>& args) {
  const ParseStatus status = flags.parse(args);
  if (status == ParseStatus::kOk) return "";
  return status == ParseStatus::kError ? flags.error() : "help";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FlagSetUint32, ValuesAboveTheTypeAreRefusedNotTruncated) {
  // The bug this guards: 4294967316 = 2^32 + 20 used to become 20 after a static_cast.
  std::uint32_t tick_ms = 20;
  FlagSet flags("tool", "test");
  flags.uint_flag("tick-ms", &tick_ms, "MS", "tick");
  const std::string error = parse(flags, {"--tick-ms", "4294967316"});
  EXPECT_TRUE(contains(error, "'--tick-ms'")) << error;
  EXPECT_TRUE(contains(error, "'4294967316'")) << error;
  EXPECT_TRUE(contains(error, "0..4294967295")) << error;
  EXPECT_EQ(tick_ms, 20u) << "a refused value must not be stored";

  FlagSet again("tool", "test");
  again.uint_flag("tick-ms", &tick_ms, "MS", "tick");
  EXPECT_EQ(parse(again, {"--tick-ms=4294967295"}), "");
  EXPECT_EQ(tick_ms, 4294967295u);
}

TEST(FlagSetUint32, RangeBoundsAreInclusiveAndNamedInTheError) {
  for (const auto& [text, accepted] :
       std::vector<std::pair<std::string, bool>>{{"0", false},
                                                 {"1", true},
                                                 {"10000", true},
                                                 {"10001", false},
                                                 {"99999999999999999999999", false}}) {
    std::uint32_t value = 7;
    FlagSet flags("tool", "test");
    flags.uint_flag("tick-ms", &value, "MS", "tick", {1, 10000});
    const std::string error = parse(flags, {"--tick-ms", text});
    if (accepted) {
      EXPECT_EQ(error, "") << text;
      EXPECT_EQ(std::to_string(value), text);
    } else {
      EXPECT_EQ(error, "flag '--tick-ms' value '" + text + "' is out of range: allowed 1..10000")
          << text;
      EXPECT_EQ(value, 7u) << text;
    }
  }
}

TEST(FlagSetUint32, ARangeWiderThanTheTypeIsCappedAtTheType) {
  std::uint32_t value = 0;
  FlagSet flags("tool", "test");
  flags.uint_flag("n", &value, "N", "n", {0, 1ULL << 40});
  EXPECT_TRUE(contains(parse(flags, {"--n", "4294967296"}), "out of range: allowed 0..4294967295"));
  EXPECT_EQ(value, 0u);
}

TEST(FlagSetUint64, OverflowIsARangeErrorAndJunkIsNot) {
  std::uint64_t value = 5;
  FlagSet flags("tool", "test");
  flags.uint_flag("id", &value, "ID", "id", {1, UINT64_MAX});
  EXPECT_TRUE(contains(parse(flags, {"--id", "18446744073709551616"}),
                       "is out of range: allowed 1..18446744073709551615"));
  FlagSet zero("tool", "test");
  zero.uint_flag("id", &value, "ID", "id", {1, UINT64_MAX});
  EXPECT_TRUE(contains(parse(zero, {"--id", "0"}), "'0' is out of range"));
  for (const char* junk : {"", "-1", "+1", "1x", "0x10", " 1", "1.5"}) {
    FlagSet flags_junk("tool", "test");
    flags_junk.uint_flag("id", &value, "ID", "id");
    EXPECT_TRUE(
        contains(parse(flags_junk, {std::string("--id=") + junk}), "expects an unsigned integer"))
        << junk;
  }
  EXPECT_EQ(value, 5u);
}

TEST(FlagSetBytes, A32BitFieldRefusesFourGibibytesInsteadOfWrappingToZero) {
  // The bugs this guards: --max-entry-size 4GiB became 0 and 4294967297 became 1.
  for (const char* text : {"4GiB", "4294967296", "4294967297", "4g", "5000000K"}) {
    std::uint32_t max_entry = 4u << 20;
    FlagSet flags("tool", "test");
    flags.bytes_flag("max-entry-size", &max_entry, "BYTES", "largest entry", {1, 512ULL << 20});
    const std::string error = parse(flags, {"--max-entry-size", text});
    EXPECT_TRUE(contains(error, "flag '--max-entry-size' value '" + std::string(text) + "'"))
        << error;
    EXPECT_TRUE(contains(error, "out of range: allowed 1..512MiB")) << error;
    EXPECT_EQ(max_entry, 4u << 20) << text;
  }
  std::uint32_t max_entry = 0;
  FlagSet flags("tool", "test");
  flags.bytes_flag("max-entry-size", &max_entry, "BYTES", "largest entry", {1, 512ULL << 20});
  EXPECT_EQ(parse(flags, {"--max-entry-size", "512MiB"}), "");
  EXPECT_EQ(max_entry, 512u << 20);
}

TEST(FlagSetBytes, TheErrorShowsTheValueInBytesAndTheRangeWithSuffixes) {
  std::uint64_t segment = 1ULL << 30;
  FlagSet flags("tool", "test");
  flags.bytes_flag("segment-size", &segment, "BYTES", "segment", {64ULL << 10, 16ULL << 30});
  EXPECT_EQ(
      parse(flags, {"--segment-size", "32KiB"}),
      "flag '--segment-size' value '32KiB' (32768 bytes) is out of range: allowed 64KiB..16GiB");
  FlagSet overflow("tool", "test");
  overflow.bytes_flag("segment-size", &segment, "BYTES", "segment", {64ULL << 10, 16ULL << 30});
  EXPECT_TRUE(contains(parse(overflow, {"--segment-size", "99999999999GiB"}),
                       "out of range: allowed 64KiB..16GiB"));
  FlagSet junk("tool", "test");
  junk.bytes_flag("segment-size", &segment, "BYTES", "segment", {64ULL << 10, 16ULL << 30});
  EXPECT_TRUE(contains(parse(junk, {"--segment-size", "12XB"}), "expects a byte count"));
  EXPECT_EQ(segment, 1ULL << 30);
}

TEST(FlagSetUsage, NarrowRangesAreShownWithTheDefault) {
  std::uint32_t tick_ms = 20;
  std::uint32_t grace_ms = 3000;
  std::uint64_t segment = 1ULL << 30;
  FlagSet flags("tool", "test");
  flags.uint_flag("tick-ms", &tick_ms, "MS", "tick", {1, 10000});
  flags.uint_flag("grace-ms", &grace_ms, "MS", "grace");
  flags.bytes_flag("segment-size", &segment, "BYTES", "segment", {64ULL << 10, 16ULL << 30});
  const std::string usage = flags.usage();
  EXPECT_TRUE(contains(usage, "tick (1..10000, default 20)")) << usage;
  EXPECT_TRUE(contains(usage, "grace (default 3000)"))
      << usage;  // the type's own range is not news
  EXPECT_TRUE(contains(usage, "segment (64KiB..16GiB, default 1.00 GiB)")) << usage;
}

TEST(FlagSetHostPort, PortsOutsideTheRangeAreRefused) {
  for (const char* bad :
       {"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:0", "127.0.0.1:", "127.0.0.1", ":7001",
        "127.0.0.1:70x1", "::1:7001", "[::1]7001", "bad host:1", "127.0.0.1:-1"}) {
    std::string listen;
    FlagSet flags("tool", "test");
    flags.host_port_flag("listen", &listen, "HOST:PORT", "bind");
    const std::string error = parse(flags, {"--listen", bad});
    EXPECT_TRUE(contains(error, "flag '--listen' value '" + std::string(bad) + "'"))
        << bad << ": " << error;
    EXPECT_EQ(listen, "") << bad;
  }
  for (const char* good : {"127.0.0.1:1", "localhost:65535", "[::1]:7001", "0.0.0.0:7001"}) {
    std::string listen;
    FlagSet flags("tool", "test");
    flags.host_port_flag("listen", &listen, "HOST:PORT", "bind");
    EXPECT_EQ(parse(flags, {"--listen", good}), "") << good;
    EXPECT_EQ(listen, good);
  }
}

TEST(FlagSetHostPort, PortZeroOnlyWhereAllowed) {
  std::string metrics;
  FlagSet flags("tool", "test");
  flags.host_port_flag("metrics-addr", &metrics, "HOST:PORT", "metrics", util::PortZero::kAllowed);
  EXPECT_EQ(parse(flags, {"--metrics-addr", "127.0.0.1:0"}), "");
  EXPECT_EQ(metrics, "127.0.0.1:0");
  FlagSet again("tool", "test");
  again.host_port_flag("metrics-addr", &metrics, "HOST:PORT", "metrics", util::PortZero::kAllowed);
  EXPECT_TRUE(contains(parse(again, {"--metrics-addr", "127.0.0.1:65536"}),
                       "out of range (expected 0..65535)"));
}

TEST(HostPort, ParsesHostAndPort) {
  util::HostPort parsed;
  EXPECT_EQ(util::parse_host_port("[::1]:7001", util::PortZero::kRefused, &parsed), "");
  EXPECT_EQ(parsed.host, "::1");
  EXPECT_EQ(parsed.port, 7001u);
  EXPECT_EQ(util::parse_host_port("db-1.example.com:443", util::PortZero::kRefused, &parsed), "");
  EXPECT_EQ(parsed.host, "db-1.example.com");
  EXPECT_EQ(parsed.port, 443u);
  EXPECT_EQ(util::parse_host_port("127.0.0.1:99999", util::PortZero::kRefused, nullptr),
            "has port 99999 out of range (expected 1..65535)");
  EXPECT_EQ(util::parse_host_port("127.0.0.1:0", util::PortZero::kRefused, nullptr),
            "has port 0 out of range (expected 1..65535)");
  EXPECT_EQ(util::parse_host_port("h:184467440737095516160", util::PortZero::kRefused, nullptr),
            "has port 184467440737095516160 out of range (expected 1..65535)");
  EXPECT_TRUE(util::is_wildcard_host("0.0.0.0"));
  EXPECT_TRUE(util::is_wildcard_host("::"));
  EXPECT_FALSE(util::is_wildcard_host("127.0.0.1"));
}

TEST(FlagSetRequired, EveryMissingRequiredFlagIsNamedAtOnce) {
  std::uint64_t id = 0;
  std::string members;
  std::string dir;
  FlagSet flags("tool", "test");
  flags.uint_flag("id", &id, "ID", "id");
  flags.require("id");
  flags.string_flag("members", &members, "LIST", "members");
  flags.require("members");
  flags.string_flag("data-dir", &dir, "DIR", "dir");
  flags.require("data-dir");
  EXPECT_EQ(parse(flags, {}),
            "missing required flags '--id ID', '--members LIST', '--data-dir DIR'");
  FlagSet one("tool", "test");
  one.uint_flag("id", &id, "ID", "id");
  one.require("id");
  one.string_flag("members", &members, "LIST", "members");
  EXPECT_EQ(parse(one, {"--members", "x"}), "missing required flag '--id ID'");
  const std::string usage = flags.usage();
  EXPECT_TRUE(contains(usage, "Usage: tool --id ID --members LIST --data-dir DIR")) << usage;
  EXPECT_TRUE(contains(usage, "members (required)")) << usage;
}

TEST(FlagSetUsage, AHelpThatExplainsItsDefaultGetsNoSecondOne) {
  std::string endpoints = "127.0.0.1:7001";
  std::uint32_t tick_ms = 20;
  FlagSet flags("tool", "test");
  flags.string_flag("endpoints", &endpoints, "LIST", "where (default: the local cluster's)");
  flags.uint_flag("tick-ms", &tick_ms, "MS", "tick (default: 20 ms)", {1, 10000});
  const std::string usage = flags.usage();
  EXPECT_TRUE(contains(usage, "where (default: the local cluster's)\n")) << usage;
  EXPECT_FALSE(contains(usage, "(default 127.0.0.1:7001)")) << usage;
  EXPECT_TRUE(contains(usage, "tick (default: 20 ms) (1..10000)\n")) << usage;  // the range stays
}

std::vector<std::string> hoist(std::vector<std::string> args) {
  static constexpr std::string_view kValues[] = {"endpoints", "timeout-ms"};
  static constexpr std::string_view kBools[] = {"json"};
  return hoist_leading_flags(args, kValues, kBools);
}

TEST(HoistLeadingFlags, GlobalFlagsBeforeTheCommandMoveBehindIt) {
  using V = std::vector<std::string>;
  EXPECT_EQ(hoist({"--endpoints", "h:1", "status"}), (V{"status", "--endpoints", "h:1"}));
  EXPECT_EQ(hoist({"--json", "--endpoints=h:1", "read", "--from", "2"}),
            (V{"read", "--from", "2", "--json", "--endpoints=h:1"}));
  EXPECT_EQ(hoist({"status", "--json"}), (V{"status", "--json"}));  // already after: unchanged
  // Not global, --help/--version, or a value flag without its value: left for dispatch() to answer.
  EXPECT_EQ(hoist({"--dir", "x", "log"}), (V{"--dir", "x", "log"}));
  EXPECT_EQ(hoist({"--version"}), (V{"--version"}));
  EXPECT_EQ(hoist({"--json", "--help"}), (V{"--help", "--json"}));
  EXPECT_EQ(hoist({"--endpoints"}), (V{"--endpoints"}));
}

int table_handler(std::string_view, std::span<const std::string> args, const Io& io) {
  io.out << "ran with " << args.size() << "\n";
  return kExitOk;
}

TEST(RunTool, VersionIsAnsweredAtTheTopLevelOnly) {
  static constexpr Command kCommands[] = {{"go", "run it", table_handler, nullptr}};
  static constexpr CommandTable kTable{kCommands};
  std::ostringstream out;
  std::ostringstream err;
  const Io io{out, err};
  const std::vector<std::string> version{"--version"};
  EXPECT_EQ(run_tool("tool", "a tool", kTable, version, io), kExitOk);
  EXPECT_EQ(out.str().rfind("tool ", 0), 0U) << out.str();
  EXPECT_TRUE(contains(out.str(), "(revision ")) << out.str();
  out.str("");
  const std::vector<std::string> help{"--help"};
  EXPECT_EQ(run_tool("tool", "a tool", kTable, help, io), kExitOk);
  EXPECT_TRUE(contains(out.str(), "'tool --version' for its version")) << out.str();
  out.str("");
  const std::vector<std::string> command{"go", "--version"};  // the command's own business
  EXPECT_EQ(run_tool("tool", "a tool", kTable, command, io), kExitOk);
  EXPECT_EQ(out.str(), "ran with 1\n");
}

}  // namespace
}  // namespace raftlog::cli

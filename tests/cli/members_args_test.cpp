// `raftlogctl members` positional arguments (cli/members_args.h): ids and addresses checked before
// anything is sent; flags after them.
#include "cli/members_args.h"

#include <gtest/gtest.h>

namespace raftlog::cli {
namespace {

constexpr PositionalSpec kAdd[] = {{"ID", PositionalKind::kNodeId},
                                   {"ADDR", PositionalKind::kAddress}};
constexpr PositionalSpec kReplace[] = {{"OLD_ID", PositionalKind::kNodeId},
                                       {"NEW_ID", PositionalKind::kNodeId},
                                       {"NEW_ADDR", PositionalKind::kAddress}};

std::string parse(std::vector<std::string> args, std::span<const PositionalSpec> spec,
                  MembersArgs* out) {
  return parse_members_args(args, spec, out);
}

TEST(MembersArgs, TakesPositionalsThenFlags) {
  MembersArgs args;
  EXPECT_EQ(parse({"4", "10.0.0.4:7001", "--learner", "--timeout-ms", "100"}, kAdd, &args), "");
  EXPECT_EQ(args.ids, (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(args.addresses, (std::vector<std::string>{"10.0.0.4:7001"}));
  EXPECT_EQ(args.flags, (std::vector<std::string>{"--learner", "--timeout-ms", "100"}));
  EXPECT_EQ(parse({"2", "6", "[::1]:7006"}, kReplace, &args), "");
  EXPECT_EQ(args.ids, (std::vector<std::uint64_t>{2, 6}));
  EXPECT_EQ(parse({"--help"}, kAdd, &args), "") << "help is left to the flags";
  EXPECT_EQ(args.flags, (std::vector<std::string>{"--help"}));
}

TEST(MembersArgs, RefusesBadIdsAddressesAndCounts) {
  MembersArgs args;
  EXPECT_NE(parse({}, kAdd, &args).find("missing ID"), std::string::npos);
  EXPECT_NE(parse({"4"}, kAdd, &args).find("missing ADDR"), std::string::npos);
  EXPECT_NE(parse({"4", "--learner"}, kAdd, &args).find("missing ADDR"), std::string::npos);
  EXPECT_NE(parse({"0", "h:1"}, kAdd, &args).find("not a node id"), std::string::npos);
  EXPECT_NE(parse({"-1", "h:1"}, kAdd, &args).find("missing ID"), std::string::npos);
  EXPECT_NE(parse({"x", "h:1"}, kAdd, &args).find("not a node id"), std::string::npos);
  // Past 2^64-1: the message names the range ("1 or more" read wrong for it: drills5 L4).
  EXPECT_NE(parse({"99999999999999999999", "h:1"}, kAdd, &args)
                .find("not a node id (a number from 1 to 18446744073709551615)"),
            std::string::npos);
  EXPECT_NE(parse({"4", "nowhere"}, kAdd, &args).find("ADDR 'nowhere'"), std::string::npos);
  EXPECT_NE(parse({"4", "h:0"}, kAdd, &args).find("ADDR"), std::string::npos);
  EXPECT_NE(parse({"4", std::string(200, 'a') + ":1"}, kAdd, &args).find("longer than"),
            std::string::npos);
  EXPECT_NE(parse({"4", "h:1", "extra"}, kAdd, &args).find("unexpected argument 'extra'"),
            std::string::npos);
}

}  // namespace
}  // namespace raftlog::cli

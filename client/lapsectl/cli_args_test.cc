#include "client/lapsectl/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lapse::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

const std::vector<FlagSpec> kGlobal = {
    {"addr", "HOST:PORT", "Server"}, {"json", "", "JSON"}, {"help", "", "Help"}};

const CommandSpec kPut = {"put",
                          "COLLECTION KEY [VALUE]",
                          "Write a member",
                          "",
                          {{"ttl", "DURATION", "Time to live"}, {"if-absent", "", "Only new"}},
                          2,
                          3};

TEST(ParseArgsTest, ReadsFlagsInBothFormsAndArgumentsInOrder) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(kPut, kGlobal, {"c", "--ttl", "30m", "k", "--if_absent", "--addr=h:1", "v"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->positional(), ElementsAre("c", "k", "v"));
  EXPECT_THAT(args->Value("ttl"), Optional(std::string("30m")));
  EXPECT_TRUE(args->Has("if-absent"));
  EXPECT_THAT(args->Value("addr"), Optional(std::string("h:1")));
  EXPECT_FALSE(args->Has("json"));
}

TEST(ParseArgsTest, DoubleDashEndsFlagsAndADashIsAnArgument) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(kPut, kGlobal, {"c", "-", "--", "--ttl"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->positional(), ElementsAre("c", "-", "--ttl"));
}

TEST(ParseArgsTest, RejectsUnknownFlagsMissingValuesAndWrongArgumentCounts) {
  EXPECT_THAT(std::string(ParseArgs(kPut, kGlobal, {"c", "k", "--nope"}).status().message()),
              HasSubstr("unknown flag --nope"));
  EXPECT_THAT(std::string(ParseArgs(kPut, kGlobal, {"c", "k", "--ttl"}).status().message()),
              HasSubstr("--ttl needs a value"));
  EXPECT_THAT(std::string(ParseArgs(kPut, kGlobal, {"c", "k", "--json=1"}).status().message()),
              HasSubstr("takes no value"));
  EXPECT_THAT(std::string(ParseArgs(kPut, kGlobal, {"c"}).status().message()),
              HasSubstr("missing"));
  EXPECT_THAT(std::string(ParseArgs(kPut, kGlobal, {"a", "b", "c", "d"}).status().message()),
              HasSubstr("too many"));
}

TEST(ParseArgsTest, HelpNeedsNoArguments) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(kPut, kGlobal, {"-h"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->Has("help"));
}

TEST(SplitCommandTest, SkipsGlobalFlagsAndTheirValuesBeforeTheCommand) {
  auto [command, rest] = SplitCommand(kGlobal, {"--addr", "h:1", "--json", "get", "c", "k"});
  EXPECT_EQ(command, "get");
  EXPECT_THAT(rest, ElementsAre("--addr", "h:1", "--json", "c", "k"));
  EXPECT_EQ(SplitCommand(kGlobal, {"--help"}).first, "");
}

TEST(CommandHelpTest, ShowsUsageFlagsAndGlobalFlags) {
  const std::string help = CommandHelp("lapsectl", kPut, kGlobal);
  EXPECT_THAT(help, HasSubstr("Usage: lapsectl put [FLAGS] COLLECTION KEY [VALUE]"));
  EXPECT_THAT(help, HasSubstr("--ttl=DURATION"));
  EXPECT_THAT(help, HasSubstr("--if-absent"));
  EXPECT_THAT(help, HasSubstr("--addr=HOST:PORT"));
}

}  // namespace
}  // namespace lapse::cli

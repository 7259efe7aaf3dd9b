#include "client/lapsectl/cli_output.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lapse::cli {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationFlagTest, AcceptsHumanDurationsAndRejectsTheRest) {
  EXPECT_EQ(*ParseDurationFlag("ttl", "30m"), absl::Minutes(30));
  EXPECT_EQ(*ParseDurationFlag("ttl", "1500ms"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDurationFlag("ttl", "1h30m"), absl::Minutes(90));
  EXPECT_THAT(std::string(ParseDurationFlag("ttl", "30").status().message()),
              HasSubstr("--ttl=30: not a duration"));
  EXPECT_FALSE(ParseDurationFlag("ttl", "0s").ok());
  EXPECT_FALSE(ParseDurationFlag("ttl", "-1s").ok());
  EXPECT_FALSE(ParseDurationFlag("ttl", "inf").ok());
}

TEST(ParseTimeFlagTest, AcceptsRfc3339WithZoneOrOffset) {
  const absl::Time t = absl::FromUnixSeconds(1735830245);
  EXPECT_EQ(*ParseTimeFlag("at", "2025-01-02T15:04:05Z"), t);
  EXPECT_EQ(*ParseTimeFlag("at", "2025-01-02T17:04:05+02:00"), t);
  EXPECT_EQ(*ParseTimeFlag("at", "2025-01-02T15:04:05.250Z"), t + absl::Milliseconds(250));
  EXPECT_THAT(std::string(ParseTimeFlag("at", "tomorrow").status().message()),
              HasSubstr("--at=tomorrow: not an RFC 3339 time"));
}

TEST(ParseNumberFlagTest, EnforcesTheRange) {
  EXPECT_EQ(*ParseNumberFlag("limit", "7", 1, 10), 7u);
  EXPECT_FALSE(ParseNumberFlag("limit", "0", 1, 10).ok());
  EXPECT_FALSE(ParseNumberFlag("limit", "11", 1, 10).ok());
  EXPECT_FALSE(ParseNumberFlag("limit", "x", 1, 10).ok());
}

TEST(ParseHexFlagTest, ReadsTwoDigitsPerByteAndRefusesAnythingElse) {
  EXPECT_EQ(*ParseHexFlag("resume-token", "01fF"), std::string("\x01\xff", 2));
  for (const char* bad : {"", "0", "0g", "01 2"}) {
    absl::StatusOr<std::string> parsed = ParseHexFlag("resume-token", bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--resume-token="));
  }
}

TEST(FormatTest, TimesAreUtcWithMillisecondsAndRemainingTimeNeverNegative) {
  const absl::Time t = absl::FromUnixMillis(1735830245250);
  EXPECT_EQ(FormatTimestamp(t), "2025-01-02T15:04:05.250Z");
  EXPECT_EQ(FormatExpireTime(std::nullopt), "-");
  EXPECT_EQ(FormatRemaining(t, t - absl::Seconds(90)), "1m30s");
  EXPECT_EQ(FormatRemaining(t, t + absl::Seconds(1)), "0");
}

TEST(DisplayValueTest, PrintableTextAsIsOtherBytesEscaped) {
  EXPECT_EQ(DisplayValue("héllo"), "héllo");
  // A hex digit after an escape is escaped too, so the result reads back.
  EXPECT_EQ(DisplayValue(std::string("a\0b", 3)), "\"a\\x00\\x62\"");
  EXPECT_EQ(DisplayValue("line\nbreak"), "\"line\\nbreak\"");
  EXPECT_EQ(DisplayValue("\xff"), "\"\\xff\"");
}

TEST(TableTest, PadsColumnsToTheWidestCell) {
  Table table({"KEY", "VALUE"});
  table.AddRow({"a-long-key", "1"});
  EXPECT_EQ(table.Render(), "KEY         VALUE\na-long-key  1\n");
}

TEST(JsonObjectTest, EscapesStringsAndFallsBackToBase64ForBinary) {
  const std::string line = JsonObject()
                               .Add("key", "q\"uote\n")
                               .Add("n", uint64_t{3})
                               .Add("ok", true)
                               .AddTime("t", std::nullopt)
                               .AddBytes("value", std::string("\xff\x00", 2))
                               .str();
  EXPECT_EQ(line,
            "{\"key\":\"q\\\"uote\\n\",\"n\":3,\"ok\":true,\"t\":null,"
            "\"value_base64\":\"/wA=\"}");
}

}  // namespace
}  // namespace lapse::cli

#include "server/base/log.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/captured_log.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;

// Captures what is logged in memory; puts the process-wide level and format
// back afterwards.
class LogTest : public ::testing::Test {
 protected:
  ~LogTest() override {
    SetMinLogLevel(LogLevel::kInfo);
    SetLogFormat(LogFormat::kText);
  }

  std::string Written() { return log_.Text(); }

 private:
  testing::CapturedLog log_;
};

TEST_F(LogTest, WritesOneLineNamingTheLevel) {
  SetMinLogLevel(LogLevel::kInfo);
  Log(LogLevel::kWarning, "cut %d bytes at the end of %s", 12, "wal-1.log");
  EXPECT_EQ(Written(), "lapsed WARNING: cut 12 bytes at the end of wal-1.log\n");
}

TEST_F(LogTest, InfoWritesEveryLevel) {
  SetMinLogLevel(LogLevel::kInfo);
  Log(LogLevel::kInfo, "a");
  Log(LogLevel::kWarning, "b");
  Log(LogLevel::kError, "c");
  EXPECT_EQ(Written(), "lapsed INFO: a\nlapsed WARNING: b\nlapsed ERROR: c\n");
}

TEST_F(LogTest, DropsLinesBelowTheMinimumLevel) {
  SetMinLogLevel(LogLevel::kWarning);
  Log(LogLevel::kInfo, "not written");
  Log(LogLevel::kWarning, "written");
  SetMinLogLevel(LogLevel::kError);
  Log(LogLevel::kInfo, "not written");
  Log(LogLevel::kWarning, "not written");
  Log(LogLevel::kError, "written too");
  EXPECT_EQ(Written(), "lapsed WARNING: written\nlapsed ERROR: written too\n");
}

TEST_F(LogTest, LinesFromManyThreadsDoNotInterleave) {
  constexpr int kThreads = 4;
  constexpr int kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) Log(LogLevel::kInfo, "thread %d line %d", t, i);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<int> next(kThreads, 0);
  for (absl::string_view line : absl::StrSplit(Written(), '\n', absl::SkipEmpty())) {
    int t = 0;
    int i = 0;
    ASSERT_EQ(sscanf(std::string(line).c_str(), "lapsed INFO: thread %d line %d", &t, &i), 2)
        << line;
    ASSERT_TRUE(t >= 0 && t < kThreads) << line;
    EXPECT_EQ(line, absl::StrCat("lapsed INFO: thread ", t, " line ", next[t]));
    ++next[t];
  }
  EXPECT_THAT(next, ElementsAre(kLines, kLines, kLines, kLines));
}

TEST_F(LogTest, RateLimitedLogWritesAtMostItsLinesPerInterval) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  RateLimitedLog log(2, absl::Minutes(1), &clock);
  for (int i = 0; i < 5; ++i) log.Log(LogLevel::kWarning, "refused %d", i);
  EXPECT_EQ(Written(), "lapsed WARNING: refused 0\nlapsed WARNING: refused 1\n");
}

TEST_F(LogTest, RateLimitedLogCountsWhatItDroppedWithTheNextLineWritten) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  RateLimitedLog log(2, absl::Minutes(1), &clock);
  for (int i = 0; i < 5; ++i) log.Log(LogLevel::kWarning, "refused %d", i);
  clock.Advance(absl::Seconds(59));
  log.Log(LogLevel::kWarning, "still inside the interval");
  clock.Advance(absl::Seconds(1));
  log.Log(LogLevel::kWarning, "refused 5");
  log.Log(LogLevel::kWarning, "refused 6");
  log.Log(LogLevel::kWarning, "refused 7");
  clock.Advance(absl::Minutes(5));
  log.Log(LogLevel::kError, "refused 8");
  EXPECT_EQ(Written(),
            "lapsed WARNING: refused 0\n"
            "lapsed WARNING: refused 1\n"
            "lapsed WARNING: dropped 4 similar lines (at most 2 per 1m)\n"
            "lapsed WARNING: refused 5\n"
            "lapsed WARNING: refused 6\n"
            "lapsed ERROR: dropped 1 similar lines (at most 2 per 1m)\n"
            "lapsed ERROR: refused 8\n");
}

TEST_F(LogTest, RateLimitedLogIgnoresLinesBelowTheMinimumLevel) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  RateLimitedLog log(1, absl::Minutes(1), &clock);
  SetMinLogLevel(LogLevel::kWarning);
  log.Log(LogLevel::kInfo, "not written, not counted");
  log.Log(LogLevel::kWarning, "written");
  EXPECT_EQ(Written(), "lapsed WARNING: written\n");
}

TEST_F(LogTest, JsonFormatWritesOneObjectPerLine) {
  SetLogFormat(LogFormat::kJson);
  Log(LogLevel::kWarning, "cut %d bytes", 12);
  EXPECT_THAT(Written(), ::testing::MatchesRegex(
                             R"(\{"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{6}Z",)"
                             R"("level":"warning","message":"cut 12 bytes"\}
)"));
}

TEST(FormatLogLineTest, JsonEscapesEveryByteThatNeedsIt) {
  const absl::Time time = absl::FromUnixMicros(1'700'000'000'123'456);
  const std::string message = std::string("q\" b\\ nl\n tab\t cr\r nul") + '\0' +
                              " bel\x07 del\x7f caf\xc3\xa9 bad\xff\xc3 end";
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, time, LogLevel::kError, message),
            "{\"time\":\"2023-11-14T22:13:20.123456Z\",\"level\":\"error\",\"message\":"
            "\"q\\\" b\\\\ nl\\n tab\\t cr\\r nul\\u0000 bel\\u0007 del\\u007f caf\xc3\xa9 "
            "bad\xef\xbf\xbd\xef\xbf\xbd end\"}\n");
}

TEST(FormatLogLineTest, TextIsTheClassicLine) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, absl::UnixEpoch(), LogLevel::kInfo, "up"),
            "lapsed INFO: up\n");
}

TEST(ParseLogFormatTest, AcceptsTextAndJsonOnly) {
  LogFormat format = LogFormat::kText;
  ASSERT_TRUE(ParseLogFormat("json", &format));
  EXPECT_EQ(format, LogFormat::kJson);
  ASSERT_TRUE(ParseLogFormat("text", &format));
  EXPECT_EQ(format, LogFormat::kText);
  EXPECT_FALSE(ParseLogFormat("JSON", &format));
  EXPECT_FALSE(ParseLogFormat("", &format));
}

TEST(ParseLogLevelTest, AcceptsTheThreeFlagValues) {
  LogLevel level = LogLevel::kInfo;
  ASSERT_TRUE(ParseLogLevel("error", &level));
  EXPECT_EQ(level, LogLevel::kError);
  ASSERT_TRUE(ParseLogLevel("warning", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
  ASSERT_TRUE(ParseLogLevel("info", &level));
  EXPECT_EQ(level, LogLevel::kInfo);
}

TEST(ParseLogLevelTest, RejectsAnythingElse) {
  LogLevel level = LogLevel::kWarning;
  EXPECT_FALSE(ParseLogLevel("loud", &level));
  EXPECT_FALSE(ParseLogLevel("ERROR", &level));
  EXPECT_FALSE(ParseLogLevel("", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
}

}  // namespace
}  // namespace lapse

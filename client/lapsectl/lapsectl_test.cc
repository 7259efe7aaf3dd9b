// lapsectl as a user runs it: each subcommand against a real lapsed, checked
// by stdout, stderr and exit status; watch is stopped with SIGINT.
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/auth_grants.h"
#include "testing/child_process.h"
#include "testing/http_get.h"
#include "testing/lapsed_process.h"
#include "testing/temp_dir.h"
#include "testing/test_certs.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

using Result = ChildProcess::Result;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// Minimal JSON Lines check: every line is one object.
void ExpectJsonLines(const std::string& text, size_t count) {
  const std::vector<std::string> lines = Lines(text);
  EXPECT_EQ(lines.size(), count) << text;
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "{") && absl::EndsWith(line, "}")) << line;
  }
}

// The "sequence" of a JSON event line.
uint64_t SequenceOf(const std::string& line) {
  const std::string marker = "\"sequence\":\"";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return 0;
  const size_t begin = at + marker.size();
  uint64_t sequence = 0;
  if (!absl::SimpleAtoi(line.substr(begin, line.find('"', begin) - begin), &sequence)) {
    return 0;
  }
  return sequence;
}

class LapsectlTest : public ::testing::Test {
 protected:
  explicit LapsectlTest(std::vector<std::string> lapsed_flags = {})
      : lapsed_(LAPSED_PATH, std::move(lapsed_flags)) {}

  void SetUp() override { ASSERT_GT(lapsed_.port(), 0); }

  // Runs lapsectl against lapsed.
  Result Ctl(std::vector<std::string> args, absl::string_view input = "") {
    args.insert(args.begin(), "--addr=" + lapsed_.address());
    return RunToCompletion(LAPSECTL_PATH, args, {}, input);
  }

  // Runs lapsectl and expects exit status 0.
  Result Ok(const std::vector<std::string>& args) {
    Result result = Ctl(args);
    EXPECT_EQ(result.exit_code, 0) << absl::StrJoin(args, " ") << "\n" << result.out << result.err;
    return result;
  }

  // A watch running in the background, once it is in place.
  std::unique_ptr<ChildProcess> StartWatch(std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr=" + lapsed_.address(), "watch"});
    auto watch = std::make_unique<ChildProcess>(LAPSECTL_PATH, args);
    EXPECT_THAT(watch->WaitForLine(ChildProcess::kStderr, "watching"),
                HasSubstr("stop with Ctrl-C"));
    return watch;
  }

  LapsedProcess lapsed_;
};

TEST_F(LapsectlTest, PutGetAndTtlRoundTripAMemberAndItsDeadline) {
  Result put = Ok({"put", "orders", "o-1", "hello", "--ttl=30m"});
  EXPECT_THAT(put.out, HasSubstr("KEY"));
  EXPECT_THAT(put.out, ContainsRegex("o-1 +created +20[0-9-]+T"));
  EXPECT_THAT(put.err, IsEmpty());

  Result get = Ok({"get", "orders", "o-1"});
  EXPECT_THAT(get.out, ContainsRegex("o-1 +hello +20[0-9-]+T[0-9:.]+Z"));

  Result ttl = Ok({"ttl", "orders", "o-1"});
  EXPECT_THAT(ttl.out, ContainsRegex("o-1 +(29m[0-9.]+s|30m) +20"));

  Ok({"put", "orders", "forever", "x"});
  EXPECT_THAT(Ok({"ttl", "orders", "forever"}).out, ContainsRegex("forever +persistent +-"));
}

TEST_F(LapsectlTest, AbsoluteTimesAndGetRefreshMoveTheDeadline) {
  const absl::Time at = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now() + absl::Hours(48)));
  const std::string utc = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", at, absl::UTCTimeZone());
  Ok({"put", "c", "k", "--at=" + utc});
  EXPECT_THAT(Ok({"get", "c", "k"}).out,
              HasSubstr(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", at, absl::UTCTimeZone())));

  // The same instant plus a day, written with a +01:00 offset.
  const absl::Time later = at + absl::Hours(24);
  const std::string offset =
      absl::FormatTime("%Y-%m-%dT%H:%M:%S%Ez", later, absl::FixedTimeZone(3600));
  EXPECT_THAT(Ok({"get", "c", "k", "--refresh-at=" + offset}).out,
              HasSubstr(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", later, absl::UTCTimeZone())));
}

TEST_F(LapsectlTest, ConditionsThatDoNotHoldExitWith1) {
  Ok({"put", "c", "k", "v", "--ttl=1h"});
  Result skipped = Ctl({"put", "c", "k", "w", "--if-absent"});
  EXPECT_EQ(skipped.exit_code, 1);
  EXPECT_THAT(skipped.out, ContainsRegex("k +skipped"));

  Result too_many = Ctl({"put", "c", "k2", "--max-members=1"});
  EXPECT_EQ(too_many.exit_code, 1);
  EXPECT_THAT(too_many.err, HasSubstr("FAILED_PRECONDITION"));

  Result nx = Ctl({"expire", "c", "k", "--ttl=2h", "--nx"});
  EXPECT_EQ(nx.exit_code, 1);
  EXPECT_THAT(nx.out, ContainsRegex("k +condition_not_met"));
  EXPECT_THAT(Ok({"expire", "c", "k", "--ttl=2h", "--xx"}).out, ContainsRegex("k +updated"));
  EXPECT_THAT(Ok({"expire", "c", "k", "--ttl=3h", "--gt"}).out, ContainsRegex("k +updated"));
  EXPECT_EQ(Ctl({"expire", "c", "k", "--ttl=4h", "--lt"}).exit_code, 1);

  EXPECT_THAT(Ok({"put", "c", "k", "w", "--if-present", "--keep-ttl"}).out,
              ContainsRegex("k +replaced +20"));
}

TEST_F(LapsectlTest, PersistExpireAndRemoveReportEachKey) {
  Ok({"put", "c", "a", "--ttl=1h"});
  Ok({"put", "c", "b"});
  Result persist = Ctl({"persist", "c", "a", "b", "zz"});
  EXPECT_EQ(persist.exit_code, 1);
  EXPECT_THAT(persist.out, ContainsRegex("a +persisted"));
  EXPECT_THAT(persist.out, ContainsRegex("b +no_expiration"));
  EXPECT_THAT(persist.out, ContainsRegex("zz +not_found"));

  EXPECT_THAT(Ok({"expire", "c", "a", "--at=2000-01-01T00:00:00Z"}).out,
              ContainsRegex("a +expired +-"));
  Result removed = Ctl({"rm", "c", "a", "b"});
  EXPECT_EQ(removed.exit_code, 1);
  EXPECT_THAT(removed.out, ContainsRegex("a +no \\(not found\\)"));
  EXPECT_THAT(removed.out, ContainsRegex("b +yes"));
}

TEST_F(LapsectlTest, WhatDoesNotExistExitsWith1) {
  Result get = Ctl({"get", "nope", "k"});
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_THAT(get.out, HasSubstr("(not found)"));
  EXPECT_EQ(Ctl({"ttl", "nope", "k"}).exit_code, 1);
  EXPECT_EQ(Ctl({"persist", "nope", "k"}).exit_code, 1);

  Result info = Ctl({"info", "nope"});
  EXPECT_EQ(info.exit_code, 1);
  EXPECT_THAT(info.err, HasSubstr("NOT_FOUND"));

  Result drop = Ctl({"drop", "nope"});
  EXPECT_EQ(drop.exit_code, 1);
  EXPECT_THAT(drop.err, HasSubstr("not found"));

  EXPECT_EQ(Ctl({"get", "nope", "k", "--raw"}).exit_code, 1);
}

TEST_F(LapsectlTest, BadUsageExitsWith2WithAMessage) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"put", "c"},
      {"put", "c", "k", "--ttl=30"},
      {"put", "c", "k", "--ttl=1m", "--at=2999-01-01T00:00:00Z"},
      {"put", "c", "k", "--at=tomorrow"},
      {"put", "c", "k", "--if-absent", "--if-present"},
      {"put", "c", "k", "--keep-ttl", "--ttl=1m"},
      {"put", "c", "k", "--max-members=0"},
      {"put", "c", "k", "v", "--value-file=-"},
      {"get", "c", "k", "--bogus"},
      {"expire", "c", "k"},
      {"expire", "c", "k", "--ttl=1m", "--nx", "--xx"},
      {"ls", "c", "--by=size"},
      {"watch", "--from=1", "--oldest"},
      {"watch", "--from=1", "--resume-token=01"},
      {"watch", "--resume-token=zz"},
      {"watch", "--collections=a", "--prefix=b"},
      {"get", "c", "k", "--timeout=soon"},
  };
  for (const std::vector<std::string>& args : bad) {
    Result result = Ctl(args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(args, " ");
    EXPECT_THAT(result.err, Not(IsEmpty())) << absl::StrJoin(args, " ");
    EXPECT_THAT(result.out, IsEmpty()) << absl::StrJoin(args, " ");
  }
  EXPECT_THAT(Ctl({"put", "c", "k", "--ttl=30"}).err, HasSubstr("--ttl=30: not a duration"));
}

TEST_F(LapsectlTest, RpcFailuresExitWith2) {
  Result invalid = Ctl({"put", "", "k"});
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_THAT(invalid.err, HasSubstr("INVALID_ARGUMENT"));

  RefusedPort nobody;
  Result unreachable = RunToCompletion(
      LAPSECTL_PATH,
      {"get", "c", "k", "--timeout=2s", absl::StrCat("--addr=127.0.0.1:", nobody.port())});
  EXPECT_EQ(unreachable.exit_code, 2);
  EXPECT_THAT(unreachable.err, HasSubstr("lapsectl get: UNAVAILABLE"));
}

TEST_F(LapsectlTest, HelpDescribesTheToolAndEveryCommand) {
  const Result tool = RunToCompletion(LAPSECTL_PATH, {"--help"});
  EXPECT_EQ(tool.exit_code, 0);
  EXPECT_THAT(tool.out, HasSubstr("Exit status: 0 ok; 1 not found"));
  for (const char* command : {"put", "get", "rm", "expire", "persist", "ttl", "ls", "info",
                              "collections", "drop", "watch", "health"}) {
    EXPECT_THAT(tool.out, ContainsRegex(absl::StrCat("\n  ", command, " +[A-Z]")));
    const Result help = RunToCompletion(LAPSECTL_PATH, {command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.out, StartsWith(absl::StrCat("Usage: lapsectl ", command)));
    EXPECT_THAT(help.out, HasSubstr("--addr=HOST:PORT"));
  }
  EXPECT_THAT(RunToCompletion(LAPSECTL_PATH, {"help", "expire"}).out, HasSubstr("--nx"));
}

TEST_F(LapsectlTest, JsonOutputIsOneObjectPerLine) {
  Ok({"put", "c", "a", "1", "--ttl=1h"});
  Ok({"put", "c", "b", "2"});
  ExpectJsonLines(Ok({"--json", "put", "c", "x", "y"}).out, 1);
  const Result get = Ok({"get", "c", "a", "b", "--json"});
  ExpectJsonLines(get.out, 2);
  EXPECT_THAT(get.out, HasSubstr("{\"key\":\"b\",\"found\":true,\"value\":\"2\","
                                 "\"expire_time\":null}"));
  ExpectJsonLines(Ok({"ls", "c", "--json"}).out, 3);
  ExpectJsonLines(Ok({"ttl", "c", "a", "--json"}).out, 1);
  EXPECT_THAT(Ok({"ttl", "c", "a", "--json"}).out, HasSubstr("\"ttl_ms\":"));
  ExpectJsonLines(Ok({"info", "c", "--json"}).out, 1);
  ExpectJsonLines(Ok({"collections", "--json"}).out, 1);
  ExpectJsonLines(Ok({"persist", "c", "a", "--json"}).out, 1);
  ExpectJsonLines(Ok({"expire", "c", "a", "--ttl=1m", "--json"}).out, 1);
  ExpectJsonLines(Ok({"rm", "c", "x", "--json"}).out, 1);
  ExpectJsonLines(Ok({"health", "--json"}).out, 1);
  EXPECT_THAT(Ok({"drop", "c", "--json"}).out,
              HasSubstr("{\"collection\":\"c\",\"removed_count\":2}"));
}

TEST_F(LapsectlTest, BinaryValuesFromStdinOrAFileKeepEveryByte) {
  const std::string bytes("\x00\x01\xfe\xff\n", 5);
  Result put = Ctl({"put", "bin", "k", "--value-file=-"}, bytes);
  EXPECT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(Ok({"get", "bin", "k", "--raw"}).out, bytes);
  EXPECT_THAT(Ok({"get", "bin", "k"}).out, HasSubstr("\"\\x00\\x01\\xfe\\xff\\n\""));
  EXPECT_THAT(Ok({"get", "bin", "k", "--json"}).out, HasSubstr("\"value_base64\":\"AAH+/wo=\""));

  TempDir dir;
  const std::string path = dir.path() + "/value";
  std::ofstream(path, std::ios::binary) << bytes;
  Ok({"put", "bin", "f", "--value-file=" + path});
  EXPECT_EQ(Ok({"get", "bin", "f", "--raw"}).out, bytes);
}

TEST_F(LapsectlTest, LsOrdersByKeyOrDeadlineAndCollectionsFilterByPrefix) {
  Ok({"put", "c", "b", "--ttl=1h"});
  Ok({"put", "c", "a", "--ttl=2h"});
  Ok({"put", "c", "0"});
  Ok({"put", "user:1", "k"});
  auto keys = [](const std::string& out) {
    std::vector<std::string> first_words;
    for (const std::string& line : Lines(out)) {
      first_words.push_back(line.substr(0, line.find(' ')));
    }
    return first_words;
  };
  EXPECT_THAT(keys(Ok({"ls", "c"}).out), ::testing::ElementsAre("KEY", "0", "a", "b"));
  EXPECT_THAT(keys(Ok({"ls", "c", "--by=expire", "--keys-only", "--page-size=1"}).out),
              ::testing::ElementsAre("KEY", "b", "a", "0"));
  EXPECT_THAT(keys(Ok({"ls", "c", "--limit=2"}).out), ::testing::ElementsAre("KEY", "0", "a"));
  const Result collections = Ok({"collections", "--prefix=user:"});
  EXPECT_THAT(keys(collections.out), ::testing::ElementsAre("NAME", "user:1"));
  EXPECT_THAT(Ok({"info", "c"}).out, ContainsRegex("c +3 +2 +20"));
  EXPECT_THAT(Ok({"drop", "c"}).out, ContainsRegex("c +3"));
}

TEST_F(LapsectlTest, HealthReportsServing) {
  EXPECT_THAT(Ok({"health"}).out, ContainsRegex("\\(server\\) +SERVING"));
  EXPECT_THAT(Ok({"health", "--service=lapse.v1.LapseService"}).out, HasSubstr("SERVING"));
  Result unknown = Ctl({"health", "--service=nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.out, HasSubstr("SERVICE_UNKNOWN"));
}

TEST_F(LapsectlTest, TheAddressComesFromLapseAddrWithoutAddr) {
  Result result =
      RunToCompletion(LAPSECTL_PATH, {"put", "c", "k"}, {"LAPSE_ADDR=" + lapsed_.address()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("created"));
}

TEST_F(LapsectlTest, WatchPrintsAnExpiryAndStopsOnSigintWithACount) {
  std::unique_ptr<ChildProcess> watch = StartWatch({"--json", "--values"});
  Ok({"put", "orders", "o-1", "paid?"});
  Ok({"expire", "orders", "o-1", "--at=2000-01-01T00:00:00Z"});
  const std::string line = watch->WaitForLine(ChildProcess::kStdout, "o-1");
  EXPECT_THAT(line, AllOf(StartsWith("{\"sequence\":\""),
                          HasSubstr("\"collection\":\"orders\",\"key\":\"o-1\","
                                    "\"value\":\"paid?\",\"expire_time\":\"")));
  EXPECT_THAT(line, HasSubstr("\"expired_at\":\""));
  const uint64_t sequence = SequenceOf(line);
  EXPECT_GT(sequence, 0u);

  watch->Signal(SIGINT);
  const Result result = watch->Wait();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  ExpectJsonLines(result.out, 1);
  EXPECT_THAT(result.err, HasSubstr("received 1 event; resume with --resume-token="));
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat(" (or --from=", sequence, ")")));
}

TEST_F(LapsectlTest, GroupCommandsCreateListShowResetAndRemoveAGroup) {
  Result created = Ok({"group", "create", "workers", "--prefix=orders:", "--visibility-timeout=1m",
                       "--max-deliveries=3", "--max-unacked=10"});
  EXPECT_THAT(created.out, HasSubstr("NAME"));
  EXPECT_THAT(created.out, ContainsRegex("workers +orders:\\* +1m +3 +10 +"));
  Ok({"group", "create", "audit", "--collections=a,b", "--oldest", "--values"});
  Result taken = Ctl({"group", "create", "workers"});
  EXPECT_EQ(taken.exit_code, 2);
  EXPECT_THAT(taken.err, HasSubstr("ALREADY_EXISTS"));

  Result listed = Ok({"group", "ls"});
  EXPECT_THAT(listed.out, ContainsRegex("audit +a,b +30s +5 +100 "));
  EXPECT_THAT(listed.out, ContainsRegex("workers +orders:\\* "));
  Result json = Ok({"group", "ls", "--json"});
  ExpectJsonLines(json.out, 2);
  EXPECT_THAT(json.out, HasSubstr("\"name\":\"audit\",\"collections\":\"a,b\""));
  EXPECT_THAT(json.out, HasSubstr("\"include_values\":true,\"visibility_timeout_ms\":30000"));
  ExpectJsonLines(Ok({"group", "ls", "--limit=1", "--json"}).out, 1);

  EXPECT_THAT(Ok({"group", "info", "workers"}).out, ContainsRegex("workers +orders:\\* "));
  EXPECT_THAT(Ok({"group", "reset", "audit", "--from=0"}).out, ContainsRegex("audit +a,b "));
  EXPECT_THAT(Ok({"group", "rm", "workers"}).out, ContainsRegex("workers +orders:\\* "));
  Result gone = Ctl({"group", "info", "workers"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Ctl({"group", "rm", "workers"}).exit_code, 1);
  EXPECT_EQ(Ctl({"group", "reset", "workers"}).exit_code, 1);
}

TEST_F(LapsectlTest, GroupCommandsRefuseBadUsageWith2) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"group", "create"},
           {"group", "create", "g", "--collections=a", "--prefix=b"},
           {"group", "create", "g", "--max-deliveries=0"},
           {"group", "create", "g", "--visibility-timeout=soon"},
           {"group", "reset", "g", "--from=1", "--oldest"},
           {"group", "info", "g", "--leases=x"},
           {"group", "frobnicate"},
           {"consume", "--group=g"},
       }) {
    Result result = Ctl(args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(args, " ") << "\n" << result.out;
    EXPECT_THAT(result.err, Not(IsEmpty())) << absl::StrJoin(args, " ");
  }
  EXPECT_THAT(Ctl({"group", "create", "g", "--collections=a", "--prefix=b"}).err,
              HasSubstr("--collections and --prefix cannot be used together"));
  EXPECT_THAT(Ok({"help", "group", "create"}).out,
              AllOf(HasSubstr("Usage: lapsectl group create [FLAGS] NAME"),
                    HasSubstr("--visibility-timeout")));
  EXPECT_THAT(Ok({"group", "reset", "--help"}).out, HasSubstr("--oldest"));
  EXPECT_THAT(Ok({"--help"}).out, AllOf(HasSubstr("group info"), HasSubstr("consume")));
}

TEST_F(LapsectlTest, ConsumePrintsTheGroupsEventsAndAcksEachOnce) {
  Ok({"group", "create", "workers", "--collections=orders", "--values"});
  for (const std::string key : {"o-1", "o-2", "o-3"}) {
    Ok({"put", "orders", key, "v-" + key});
    Ok({"expire", "orders", key, "--at=2000-01-01T00:00:00Z"});
  }
  Result consumed =
      Ok({"consume", "--group=workers", "--consumer=w1", "--max=3", "--json", "--values"});
  ExpectJsonLines(consumed.out, 3);
  EXPECT_THAT(consumed.out, HasSubstr("\"collection\":\"orders\",\"key\":\"o-1\","
                                      "\"value\":\"v-o-1\",\"expire_time\":\""));
  EXPECT_THAT(consumed.out, HasSubstr("\"key\":\"o-3\""));
  EXPECT_THAT(consumed.err, HasSubstr("received 3 events, acknowledged 3"));

  Result info = Ok({"group", "info", "workers", "--json"});
  EXPECT_THAT(info.out, HasSubstr("\"pending\":0,"));
  EXPECT_THAT(info.out, HasSubstr("\"acked_total\":3,"));
  EXPECT_THAT(info.out, HasSubstr("\"consumer\":\"w1\",\"unacked\":0"));
}

TEST_F(LapsectlTest, ConsumeWithNoAckLeavesTheEventsLeasedToTheConsumer) {
  Ok({"group", "create", "workers", "--collections=orders"});
  for (const std::string key : {"o-1", "o-2"}) {
    Ok({"put", "orders", key});
    Ok({"expire", "orders", key, "--at=2000-01-01T00:00:00Z"});
  }
  Result consumed = Ok({"consume", "--group=workers", "--consumer=w1", "--max=2", "--no-ack"});
  EXPECT_THAT(consumed.out, HasSubstr("SEQUENCE  COLLECTION  KEY"));
  EXPECT_THAT(consumed.out, ContainsRegex("[0-9]+  orders  o-1  "));
  EXPECT_THAT(consumed.out, ContainsRegex("[0-9]+  orders  o-2  "));
  EXPECT_THAT(consumed.err, HasSubstr("received 2 events\n"));

  Result info = Ok({"group", "info", "workers", "--leases=10"});
  EXPECT_THAT(info.out, ContainsRegex("w1 +2 +20"));
  EXPECT_THAT(info.out, HasSubstr("LEASE_SEQUENCE"));
  EXPECT_EQ(Lines(info.out).size(), 2u + 2u + 3u) << info.out;
}

TEST_F(LapsectlTest, ConsumeFromAGroupThatDoesNotExistExitsWith1) {
  Result missing = Ctl({"consume", "--group=nope", "--consumer=w1"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
}

class MetricsLapsectlTest : public LapsectlTest {
 protected:
  MetricsLapsectlTest() : LapsectlTest({"--metrics_listen=127.0.0.1:0"}) {}

  // The metrics port lapsed's start line names.
  int MetricsPort() {
    const std::string& line = lapsed_.start_line();
    const std::string marker = "(metrics port ";
    const size_t at = line.find(marker);
    int port = 0;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(line.substr(at + marker.size(), line.find(')', at) - at - marker.size()),
                          &port)) {
      ADD_FAILURE() << line;
    }
    return port;
  }
};

TEST_F(MetricsLapsectlTest, ConsumeTakesAndAcksTheEventsOnTheConsumeStream) {
  Ok({"group", "create", "workers", "--collections=orders"});
  for (const std::string key : {"o-1", "o-2", "o-3"}) {
    Ok({"put", "orders", key});
    Ok({"expire", "orders", key, "--at=2000-01-01T00:00:00Z"});
  }
  Result consumed = Ok({"consume", "--group=workers", "--consumer=w1", "--max=2", "--json"});
  ExpectJsonLines(consumed.out, 2);
  EXPECT_THAT(consumed.err, HasSubstr("received 2 events, acknowledged 2"));
  Result info = Ok({"group", "info", "workers", "--json"});
  EXPECT_THAT(info.out, HasSubstr("\"acked_total\":2,"));
  EXPECT_THAT(info.out, HasSubstr("\"consumer\":\"w1\",\"unacked\":0"));

  // One Consume stream, ended OK by the server once lapsectl half-closed it;
  // no Poll, no unary Ack. The server counts the stream as it sends its
  // status, which in a slow build can come after lapsectl exited (the client
  // cancels a half-closed stream the server has not ended within its grace):
  // scraped until counted.
  const std::string consume_ok =
      "lapse_rpc_duration_seconds_count{code=\"OK\",method=\"/lapse.v1.LapseService/Consume\"}";
  const int port = MetricsPort();
  absl::StatusOr<MetricSamples> samples = ScrapeMetrics(port);
  for (const absl::Time give_up = absl::Now() + kPatience;
       samples.ok() && samples->count(consume_ok) == 0 && absl::Now() < give_up;) {
    samples = ScrapeMetrics(port);
  }
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->count(consume_ok), 1u);
  EXPECT_EQ(samples->at(consume_ok), 1);
  for (const auto& [name, value] : *samples) {
    EXPECT_THAT(name, Not(HasSubstr("LapseService/Poll\""))) << value;
    EXPECT_THAT(name, Not(HasSubstr("LapseService/Ack\""))) << value;
  }
}

// The token a stopped watch printed on stderr.
std::string PrintedToken(const std::string& err) {
  const std::string marker = "--resume-token=";
  const size_t at = err.find(marker);
  EXPECT_NE(at, std::string::npos) << err;
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return err.substr(begin, err.find_first_not_of("0123456789abcdef", begin) - begin);
}

TEST_F(LapsectlTest, WatchResumesFromThePrintedTokenAndRefusesOneOfAnotherStore) {
  std::unique_ptr<ChildProcess> watch = StartWatch({"--json"});
  Ok({"put", "c", "x"});
  Ok({"expire", "c", "x", "--at=2000-01-01T00:00:00Z"});
  watch->WaitForLine(ChildProcess::kStdout, "\"x\"");
  watch->Signal(SIGINT);
  const Result stopped = watch->Wait();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  const std::string token = PrintedToken(stopped.err);

  Ok({"put", "c", "y"});
  Ok({"expire", "c", "y", "--at=2000-01-01T00:00:00Z"});
  std::unique_ptr<ChildProcess> resumed =
      StartWatch({absl::StrCat("--resume-token=", token), "--json"});
  EXPECT_THAT(resumed->WaitForLine(ChildProcess::kStdout, "sequence"), HasSubstr("\"key\":\"y\""));
  resumed->Signal(SIGINT);
  const Result result = resumed->Wait();
  EXPECT_EQ(result.exit_code, 0);
  ExpectJsonLines(result.out, 1);

  // Version 1, store id 0, one partition (0) at sequence 0.
  const std::string foreign = "01" + std::string(32, '0') + "010000";
  const Result refused = Ctl({"watch", absl::StrCat("--resume-token=", foreign)});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("lapsectl watch: OUT_OF_RANGE"));
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("belongs to store ", std::string(32, '0'))));
}

TEST_F(LapsectlTest, WatchShowsATableFiltersAndResumesFrom) {
  std::unique_ptr<ChildProcess> watch = StartWatch({"--collections=mine"});
  Ok({"put", "other", "x"});
  Ok({"put", "mine", "y"});
  Ok({"expire", "other", "x", "--at=2000-01-01T00:00:00Z"});
  Ok({"expire", "mine", "y", "--at=2000-01-01T00:00:00Z"});
  const std::string row = watch->WaitForLine(ChildProcess::kStdout, "  mine  ");
  EXPECT_THAT(row, ContainsRegex("^[0-9]+  mine  y  2000-01-01T00:00:00.000Z  20"));
  watch->Signal(SIGINT);
  const Result stopped = watch->Wait();
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_THAT(Lines(stopped.out),
              ::testing::ElementsAre(StartsWith("SEQUENCE  COLLECTION  KEY"), row));

  // From the oldest: both events; from the first one's sequence: the second.
  std::unique_ptr<ChildProcess> oldest = StartWatch({"--oldest", "--json"});
  const uint64_t first = SequenceOf(oldest->WaitForLine(ChildProcess::kStdout, "\"x\""));
  oldest->WaitForLine(ChildProcess::kStdout, "\"y\"");
  oldest->Signal(SIGTERM);
  EXPECT_EQ(oldest->Wait().exit_code, 0);

  std::unique_ptr<ChildProcess> resumed = StartWatch({absl::StrCat("--from=", first), "--json"});
  EXPECT_THAT(resumed->WaitForLine(ChildProcess::kStdout, "sequence"), HasSubstr("\"key\":\"y\""));
  resumed->Signal(SIGINT);
  const Result result = resumed->Wait();
  EXPECT_EQ(result.exit_code, 0);
  ExpectJsonLines(result.out, 1);
}

// lapsectl against a lapsed with --auth_file: the token comes from
// --token-file or $LAPSE_TOKEN_FILE, never from the command line.
TEST(LapsectlAuthTest, ATokenFileFromTheFlagOrTheEnvironmentAuthenticates) {
  TempDir dir;
  const std::string auth = dir.path() + "/auth";
  const std::string token = dir.path() + "/token";
  WriteAuthFile(auth, TokenGrant("ctl-token", "read,write orders:"));
  std::ofstream(token) << "ctl-token\n";
  LapsedProcess lapsed(LAPSED_PATH, {"--auth_file=" + auth});
  ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
  const std::string addr = "--addr=" + lapsed.address();

  const Result anonymous = RunToCompletion(LAPSECTL_PATH, {addr, "put", "orders:1", "k"});
  EXPECT_EQ(anonymous.exit_code, 2);
  EXPECT_THAT(anonymous.err, HasSubstr("no credentials"));

  const Result put =
      RunToCompletion(LAPSECTL_PATH, {addr, "--token-file=" + token, "put", "orders:1", "k"});
  EXPECT_EQ(put.exit_code, 0) << put.err;
  const Result get =
      RunToCompletion(LAPSECTL_PATH, {addr, "get", "orders:1", "k"}, {"LAPSE_TOKEN_FILE=" + token});
  EXPECT_EQ(get.exit_code, 0) << get.err;

  const Result outside =
      RunToCompletion(LAPSECTL_PATH, {addr, "get", "users:1", "k"}, {"LAPSE_TOKEN_FILE=" + token});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_THAT(outside.err, HasSubstr("lacks permission \"read\" on collection \"users:1\""));

  const Result missing = RunToCompletion(
      LAPSECTL_PATH, {addr, "--token-file=" + dir.path() + "/none", "get", "orders:1", "k"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read the bearer token file"));
}

class SmallRetentionLapsectlTest : public LapsectlTest {
 protected:
  SmallRetentionLapsectlTest() : LapsectlTest({"--event_retention_events=2"}) {}
};

TEST_F(SmallRetentionLapsectlTest, WatchFromAPositionNoLongerHeldExitsWith2) {
  for (const char* key : {"a", "b", "c", "d"}) {
    Ok({"put", "coll", key});
    Ok({"expire", "coll", key, "--at=2000-01-01T00:00:00Z"});
  }
  std::unique_ptr<ChildProcess> oldest = StartWatch({"--oldest", "--json"});
  // Only the last two (c and d) are still held.
  const uint64_t third = SequenceOf(oldest->WaitForLine(ChildProcess::kStdout, "\"key\":\"c\""));
  oldest->Signal(SIGINT);
  EXPECT_EQ(oldest->Wait().exit_code, 0);

  const Result result = Ctl({"watch", absl::StrCat("--from=", third - 2)});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("lapsectl watch: OUT_OF_RANGE"));
  EXPECT_THAT(result.err, HasSubstr("no longer retained"));
}

// The certificates of TlsLapsectlTest, made before its lapsed starts. The
// server's names only "localhost": reached at 127.0.0.1, lapsectl must be
// told the name.
struct MtlsFiles {
  MtlsFiles()
      : ca(dir.path(), "ca"),
        server(ca.Issue("server", {"DNS:localhost"})),
        client(ca.Issue("client", {"URI:spiffe://cluster.local/ns/x/sa/y"})) {}

  TempDir dir;
  TestCa ca;
  TestCa::Issued server;
  TestCa::Issued client;
};

// A lapsed that requires mTLS, its health also served in plaintext.
class TlsLapsectlTest : public ::testing::Test {
 protected:
  TlsLapsectlTest()
      : lapsed_(LAPSED_PATH,
                {"--tls_cert=" + files_.server.cert_file, "--tls_key=" + files_.server.key_file,
                 "--tls_client_ca=" + files_.ca.cert_file(), "--health_listen=127.0.0.1:0"}) {}

  void SetUp() override { ASSERT_GT(lapsed_.port(), 0); }

  Result Ctl(std::vector<std::string> args, const std::string& address) {
    args.insert(args.begin(), "--addr=" + address);
    return RunToCompletion(LAPSECTL_PATH, args);
  }

  std::vector<std::string> Mtls(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"--tls-ca=" + files_.ca.cert_file(), "--tls-cert=" + files_.client.cert_file,
                 "--tls-key=" + files_.client.key_file, "--tls-server-name=localhost"});
    return args;
  }

  MtlsFiles files_;
  LapsedProcess lapsed_;
};

TEST_F(TlsLapsectlTest, TlsFlagsReachAnMtlsLapsed) {
  EXPECT_THAT(lapsed_.start_line(), HasSubstr("(mTLS)"));
  Result put = Ctl(Mtls({"put", "c", "k", "v"}), lapsed_.address());
  EXPECT_EQ(put.exit_code, 0) << put.err;
  Result get = Ctl(Mtls({"get", "c", "k"}), lapsed_.address());
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, ContainsRegex("k +v"));
  Result health = Ctl(Mtls({"health"}), lapsed_.address());
  EXPECT_EQ(health.exit_code, 0) << health.err;
}

TEST_F(TlsLapsectlTest, WithoutTheClientCertificateOrInPlaintextCallsFail) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"put", "c", "k"},
        std::vector<std::string>{"--tls-ca=" + files_.ca.cert_file(), "--tls-server-name=localhost",
                                 "put", "c", "k"}}) {
    Result refused = Ctl(args, lapsed_.address());
    EXPECT_EQ(refused.exit_code, 2) << absl::StrJoin(args, " ");
    EXPECT_THAT(refused.err, HasSubstr("lapsectl put: UNAVAILABLE"));
  }
}

TEST_F(TlsLapsectlTest, BadTlsFlagsExitWith2NamingThem) {
  Result half = Ctl({"--tls-cert=" + files_.client.cert_file, "put", "c", "k"}, lapsed_.address());
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
  const std::string missing = files_.dir.path() + "/missing.crt";
  Result unreadable = Ctl({"--tls-ca=" + missing, "put", "c", "k"}, lapsed_.address());
  EXPECT_EQ(unreadable.exit_code, 2);
  EXPECT_THAT(unreadable.err, HasSubstr(missing + ": cannot read it"));
}

TEST_F(TlsLapsectlTest, HealthListenAnswersInPlaintext) {
  const std::string line = lapsed_.start_line();
  const size_t at = line.find("(health port ");
  ASSERT_NE(at, std::string::npos) << line;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line.substr(at + 13, line.find(')', at) - at - 13), &port)) << line;
  const std::string health = absl::StrCat("127.0.0.1:", port);
  EXPECT_THAT(Ctl({"health"}, health).out, ContainsRegex("\\(server\\) +SERVING"));
  Result api = Ctl({"health", "--service=lapse.v1.LapseService"}, health);
  EXPECT_EQ(api.exit_code, 0) << api.err;
  // Only health: the API is not served there.
  Result put = Ctl({"put", "c", "k"}, health);
  EXPECT_EQ(put.exit_code, 2);
  EXPECT_THAT(put.err, HasSubstr("UNIMPLEMENTED"));
}

}  // namespace
}  // namespace lapse::testing

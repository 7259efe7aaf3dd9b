// What watch streams may cost: how many are open, the bytes their batches
// pin while being written, how long a write may stall, and how many streams
// one connection may open. The stalled clients are RawHttp2Watch: HTTP/2 by
// hand, reading nothing.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/watch_hub.h"
#include "testing/raw_http2_watch.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

// Waits (at most kPatience) until `done` holds for the server's watch hub.
bool AwaitHub(TestServer& server, const std::function<bool(const WatchHub::Stats&)>& done) {
  return server.server().watch_hub().AwaitStatsForTesting(done, kPatience);
}

TEST(WatchBoundsTest, StreamsPastTheServerLimitAreRefusedWithResourceExhausted) {
  ServerOptions options = TestOptions();
  options.max_watch_streams = 1;
  TestServer server(options);
  auto first = std::make_unique<Watcher>(server.stub(), AllEvents());
  Watcher refused(server.stub(), AllEvents());
  const grpc::Status status = refused.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("1 watch streams open, the limit (--max_watch_streams)"));

  // A closed stream gives its place back.
  first.reset();
  ASSERT_TRUE(AwaitHub(server, [](const WatchHub::Stats& hub) { return hub.streams == 0; }));
  Watcher next(server.stub(), AllEvents());
  PutTtl(server.stub(), "c", {"a"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"a"}, server.clock().Now());
  ASSERT_TRUE(next.WaitForEvents(1));
}

TEST(WatchBoundsTest, AStreamWhoseClientStopsReadingIsCancelledAfterTheStallTimeout) {
  ServerOptions options = TestOptions();
  options.watch_stall_timeout = absl::Milliseconds(200);
  TestServer server(options);
  PutTtl(server.stub(), "c", {"a"}, absl::Seconds(60));
  // A window of 0: the server cannot send a byte of any message.
  RawHttp2Watch stalled(server.port(), AllEvents(), /*window=*/0);
  ASSERT_TRUE(stalled.WaitForHeaders());
  ExpireNow(server.stub(), "c", {"a"}, server.clock().Now());

  EXPECT_NE(stalled.WaitForEnd(), "timeout");
  // Its slot and its pinned bytes are given back.
  EXPECT_TRUE(AwaitHub(server, [](const WatchHub::Stats& hub) {
    return hub.stalls == 1 && hub.streams == 0 && hub.pinned_bytes == 0;
  }));
}

TEST(WatchBoundsTest, StreamsWaitForPinnedBytesAndResumeWithNoGap) {
  ServerOptions options = TestOptions();
  // One batch in flight at a time, whatever its size.
  options.watch_pinned_bytes = 1;
  TestServer server(options);
  PutTtl(server.stub(), "c", {"a", "b"}, absl::Seconds(60));
  auto stalled = std::make_unique<RawHttp2Watch>(server.port(), AllEvents(), /*window=*/0);
  ASSERT_TRUE(stalled->WaitForHeaders());
  ExpireNow(server.stub(), "c", {"a"}, server.clock().Now());
  ASSERT_TRUE(AwaitHub(server, [](const WatchHub::Stats& hub) { return hub.pinned_bytes > 0; }));

  Watcher reader(server.stub(), AllEvents());
  const uint64_t before_b = server.server().store().events().last_sequence();
  ExpireNow(server.stub(), "c", {"b"}, server.clock().Now());
  ASSERT_TRUE(
      AwaitHub(server, [](const WatchHub::Stats& hub) { return hub.waiting_streams == 1; }));
  EXPECT_TRUE(reader.events().empty());

  // The stalled client goes away; its write fails and gives the bytes back.
  stalled.reset();
  ASSERT_TRUE(reader.WaitForEvents(1));
  ASSERT_EQ(reader.events().size(), 1u);
  EXPECT_EQ(reader.events()[0].key(), "b");
  EXPECT_EQ(reader.events()[0].sequence(), before_b + 1);
  EXPECT_TRUE(AwaitHub(server, [](const WatchHub::Stats& hub) {
    return hub.waiting_streams == 0 && hub.pinned_bytes == 0;
  }));
}

TEST(WatchBoundsTest, MemoryTheStreamsFreedIsReturnedToTheSystem) {
  TestServer server;
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_include_values(true);
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < 3; ++i) watchers.push_back(std::make_unique<Watcher>(server.stub(), request));
  // 16 MiB of values, sent to each of the three: 48 MiB of batches written
  // and freed, more than the 32 MiB after which the hub trims.
  ExpireLargeValues(server.stub(), server.clock().Now());
  for (auto& watcher : watchers) ASSERT_TRUE(watcher->WaitForEvents(64));
  EXPECT_TRUE(AwaitHub(server, [](const WatchHub::Stats& hub) { return hub.trims >= 1; }));
}

TEST(WatchBoundsTest, ConnectionsAreToldHowManyStreamsTheyMayOpen) {
  ServerOptions options = TestOptions();
  options.max_concurrent_streams = 7;
  TestServer server(options);
  RawHttp2Watch watch(server.port(), AllEvents(), /*window=*/65535);
  ASSERT_TRUE(watch.WaitForHeaders());
  constexpr uint16_t kMaxConcurrentStreams = 0x3;
  EXPECT_EQ(watch.ServerSetting(kMaxConcurrentStreams), 7u);
}

}  // namespace
}  // namespace lapse::testing

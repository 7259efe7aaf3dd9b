// Drain and shutdown: watch streams end with UNAVAILABLE and their resume
// point, health turns NOT_SERVING.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "testing/raw_http2_watch.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

TEST(LifecycleTest, ShutdownEndsWatchStreamsWithTheirLastDeliveredSequence) {
  TestServer server;
  PutTtl(server.stub(), "s", {"a", "b"}, absl::Seconds(1));
  Watcher busy(server.stub(), AllEvents());
  v1::WatchExpirationsRequest nothing_matches = AllEvents();
  nothing_matches.add_collections("quiet");
  Watcher idle(server.stub(), nothing_matches);
  const uint64_t start = server.server().store().events().last_sequence();
  server.ExpireAfter(absl::Seconds(1));
  ASSERT_TRUE(busy.WaitForEvents(2));
  const uint64_t delivered = busy.responses().back().examined_sequence();
  EXPECT_EQ(delivered, start + 2);

  server.server().Shutdown(absl::Seconds(5));

  const grpc::Status busy_status = busy.WaitForEnd();
  EXPECT_EQ(busy_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(busy_status.error_message(),
              HasSubstr(absl::StrCat("server shutting down; last delivered "
                                     "sequence ",
                                     delivered)));
  // A stream that was sent nothing resumes from where it started.
  const grpc::Status idle_status = idle.WaitForEnd();
  EXPECT_EQ(idle_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(idle_status.error_message(),
              HasSubstr(absl::StrCat("last delivered sequence ", start)));
}

TEST(LifecycleTest, RpcsAfterShutdownAreUnavailable) {
  TestServer server;
  server.server().Shutdown(absl::ZeroDuration());
  v1::GetCollectionRequest request;
  request.set_name("c");
  v1::GetCollectionResponse response;
  EXPECT_EQ(
      Call(server.stub(), &v1::LapseService::Stub::GetCollection, request, &response).error_code(),
      grpc::StatusCode::UNAVAILABLE);
}

TEST(LifecycleTest, HealthIsServingThenNotServingOnDrain) {
  TestServer server;
  std::unique_ptr<Health::Stub> health = Health::NewStub(server.NewChannel());
  for (const char* service : {"", "lapse.v1.LapseService"}) {
    HealthCheckRequest request;
    request.set_service(service);
    grpc::ClientContext context;
    GuardDeadline(&context);
    HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok()) << service;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }

  HealthCheckRequest request;
  request.set_service("lapse.v1.LapseService");
  grpc::ClientContext context;
  GuardDeadline(&context);
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch = health->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  std::thread drain([&server] { server.server().Shutdown(absl::Seconds(5)); });
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  // Like a load balancer that has seen enough. (gRPC's health service would
  // otherwise hold the stream open until the shutdown deadline.)
  context.TryCancel();
  while (watch->Read(&response)) {
    EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  }
  watch->Finish().IgnoreError();
  drain.join();
}

// A client that stops reading its socket: the server's socket write for its
// connection never completes, and gRPC 1.51 will not close a connection with a
// write pending, not even when Shutdown's deadline cancels the call.
TEST(LifecycleTest, ShutdownKeepsToItsGraceWhenAWatcherStopsReadingItsSocket) {
  ServerOptions options = TestOptions();
  options.watch_stall_timeout = absl::Seconds(1);
  TestServer server(options);
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_include_values(true);
  // Windows wide enough that only the sockets stop the server.
  RawHttp2Watch stalled(server.port(), request, /*window=*/1u << 30);
  ASSERT_TRUE(stalled.WaitForHeaders());
  ExpireLargeValues(server.stub(), server.clock().Now());
  // Cancelled as stalled, the stream still cannot end: its write is stuck.
  ASSERT_TRUE(server.server().watch_hub().AwaitStatsForTesting(
      [](const WatchHub::Stats& hub) { return hub.stalls == 1; }, kPatience));

  const absl::Duration grace = absl::Seconds(1);
  const absl::Time start = absl::Now();
  server.server().Shutdown(grace);
  // The slack only absorbs a loaded machine; without the fix this took ~18 s
  // (until the kernel's TCP_USER_TIMEOUT of 20 s gave up on the client).
  EXPECT_LT(absl::Now() - start, grace + absl::Seconds(5));
}

}  // namespace
}  // namespace lapse::testing

// Scrapes /metrics of a live LapseServer (and of lapsed) over HTTP and checks
// each family against what the test did to the server.
#include "server/metrics/server_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/auth_grants.h"
#include "testing/http_get.h"
#include "testing/lapsed_process.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using testing::TestServer;

constexpr char kPut[] = "/lapse.v1.LapseService/PutMembers";
constexpr char kWatch[] = "/lapse.v1.LapseService/WatchExpirations";

using Samples = testing::MetricSamples;

Samples Scrape(int port) {
  absl::StatusOr<Samples> samples = testing::ScrapeMetrics(port);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *std::move(samples) : Samples();
}

// Re-scrapes until `name` has `value`, at most kPatience. The in-flight gauge
// falls when gRPC destroys a finished call, which may be just after its client
// has the answer.
bool ScrapeUntil(int port, const std::string& name, double value) {
  const absl::Time deadline = absl::Now() + testing::kPatience;
  do {
    const Samples samples = Scrape(port);
    if (auto it = samples.find(name); it != samples.end() && it->second == value) return true;
  } while (absl::Now() < deadline);
  return false;
}

std::string Rpc(absl::string_view series, absl::string_view method, absl::string_view code) {
  return absl::StrCat("lapse_rpc_duration_seconds_", series, "{code=\"", code, "\",method=\"",
                      method, "\"}");
}

ServerOptions WithMetrics(ServerOptions options = testing::TestOptions()) {
  options.metrics_listen = "127.0.0.1:0";
  return options;
}

TEST(ServerMetricsTest, RpcsAreCountedByMethodAndStatusCode) {
  TestServer server(WithMetrics());
  ASSERT_GT(server.server().metrics_port(), 0);
  testing::PutTtl(server.stub(), "orders", {"a"}, absl::Seconds(10));
  testing::PutTtl(server.stub(), "orders", {"b"}, absl::Seconds(10));
  EXPECT_EQ(testing::PutPersistent(server.stub(), "", "k").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at(Rpc("count", kPut, "OK")), 2);
  EXPECT_EQ(samples.at(Rpc("count", kPut, "INVALID_ARGUMENT")), 1);
  EXPECT_TRUE(ScrapeUntil(server.server().metrics_port(),
                          absl::StrCat("lapse_rpcs_in_flight{method=\"", kPut, "\"}"), 0));
}

// A stream is counted when the server sends its status (the interceptor's
// PRE_SEND_STATUS), before its client can read it: a scrape once the client
// has the status sees it. Only the in-flight gauge falls later, when gRPC
// destroys the call.
TEST(ServerMetricsTest, AStreamIsCountedByTheTimeItsClientHasItsStatus) {
  TestServer server(WithMetrics());
  testing::CreateGroup(server.stub(), "billing");
  grpc::ClientContext context;
  testing::GuardDeadline(&context);
  std::unique_ptr<grpc::ClientReaderWriter<v1::ConsumeRequest, v1::ConsumeResponse>> stream =
      server.stub().Consume(&context);
  v1::ConsumeRequest start;
  start.mutable_start()->set_group("billing");
  start.mutable_start()->set_consumer("c1");
  ASSERT_TRUE(stream->Write(start));
  // Half-closed: the server ends the stream OK.
  ASSERT_TRUE(stream->WritesDone());
  v1::ConsumeResponse response;
  while (stream->Read(&response)) {
  }
  ASSERT_TRUE(stream->Finish().ok());

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at(Rpc("count", "/lapse.v1.LapseService/Consume", "OK")), 1);
}

TEST(ServerMetricsTest, CallsTheAuthFileRefusesAreCountedByCode) {
  testing::TempDir dir;
  ServerOptions options = WithMetrics();
  options.auth_file = dir.path() + "/auth";
  testing::WriteAuthFile(options.auth_file, testing::TokenGrant("t", "write orders:"));
  TestServer server(options);
  EXPECT_EQ(testing::PutPersistent(server.stub(), "orders", "k").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext context;
  testing::GuardDeadline(&context);
  context.AddMetadata("authorization", "Bearer t");
  v1::DeleteCollectionRequest request;
  request.set_name("orders");
  v1::DeleteCollectionResponse response;
  EXPECT_EQ(server.stub().DeleteCollection(&context, request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at("lapse_auth_denied_total{code=\"UNAUTHENTICATED\"}"), 1);
  EXPECT_EQ(samples.at("lapse_auth_denied_total{code=\"PERMISSION_DENIED\"}"), 1);
}

TEST(ServerMetricsTest, GaugesFollowMembersCollectionsAndDeadlines) {
  TestServer server(WithMetrics());
  testing::PutTtl(server.stub(), "orders", {"a", "b"}, absl::Seconds(10));
  ASSERT_TRUE(testing::PutPersistent(server.stub(), "carts", "c").ok());

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at("lapse_members"), 3);
  EXPECT_EQ(samples.at("lapse_collections"), 2);
  EXPECT_EQ(samples.at("lapse_pending_deadlines"), 2);
  EXPECT_EQ(samples.at("lapse_expiry_events_total"), 0);
}

TEST(ServerMetricsTest, ExpiryLagIsExpiredAtMinusDeadlineAndEventsAreCounted) {
  TestServer server(WithMetrics());
  testing::PutTtl(server.stub(), "orders", {"a", "b"}, absl::Seconds(10));
  testing::Watcher watcher(server.stub(), testing::AllEvents());
  EXPECT_EQ(Scrape(server.server().metrics_port())
                .at(absl::StrCat("lapse_rpcs_in_flight{method=\"", kWatch, "\"}")),
            1);

  server.ExpireAfter(absl::Seconds(12));  // Each expires 2 s after its deadline.
  ASSERT_TRUE(watcher.WaitForEvents(2));

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at("lapse_expiry_events_total"), 2);
  EXPECT_EQ(samples.at("lapse_expiry_lag_seconds_count"), 2);
  EXPECT_EQ(samples.at("lapse_expiry_lag_seconds_sum"), 4);
  EXPECT_EQ(samples.at("lapse_expiry_lag_seconds_bucket{le=\"1\"}"), 0);
  EXPECT_EQ(samples.at("lapse_expiry_lag_seconds_bucket{le=\"2.5\"}"), 2);
  EXPECT_EQ(samples.at("lapse_members"), 0);
  EXPECT_EQ(samples.at("lapse_pending_deadlines"), 0);
  EXPECT_EQ(samples.at("lapse_event_log_retained_events"), 2);
  EXPECT_GT(samples.at("lapse_event_log_retained_bytes"), 0);
  const std::vector<v1::ExpiryEvent> events = watcher.events();
  ASSERT_EQ(events.size(), 2u);
  // Sequences are exported as float64: compare as such.
  EXPECT_EQ(samples.at("lapse_event_log_oldest_sequence"),
            static_cast<double>(events.front().sequence()));
  EXPECT_EQ(samples.at("lapse_event_log_last_sequence"),
            static_cast<double>(events.back().sequence()));
}

TEST(ServerMetricsTest, EachConsumerGroupReportsItsLagPendingDeadLettersAndThroughput) {
  TestServer server(WithMetrics());
  v1::CreateConsumerGroupRequest create;
  create.set_name("billing");
  create.set_max_deliveries(1);
  v1::CreateConsumerGroupResponse created;
  ASSERT_TRUE(
      testing::Call(server.stub(), &v1::LapseService::Stub::CreateConsumerGroup, create, &created)
          .ok());
  testing::PutTtl(server.stub(), "orders", {"a", "b", "c"}, absl::Seconds(1));
  testing::Watcher watcher(server.stub(), testing::AllEvents());
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(3));
  v1::PollRequest poll;
  poll.set_group("billing");
  poll.set_consumer("w");
  poll.set_max_events(2);
  v1::PollResponse polled;
  ASSERT_TRUE(testing::Call(server.stub(), &v1::LapseService::Stub::Poll, poll, &polled).ok());
  v1::NackRequest nack;
  nack.set_group("billing");
  nack.set_consumer("w");
  v1::LeaseRef* lease = nack.add_leases();
  lease->set_sequence(polled.deliveries(0).event().sequence());
  lease->set_delivery_count(1);
  v1::NackResponse nacked;
  ASSERT_TRUE(testing::Call(server.stub(), &v1::LapseService::Stub::Nack, nack, &nacked).ok());

  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at("lapse_consumer_group_lag{group=\"billing\"}"), 1);
  EXPECT_EQ(samples.at("lapse_consumer_group_pending{group=\"billing\"}"), 1);
  EXPECT_EQ(samples.at("lapse_consumer_group_dead_lettered{group=\"billing\"}"), 1);
  EXPECT_EQ(samples.at("lapse_consumer_group_lost_sequences_total{group=\"billing\"}"), 0);
  EXPECT_EQ(samples.at("lapse_consumer_group_delivered_total{group=\"billing\"}"), 2);
  EXPECT_EQ(samples.at("lapse_consumer_group_acked_total{group=\"billing\"}"), 0);
}

TEST(ServerMetricsTest, DurableStoreReportsWalSnapshotAndRecovery) {
  testing::TempDir dir;
  ServerOptions options = WithMetrics();
  options.store.data_dir = dir.path();
  options.store.fsync = FsyncPolicy::kAlways;
  options.store.snapshot_after_bytes = 0;
  TestServer server(options);
  testing::PutTtl(server.stub(), "orders", {"a", "b"}, absl::Seconds(10));

  Samples samples = Scrape(server.server().metrics_port());
  // Under kAlways each write goes through to the disk in one call, timed as
  // the fsync it also is.
  EXPECT_EQ(samples.at("lapse_wal_write_seconds_count"), 0);
  EXPECT_GE(samples.at("lapse_wal_fsync_seconds_count"), 1);
  EXPECT_GT(samples.at("lapse_wal_bytes_written_total"), 0);
  EXPECT_GE(samples.at("lapse_recovery_duration_seconds"), 0);
  EXPECT_THAT(samples, Not(Contains(Key("lapse_snapshot_last_bytes"))));

  absl::StatusOr<SnapshotStats> snapshot =
      server.server().embedded_store().durable()->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  samples = Scrape(server.server().metrics_port());
  EXPECT_EQ(samples.at("lapse_snapshot_last_bytes"), static_cast<double>(snapshot->bytes));
  EXPECT_EQ(samples.at("lapse_snapshot_last_duration_seconds"),
            absl::ToDoubleSeconds(snapshot->took));
}

TEST(ServerMetricsTest, MemoryOnlyServerHasNoDurabilityFamilies) {
  TestServer server(WithMetrics());
  ASSERT_EQ(server.server().embedded_store().durable(), nullptr);
  const Samples samples = Scrape(server.server().metrics_port());
  EXPECT_THAT(samples, Not(Contains(Key("lapse_recovery_duration_seconds"))));
  EXPECT_THAT(samples, Not(Contains(Key("lapse_wal_bytes_written_total"))));
  EXPECT_THAT(samples, Contains(Key("lapse_members")));
}

TEST(ServerMetricsTest, StartFailsNamingTheMetricsAddressWhenItCannotListen) {
  testing::RefusedPort taken;
  ServerOptions options = WithMetrics();
  options.listen_address = "127.0.0.1:0";
  options.metrics_listen = absl::StrCat("127.0.0.1:", taken.port());
  LapseServer server(options);
  absl::StatusOr<int> port = server.Start();
  EXPECT_EQ(port.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(port.status().message(), HasSubstr(options.metrics_listen));
}

TEST(ServerMetricsTest, WithoutMetricsListenNothingIsServed) {
  TestServer server;
  EXPECT_EQ(server.server().metrics_port(), 0);
}

TEST(LapsedMetricsTest, MetricsListenServesMetricsAndTheStartLineNamesItsPort) {
  testing::LapsedProcess lapsed(LAPSED_PATH, {"--metrics_listen=127.0.0.1:0"});
  ASSERT_GT(lapsed.port(), 0);
  const std::string& line = lapsed.start_line();
  const int metrics_port = lapsed.metrics_port();
  ASSERT_GT(metrics_port, 0) << line;
  EXPECT_THAT(line,
              HasSubstr(absl::StrCat("metrics on http://127.0.0.1:", metrics_port, "/metrics")));
  const Samples samples = Scrape(metrics_port);
  EXPECT_EQ(samples.at("lapse_members"), 0);
}

}  // namespace
}  // namespace lapse

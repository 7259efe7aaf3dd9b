#include "server/callback_threads.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/lapse_server.h"
#include "server/metrics/rpc_interceptor.h"
#include "testing/http_get.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

// A started server with only `parking` registered, on a port of its own.
struct ParkingServer {
  explicit ParkingServer(CallbackThreadParking* parking) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(parking);
    server = builder.BuildAndStart();
  }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// A ParkingServer whose thread is parked.
class ParkedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(s.server, nullptr);
    ASSERT_TRUE(parking.Park(s.server.get()));
  }
  CallbackThreadParking parking;
  ParkingServer s{&parking};
};

// The status of a unary call to `method` at 127.0.0.1:`port`, over TCP.
grpc::Status CallOverTcp(int port, const std::string& method) {
  grpc::GenericStub stub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + testing::kPatience));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

TEST(CallbackThreadParkingTest, TheParkingMethodIsOneMetricsLeaveOut) {
  EXPECT_TRUE(
      absl::StartsWith(CallbackThreadParking::kMethod, RpcMetricsFactory::kUnobservedPrefix));
}

TEST(CallbackThreadParkingTest, ParksOneThreadPerProcessAgainOnceReleased) {
  CallbackThreadParking first;
  CallbackThreadParking second;
  ParkingServer a(&first);
  ParkingServer b(&second);
  ASSERT_NE(a.server, nullptr);
  ASSERT_NE(b.server, nullptr);
  EXPECT_TRUE(first.Park(a.server.get()));
  EXPECT_FALSE(second.Park(b.server.get()));
  first.Release();
  CallbackThreadParking third;
  ParkingServer c(&third);
  EXPECT_TRUE(third.Park(c.server.get()));
  third.Release();
  a.server->Shutdown();
  b.server->Shutdown();
  c.server->Shutdown();
}

TEST(CallbackThreadParkingTest, ParksAgainAfterReleaseAndServesBetween) {
  CallbackThreadParking parking;
  ParkingServer s(&parking);
  ASSERT_NE(s.server, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(parking.Park(s.server.get()));
    EXPECT_TRUE(parking.parked());
    EXPECT_FALSE(parking.Park(s.server.get()));
    EXPECT_EQ(CallOverTcp(s.port, "/lapse.v1.Nothing/Here").error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
    parking.Release();
    EXPECT_FALSE(parking.parked());
  }
  s.server->Shutdown();
}

// With a thread parked, the one left serves the calls; neither the parking
// method called from outside nor any other unregistered method parks one.
TEST_F(ParkedServerTest, CallsFromOutsideAreUnimplementedAndServedWhileParked) {
  EXPECT_EQ(CallOverTcp(s.port, CallbackThreadParking::kMethod).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(CallOverTcp(s.port, "/lapse.v1.Nothing/Here").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  parking.Release();
  s.server->Shutdown();
}

// lapsed --park_callback_thread: puts are answered, and shutdown with a grace
// period ends (the parked call would hold grpc::Server::Shutdown up).
TEST(CallbackThreadParkingTest, AServerWithAParkedThreadAnswersPutsAndShutsDown) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.park_callback_thread = true;
  LapseServer server(options);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  // The process's one parked thread is the server's.
  CallbackThreadParking other;
  ParkingServer s(&other);
  EXPECT_FALSE(other.Park(s.server.get()));
  s.server->Shutdown();
  std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 20; ++i) {
    v1::PutMembersRequest request;
    request.set_collection("c");
    request.add_members()->set_key(absl::StrCat("k", i));
    grpc::ClientContext context;
    v1::PutMembersResponse response;
    const grpc::Status status = stub->PutMembers(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.created_count(), 1u);
  }
  // The parked call is the server's own, not in its metrics.
  absl::StatusOr<testing::MetricSamples> metrics = testing::ScrapeMetrics(server.metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  bool puts_observed = false;
  for (const auto& [sample, value] : *metrics) {
    EXPECT_FALSE(absl::StrContains(sample, "lapse.internal")) << sample;
    if (absl::StrContains(sample, "PutMembers")) puts_observed = true;
  }
  EXPECT_TRUE(puts_observed);
  server.Shutdown(absl::Seconds(5));
}

// ParkingPolicy with its default options, sampled every 100 ms from a start
// at `t0` (the policy reads the times it is given, whatever the interval).
class ParkingPolicyTest : public ::testing::Test {
 protected:
  // The action for a sample `ms` after t0, with `cpu_ms` of CPU used since
  // the process started.
  ParkingPolicy::Action At(int ms, int cpu_ms, bool parked) {
    return policy_.Next(t0_ + absl::Milliseconds(ms), absl::Milliseconds(cpu_ms), parked);
  }
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
  ParkingPolicy policy_{ParkingPolicy::Options()};
};

using Action = ParkingPolicy::Action;

TEST_F(ParkingPolicyTest, ReleasesAfterTwoIntervalsBusyAndParksAgainFiveSecondsLater) {
  EXPECT_EQ(At(0, 0, true), Action::kNone);
  EXPECT_EQ(At(100, 95, true), Action::kNone);  // 0.95 of a core: one busy interval
  EXPECT_EQ(At(200, 185, true), Action::kRelease);
  EXPECT_EQ(At(300, 285, false), Action::kNone);
  EXPECT_EQ(At(5100, 2000, false), Action::kNone);
  EXPECT_EQ(At(5200, 2100, false), Action::kPark);
  // Parked again, the samples start anew: one busy interval is not enough.
  EXPECT_EQ(At(5300, 2200, true), Action::kNone);
  EXPECT_EQ(At(5400, 2300, true), Action::kRelease);
}

TEST_F(ParkingPolicyTest, KeepsTheThreadParkedWhileAnyIntervalIsBelowTheBusyShare) {
  EXPECT_EQ(At(0, 0, true), Action::kNone);
  int cpu = 0;
  for (int ms = 100; ms <= 2000; ms += 100) {
    // Busy and not, in turn: 0.95 and 0.5 of a core.
    cpu += (ms / 100) % 2 == 0 ? 95 : 50;
    EXPECT_EQ(At(ms, cpu, true), Action::kNone) << ms;
  }
}

TEST_F(ParkingPolicyTest, NeverParksAThreadItDidNotRelease) {
  // Never parked (refused, or released by someone else): not the policy's.
  for (int ms = 0; ms <= 10000; ms += 100) EXPECT_EQ(At(ms, ms, false), Action::kNone) << ms;
}

TEST_F(ParkingPolicyTest, ABusyIntervalOnlyCountsOnceSampledBefore) {
  // The first sample has nothing to compare with, however much CPU the
  // process used before it.
  EXPECT_EQ(At(0, 5000, true), Action::kNone);
  EXPECT_EQ(At(100, 5010, true), Action::kNone);
  EXPECT_EQ(At(200, 5020, true), Action::kNone);
}

// A policy sampling every millisecond that finds every interval busy.
ParkingPolicy::Options EveryIntervalBusy(absl::Duration released_for) {
  ParkingPolicy::Options options;
  options.interval = absl::Milliseconds(1);
  options.busy_share = 0;
  options.busy_samples = 1;
  options.released_for = released_for;
  return options;
}

// A governor whose policy finds every interval busy lets the server's thread
// go; the server goes on answering, and shuts down.
TEST_F(ParkedServerTest, AGovernorReleasesTheThreadWhenThePolicySaysBusy) {
  ParkingGovernor governor(&parking, s.server.get(), EveryIntervalBusy(absl::InfiniteDuration()));
  EXPECT_TRUE(parking.AwaitParked(false, 1, absl::Now() + testing::kPatience));
  EXPECT_EQ(CallOverTcp(s.port, "/lapse.v1.Nothing/Here").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  governor.Stop();
  EXPECT_FALSE(parking.parked());
  s.server->Shutdown();
}

// Released for no time, the thread is parked again by the governor.
TEST_F(ParkedServerTest, AGovernorParksTheThreadAgainOnceReleasedForLongEnough) {
  ParkingGovernor governor(&parking, s.server.get(), EveryIntervalBusy(absl::ZeroDuration()));
  // Parked by the test, then by the governor, then released again.
  EXPECT_TRUE(parking.AwaitParked(false, 2, absl::Now() + testing::kPatience));
  governor.Stop();
  parking.Release();
  s.server->Shutdown();
}

}  // namespace
}  // namespace lapse

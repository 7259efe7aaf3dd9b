#include "server/callback_threads.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/lapse_server.h"
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

// With a thread parked, the one left serves the calls; neither the parking
// method called from outside nor any other unregistered method parks one.
TEST(CallbackThreadParkingTest, CallsFromOutsideAreUnimplementedAndServedWhileParked) {
  CallbackThreadParking parking;
  ParkingServer s(&parking);
  ASSERT_NE(s.server, nullptr);
  ASSERT_TRUE(parking.Park(s.server.get()));
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
  server.Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace lapse

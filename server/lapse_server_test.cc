#include "server/lapse_server.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/service/operation.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

// Server reflection describes what the descriptor pool holds. gRPC's own
// health service does not put grpc.health.v1 there; the server must. This
// binary references nothing of the health proto itself, so only the server's
// own reference can have linked it in.
TEST(LapseServerTest, ReflectionCanDescribeTheHealthService) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  LapseServer server(options);
  ASSERT_TRUE(server.Start().ok());
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  EXPECT_NE(pool->FindServiceByName("grpc.health.v1.Health"), nullptr);
  EXPECT_NE(pool->FindServiceByName("lapse.v1.LapseService"), nullptr);
  server.Shutdown(absl::ZeroDuration());
}

// A put of 1000 members grows its arena into blocks of the pool
// (server/service/operation.h); once no request asks for one for a while,
// the server unmaps them all.
TEST(LapseServerTest, UnmapsTheArenasPooledBlocksOnceRequestsStop) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  LapseServer server(options);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()));
  v1::PutMembersRequest request;
  request.set_collection("c");
  for (int i = 0; i < 1000; ++i) {
    v1::MemberWrite* member = request.add_members();
    member->set_key(absl::StrCat("key-", 1000000000 + i));
    member->set_value(absl::StrCat("value-", 1000000000 + i));
    member->mutable_ttl()->set_seconds(3600);
  }
  grpc::ClientContext context;
  v1::PutMembersResponse response;
  const grpc::Status status = stub->PutMembers(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(MessageArenaBlocks().AwaitNothingMappedForTesting(testing::kPatience));
  server.Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace lapse

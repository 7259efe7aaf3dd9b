#include "server/lapse_server.h"

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace lapse

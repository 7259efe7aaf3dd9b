// A full disk through the whole server: a LapseServer in-process with a data
// directory whose write-ahead log fails on demand (testing::DiskFault). A
// write whose batch failed is answered RESOURCE_EXHAUSTED, is seen by no read
// and is not there after a restart; health turns NOT_SERVING for the service
// and /metrics shows lapse_wal_refusing_writes while writes are refused, and
// everything resumes by itself once the disk heals.
#include <cerrno>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "testing/disk_fault.h"
#include "testing/http_get.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ServerOptions OnFaultyDisk(const TempDir& dir, DiskFault* disk) {
  ServerOptions options = TestOptions();
  options.store.data_dir = dir.path();
  // Every acknowledged write is fsynced, so a failing fsync never concerns
  // one already acknowledged.
  options.store.fsync = FsyncPolicy::kAlways;
  options.store.wal_retry_interval = absl::Milliseconds(5);
  options.store.disk_fault_for_testing = disk->Hook();
  options.metrics_listen = "127.0.0.1:0";
  return options;
}

v1::GetMembersResponse Get(v1::LapseService::Stub& stub, const std::vector<std::string>& keys) {
  return CallOk(stub, &v1::LapseService::Stub::GetMembers,
                KeysRequest<v1::GetMembersRequest>("orders", keys));
}

std::vector<bool> Found(const v1::GetMembersResponse& response) {
  std::vector<bool> found;
  for (const v1::GetMemberResult& r : response.results()) found.push_back(r.found());
  return found;
}

HealthCheckResponse::ServingStatus CheckHealth(TestServer& server, const std::string& service) {
  std::unique_ptr<Health::Stub> health = Health::NewStub(server.NewChannel());
  HealthCheckRequest request;
  request.set_service(service);
  grpc::ClientContext context;
  GuardDeadline(&context);
  HealthCheckResponse response;
  EXPECT_TRUE(health->Check(&context, request, &response).ok());
  return response.status();
}

TEST(DiskFullTest, AFailedWriteIsUndoneRefusedAndWritesResumeOnceTheDiskHeals) {
  TempDir dir;
  DiskFault disk;
  {
    TestServer server(OnFaultyDisk(dir, &disk));
    v1::LapseService::Stub& stub = server.stub();
    ASSERT_TRUE(PutPersistent(stub, "orders", "kept").ok());
    PutTtl(stub, "orders", {"due"}, absl::Seconds(1));
    Watcher watcher(stub, AllEvents());

    std::unique_ptr<Health::Stub> health = Health::NewStub(server.NewChannel());
    HealthCheckRequest request;
    request.set_service("lapse.v1.LapseService");
    grpc::ClientContext context;
    GuardDeadline(&context);
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> readiness =
        health->Watch(&context, request);
    HealthCheckResponse health_now;
    ASSERT_TRUE(readiness->Read(&health_now));
    EXPECT_EQ(health_now.status(), HealthCheckResponse::SERVING);

    disk.Fail(ENOSPC);
    const grpc::Status failed = PutPersistent(stub, "orders", "lost");
    EXPECT_EQ(failed.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(failed.error_message(), HasSubstr("disk full"));
    EXPECT_THAT(failed.error_message(), HasSubstr("No space left on device"));
    ASSERT_TRUE(readiness->Read(&health_now));
    EXPECT_EQ(health_now.status(), HealthCheckResponse::NOT_SERVING);
    EXPECT_EQ(CheckHealth(server, ""), HealthCheckResponse::SERVING) << "the process is alive";
    // Metrics say so too.
    absl::StatusOr<MetricSamples> metrics = ScrapeMetrics(server.server().metrics_port());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_EQ(metrics->at("lapse_wal_refusing_writes"), 1);
    EXPECT_EQ(metrics->at("lapse_wal_write_failures_total"), 1);
    EXPECT_EQ(metrics->at("lapse_wal_batches_rolled_back_total"), 1);

    // The failed write is seen by no read.
    EXPECT_THAT(Found(Get(stub, {"kept", "lost"})), ElementsAre(true, false));
    v1::GetCollectionRequest collection;
    collection.set_name("orders");
    v1::GetCollectionResponse info;
    ASSERT_TRUE(Call(stub, &v1::LapseService::Stub::GetCollection, collection, &info).ok());
    EXPECT_EQ(info.collection().member_count(), 2u);
    v1::ListMembersRequest list;
    list.set_collection("orders");
    v1::ListMembersResponse listed;
    ASSERT_TRUE(Call(stub, &v1::LapseService::Stub::ListMembers, list, &listed).ok());
    ASSERT_EQ(listed.members_size(), 2);
    EXPECT_EQ(listed.members(0).key(), "due");
    EXPECT_EQ(listed.members(1).key(), "kept");
    // Further writes are refused up front, with the same reason.
    EXPECT_EQ(PutPersistent(stub, "orders", "refused").error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
    // Nothing expires while nothing can be recorded, and a read that meets
    // a member past its deadline fails rather than return it.
    server.ExpireAfter(absl::Seconds(2));
    v1::GetMembersResponse ignored;
    const grpc::Status read =
        Call(stub, &v1::LapseService::Stub::GetMembers,
             KeysRequest<v1::GetMembersRequest>("orders", {"kept"}), &ignored);
    EXPECT_EQ(read.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(read.error_message(), HasSubstr("past their deadline"));

    disk.Heal();
    ASSERT_TRUE(readiness->Read(&health_now));
    EXPECT_EQ(health_now.status(), HealthCheckResponse::SERVING);
    ASSERT_TRUE(PutPersistent(stub, "orders", "after").ok());
    metrics = ScrapeMetrics(server.server().metrics_port());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_EQ(metrics->at("lapse_wal_refusing_writes"), 0);
    // The expirer was woken when writes resumed.
    ASSERT_TRUE(watcher.WaitForEvents(1));
    EXPECT_EQ(watcher.events()[0].key(), "due");
    context.TryCancel();
  }
  TestServer restarted(OnFaultyDisk(dir, &disk));
  EXPECT_THAT(Found(Get(restarted.stub(), {"kept", "lost", "after", "refused", "due"})),
              ElementsAre(true, false, true, false, false));
}

}  // namespace
}  // namespace lapse::testing

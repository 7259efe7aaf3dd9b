// WatchExpirations through the gRPC service over the Redis Cluster store
// (issue #11): two lapsed replicas — each a RedisClusterStore, the watch and
// group hubs, LapseServiceImpl and a gRPC server on 127.0.0.1:0 — over one
// cluster. The first reaps: its reaper expires the members, advances the
// delivery watermarks and hands them to its event source. The second does
// not, and is told of the watermarks by the test, in another order, so that
// its events interleave differently.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/base/clock.h"
#include "server/service/group_hub.h"
#include "server/service/lapse_service.h"
#include "server/service/watch_hub.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "testing/redis_cluster.h"
#include "testing/redis_partitions.h"
#include "testing/test_server.h"

namespace lapse {
namespace {

using ::lapse::redis::RedisClusterStore;
using ::lapse::redis::RedisClusterStoreOptions;
using ::lapse::testing::kPatience;
using ::lapse::testing::PutTtl;
using ::lapse::testing::RedisCluster;
using ::lapse::testing::Watcher;

constexpr int kPartitions = 4;

// One lapsed replica's service over the store, without the rest of lapsed.
class ServedReplica {
 public:
  ServedReplica(const RedisCluster& cluster, const Clock* clock, bool reap)
      : hub_({.read_limits = {.max_events = 2}}), groups_({}) {
    RedisClusterStoreOptions options;
    options.router.seeds = cluster.seeds();
    options.partitions = kPartitions;
    options.script_clock = clock;
    options.reaper_clock = clock;
    options.reap = reap;
    options.on_events_readable = [this](uint64_t last) {
      hub_.OnReadable(last);
      groups_.OnEventsReadable();
    };
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(options);
    status_ = store.status();
    if (!store.ok()) return;
    store_ = std::move(*store);
    service_ = std::make_unique<LapseServiceImpl>(store_.get(), &hub_, &groups_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      status_ = absl::UnavailableError("cannot listen on 127.0.0.1:0");
      return;
    }
    stub_ = v1::LapseService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  ~ServedReplica() {
    if (service_ != nullptr) service_->StartDraining();
    hub_.Shutdown();
    groups_.Shutdown();
    if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }

  const absl::Status& status() const { return status_; }
  RedisClusterStore& store() { return *store_; }
  v1::LapseService::Stub& stub() { return *stub_; }

 private:
  // Destroyed last: the store tells them of new events until it is gone.
  WatchHub hub_;
  GroupHub groups_;
  absl::Status status_;
  std::unique_ptr<RedisClusterStore> store_;
  std::unique_ptr<LapseServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::LapseService::Stub> stub_;
};

class RedisWatchTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.status().ok()) << cluster_.status(); }

  // Sets partition p's watermark to its last sequence and hands it to
  // `replica`'s event source; returns the sequence.
  uint64_t Deliver(ServedReplica& replica, int p) {
    const uint64_t last = ::lapse::testing::LastSequence(cluster_, replica.store(), p);
    ::lapse::testing::SetDelivered(cluster_, replica.store(), p, last);
    replica.store().event_source().Advance(p, last);
    return last;
  }

  RedisCluster cluster_;
  // Scripts' and the reaper's time; a whole second, so that a member put
  // with a one-second TTL is due one second later.
  FakeClock clock_{absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()))};
};

TEST_F(RedisWatchTest, AWatcherResumesOnAnotherReplicaByTokenWithoutGapOrDuplicate) {
  ServedReplica a(cluster_, &clock_, /*reap=*/true);
  ASSERT_TRUE(a.status().ok()) << a.status();
  ServedReplica b(cluster_, &clock_, /*reap=*/false);
  ASSERT_TRUE(b.status().ok()) << b.status();
  ASSERT_TRUE(a.store().reaper()->AwaitStats(
      [](const redis::Reaper::Stats& s) { return s.owned == kPartitions; }, kPatience));
  // One collection in each partition, three members each.
  const std::vector<std::string> collections =
      ::lapse::testing::CollectionPerPartition(a.store(), "orders:");
  Watcher first(a.stub(), ::lapse::testing::AllEvents());
  for (const std::string& c : collections)
    PutTtl(a.stub(), c, {"k1", "k2", "k3"}, absl::Seconds(1));
  clock_.Advance(absl::Seconds(1));
  a.store().WakeReaperForTesting();
  const size_t total = 3 * kPartitions;
  ASSERT_TRUE(first.WaitForEvents(total));
  first.Cancel();

  // Resume on B, which reads the partitions in the other order, after the
  // third response (batches of two events).
  for (int p = kPartitions - 1; p >= 0; --p) Deliver(b, p);
  const std::vector<v1::WatchExpirationsResponse> responses = first.responses();
  ASSERT_GE(responses.size(), 3u);
  std::vector<v1::ExpiryEvent> seen;
  for (size_t r = 0; r < 3; ++r) {
    for (const v1::ExpiryEvent& e : responses[r].events()) seen.push_back(e);
  }
  v1::WatchExpirationsRequest resume;
  resume.set_start_position(v1::START_POSITION_AFTER_TOKEN);
  resume.set_resume_token(responses[2].resume_token());
  Watcher second(b.stub(), resume);
  ASSERT_TRUE(second.WaitForEvents(total - seen.size()));
  for (const v1::ExpiryEvent& e : second.events()) seen.push_back(e);

  std::map<std::string, std::vector<std::string>> keys;
  std::set<std::pair<std::string, std::string>> distinct;
  for (const v1::ExpiryEvent& e : seen) {
    keys[e.collection()].push_back(e.key());
    distinct.insert({e.collection(), e.key()});
  }
  EXPECT_EQ(seen.size(), total);
  EXPECT_EQ(distinct.size(), total) << "an event came twice";
  for (const std::string& c : collections) {
    EXPECT_EQ(keys[c], (std::vector<std::string>{"k1", "k2", "k3"})) << c;
  }
  EXPECT_EQ(second.responses().back().store_id(), a.store().events().store_id().ToString());
}

}  // namespace
}  // namespace lapse

#include "server/storage/redis/partition_owners.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/base/clock.h"

namespace lapse::redis {
namespace {

constexpr int kPartitions = 64;

std::map<std::string, int> Counts(const std::vector<std::string>& live) {
  std::map<std::string, int> counts;
  for (int p = 0; p < kPartitions; ++p) ++counts[OwnerOf(p, live)];
  return counts;
}

TEST(PartitionOwnersTest, AReplicaWhoseLeaseExpiredIsNotLive) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  const absl::Duration heartbeat = absl::Seconds(1);
  const std::vector<ReplicaLease> leases = {{"b", clock.Now() + 3 * heartbeat},
                                            {"a", clock.Now() + heartbeat}};
  EXPECT_EQ(LiveReplicas(leases, clock.Now()), (std::vector<std::string>{"a", "b"}));
  clock.Advance(heartbeat);
  EXPECT_EQ(LiveReplicas(leases, clock.Now()), (std::vector<std::string>{"b"}));
  clock.Advance(2 * heartbeat);
  EXPECT_TRUE(LiveReplicas(leases, clock.Now()).empty());
}

TEST(PartitionOwnersTest, EveryPartitionHasOneLiveOwnerAndTheyShare) {
  const std::vector<std::string> live = {"a", "b", "c"};
  const std::map<std::string, int> counts = Counts(live);
  EXPECT_EQ(counts.count(""), 0u);
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [id, n] : counts) EXPECT_GE(n, kPartitions / 6) << id;
  EXPECT_EQ(OwnerOf(0, {}), "");
}

TEST(PartitionOwnersTest, ADeadReplicasPartitionsMoveAndNoOthers) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  const std::vector<ReplicaLease> leases = {{"a", clock.Now() + absl::Seconds(3)},
                                            {"b", clock.Now() + absl::Seconds(9)},
                                            {"c", clock.Now() + absl::Seconds(9)}};
  const std::vector<std::string> before = LiveReplicas(leases, clock.Now());
  clock.Advance(absl::Seconds(3));
  const std::vector<std::string> after = LiveReplicas(leases, clock.Now());
  ASSERT_EQ(after, (std::vector<std::string>{"b", "c"}));
  for (int p = 0; p < kPartitions; ++p) {
    const std::string owner = OwnerOf(p, before);
    if (owner != "a") {
      EXPECT_EQ(OwnerOf(p, after), owner) << p;
    }
    EXPECT_NE(OwnerOf(p, after), "a") << p;
  }
}

}  // namespace
}  // namespace lapse::redis

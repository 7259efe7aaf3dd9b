#include "testing/redis_cluster.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lapse::testing {
namespace {

TEST(RedisClusterTest, ComesUpAndServesAKeyOnEachMaster) {
  RedisCluster cluster;
  ASSERT_TRUE(cluster.status().ok()) << cluster.status();
  const std::vector<int> masters = cluster.MasterPorts();
  ASSERT_EQ(masters.size(), RedisCluster::kMasters);
  for (int master : masters) {
    // A key this master owns: one whose SET it does not redirect.
    bool served = false;
    for (int i = 0; i < 1000 && !served; ++i) {
      const std::string key = absl::StrCat("key", i);
      absl::StatusOr<std::string> set = cluster.Command(master, {"SET", key, "value"});
      ASSERT_TRUE(set.ok()) << set.status();
      if (absl::StartsWith(*set, "MOVED")) continue;
      ASSERT_EQ(*set, "OK");
      absl::StatusOr<std::string> get = cluster.Command(master, {"GET", key});
      ASSERT_TRUE(get.ok()) << get.status();
      EXPECT_EQ(*get, "value");
      served = true;
    }
    EXPECT_TRUE(served) << "no key served by the master on port " << master;
  }
}

}  // namespace
}  // namespace lapse::testing

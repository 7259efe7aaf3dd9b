// SharedRedisClusterTest: a fixture base for a test binary whose tests share
// one RedisCluster (redis_cluster.h) — started before the suite's first test,
// emptied (FLUSHALL on every master) before each test, stopped after the
// last — so that a binary pays for one cluster start-up, not one per test.
// Register such a binary with ctest as one test (add_test), not with
// gtest_discover_tests, which would run each test in a process of its own.
//
//   class MyStoreTest : public lapse::testing::SharedRedisClusterTest {
//    protected:
//     void SetUp() override {
//       SharedRedisClusterTest::SetUp();
//       if (HasFatalFailure()) return;
//       ... open stores with cluster_->seeds() ...
//     }
//   };
#ifndef LAPSE_TESTING_SHARED_REDIS_CLUSTER_H_
#define LAPSE_TESTING_SHARED_REDIS_CLUSTER_H_

#include "gtest/gtest.h"
#include "testing/redis_cluster.h"

namespace lapse::testing {

class SharedRedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new RedisCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(cluster_->status().ok()) << cluster_->status();
    const absl::Status emptied = cluster_->FlushAll();
    ASSERT_TRUE(emptied.ok()) << emptied;
  }

  static inline RedisCluster* cluster_ = nullptr;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_SHARED_REDIS_CLUSTER_H_

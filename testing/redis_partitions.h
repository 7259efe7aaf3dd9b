// Test support for driving the partitions of a RedisClusterStore by hand:
// a collection in each partition, members expired with a FakeClock as the
// scripts' time, and a partition's delivery watermark set as a reaper would.
//
//   class MyTest : public lapse::testing::RedisPartitionsTest {
//     // SetUp: store_ = OpenStore(StoreOptions(4));
//   };
//   const std::vector<std::string> collections = CollectionPerPartition(*store_, "orders:");
//   const ExpiredMembers expired = ExpireMembers(*store_, collections[1], 3);
//   SetDelivered(*cluster_, *store_, 1, expired.sequence);
//
// Thread-compatible, as a gtest fixture is.
#ifndef LAPSE_TESTING_REDIS_PARTITIONS_H_
#define LAPSE_TESTING_REDIS_PARTITIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/base/clock.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/shared_redis_cluster.h"

namespace lapse::testing {

// One collection in each partition of `store`, indexed by partition: the
// first of `prefix`0, `prefix`1, ... that falls in it.
inline std::vector<std::string> CollectionPerPartition(const redis::RedisClusterStore& store,
                                                       absl::string_view prefix) {
  std::vector<std::string> collections(store.partitions());
  for (int i = 0, found = 0; found < store.partitions(); ++i) {
    std::string name = absl::StrCat(prefix, i);
    std::string& slot = collections[store.PartitionOf(name)];
    if (slot.empty()) {
      slot = std::move(name);
      ++found;
    }
  }
  return collections;
}

// Partition `p`'s last sequence, read from Redis.
inline uint64_t LastSequence(const RedisCluster& cluster, const redis::RedisClusterStore& store,
                             int p) {
  const std::string key = redis::PartitionKeys(store.TagOf(p)).sequence;
  absl::StatusOr<std::string> reply = cluster.CommandOnOwner(key, {"GET", key});
  uint64_t sequence = 0;
  EXPECT_TRUE(reply.ok() && absl::SimpleAtoi(*reply, &sequence)) << reply.status();
  return sequence;
}

// Sets partition `p`'s delivery watermark in Redis to `sequence`, as a
// reaper does after WAIT.
inline void SetDelivered(const RedisCluster& cluster, const redis::RedisClusterStore& store, int p,
                         uint64_t sequence) {
  const std::string key = redis::PartitionKeys(store.TagOf(p)).delivered;
  EXPECT_EQ(cluster.CommandOnOwner(key, {"SET", key, absl::StrCat(sequence)}).value_or(""), "OK");
}

// Members ExpireMembers expired, and the last sequence of their partition.
struct ExpiredMembers {
  std::vector<std::string> keys;
  uint64_t sequence = 0;
};

// A SharedRedisClusterTest whose stores take clock_ as the scripts' time.
class RedisPartitionsTest : public SharedRedisClusterTest {
 protected:
  // Options of a store over the cluster with `partitions` partitions and
  // clock_ as the scripts' time that does not reap: the test expires members
  // (ExpireMembers) and moves the watermarks (SetDelivered) itself.
  redis::RedisClusterStoreOptions StoreOptions(int partitions) {
    redis::RedisClusterStoreOptions options;
    options.router.seeds = cluster_->seeds();
    options.partitions = partitions;
    options.script_clock = &clock_;
    options.reap = false;
    return options;
  }

  // The store `options` open; null, with a test failure, if it does not open.
  static std::unique_ptr<redis::RedisClusterStore> OpenStore(
      redis::RedisClusterStoreOptions options) {
    absl::StatusOr<std::unique_ptr<redis::RedisClusterStore>> store =
        redis::RedisClusterStore::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return nullptr;
    return *std::move(store);
  }

  // Puts `n` new members ("k00000", "k00001", ... with values "v:<key>") in
  // `collection` through `store` with 1 s TTLs, moves clock_ past them and
  // reads them: the read expires each, with its event in the partition's
  // stream.
  ExpiredMembers ExpireMembers(redis::RedisClusterStore& store, const std::string& collection,
                               int n) {
    ExpiredMembers expired;
    std::vector<std::string> values;
    for (int i = 0; i < n; ++i) {
      expired.keys.push_back(absl::StrFormat("k%05d", next_key_++));
      values.push_back("v:" + expired.keys.back());
    }
    std::vector<MemberWrite> writes;
    std::vector<absl::string_view> keys;
    for (int i = 0; i < n; ++i) {
      writes.push_back({.key = expired.keys[i],
                        .value = values[i],
                        .expiration = Expiration::Ttl(absl::Seconds(1))});
      keys.push_back(expired.keys[i]);
    }
    absl::StatusOr<std::vector<PutResult>> put = Await<std::vector<PutResult>>(
        [&](auto done) { store.PutMembers(collection, writes, {}, std::move(done)); });
    EXPECT_TRUE(put.ok()) << put.status();
    clock_.Advance(absl::Seconds(2));
    EXPECT_TRUE(Await<std::vector<GetResult>>([&](auto done) {
                  store.GetMembers(collection, keys, Expiration::None(), std::move(done));
                }).ok());
    expired.sequence = LastSequence(*cluster_, store, store.PartitionOf(collection));
    return expired;
  }

  // On a whole millisecond, as the scripts' times are.
  FakeClock clock_{absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()))};

 private:
  int next_key_ = 0;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_REDIS_PARTITIONS_H_

#include "server/storage/redis/redis_cluster_store.h"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/storage/redis/collection_scripts.h"
#include "server/storage/redis/key_slot.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::Await;
using ::lapse::testing::RedisCluster;
using ::lapse::testing::WaitWithPatience;

class RedisClusterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.status().ok()) << cluster_.status();
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(Options());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  RedisClusterStoreOptions Options() const {
    RedisClusterStoreOptions options;
    options.router.seeds = cluster_.seeds();
    options.partitions = 8;
    return options;
  }

  absl::StatusOr<std::vector<PutResult>> Put(absl::string_view collection,
                                             std::vector<MemberWrite> writes,
                                             PutOptions options = {}) {
    return Await<std::vector<PutResult>>(
        [&](auto done) { store_->PutMembers(collection, writes, options, std::move(done)); });
  }
  absl::StatusOr<std::vector<GetResult>> Get(absl::string_view collection,
                                             std::vector<absl::string_view> keys,
                                             Expiration refresh = Expiration::None()) {
    return Await<std::vector<GetResult>>(
        [&](auto done) { store_->GetMembers(collection, keys, refresh, std::move(done)); });
  }
  absl::StatusOr<std::vector<bool>> Remove(absl::string_view collection,
                                           std::vector<absl::string_view> keys) {
    return Await<std::vector<bool>>(
        [&](auto done) { store_->RemoveMembers(collection, keys, std::move(done)); });
  }

  // The master that serves `key`.
  int OwnerOf(const std::string& key) const {
    for (int port : cluster_.MasterPorts()) {
      absl::StatusOr<std::string> reply = cluster_.Command(port, {"EXISTS", key});
      if (reply.ok() && !absl::StartsWith(*reply, "MOVED")) return port;
    }
    return 0;
  }
  // Runs a command on the master of `key`.
  std::string On(const std::string& key, std::vector<std::string> args) const {
    absl::StatusOr<std::string> reply = cluster_.Command(OwnerOf(key), args);
    return reply.ok() ? *reply : reply.status().ToString();
  }
  CollectionKeys KeysOf(absl::string_view collection) const {
    return CollectionKeys(store_->TagOf(store_->PartitionOf(collection)), collection);
  }

  RedisCluster cluster_;
  std::unique_ptr<RedisClusterStore> store_;
};

TEST_F(RedisClusterStoreTest, PutThenGetReturnsValuesAndDeadlines) {
  const absl::Time before = absl::Now();
  absl::StatusOr<std::vector<PutResult>> put =
      Put("orders:42", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Hours(1))},
                        {.key = "b", .value = "2"}});
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->size(), 2u);
  EXPECT_EQ((*put)[0].outcome, PutOutcome::kCreated);
  EXPECT_GE((*put)[0].expire_time, before + absl::Hours(1) - absl::Seconds(5));
  EXPECT_LE((*put)[0].expire_time, absl::Now() + absl::Hours(1) + absl::Seconds(5));
  EXPECT_EQ((*put)[1].expire_time, NoDeadline());

  absl::StatusOr<std::vector<GetResult>> got = Get("orders:42", {"a", "b", "c"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].value, "1");
  EXPECT_EQ((*got)[0].expire_time, (*put)[0].expire_time);
  EXPECT_EQ((*got)[1].value, "2");
  EXPECT_EQ((*got)[1].expire_time, NoDeadline());
  EXPECT_FALSE((*got)[2].found);
}

TEST_F(RedisClusterStoreTest, ConditionsCreateReplaceOrSkip) {
  ASSERT_TRUE(
      Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Hours(1))}}).ok());
  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "a", .value = "x", .condition = PutCondition::kIfAbsent},
                {.key = "b", .value = "x", .condition = PutCondition::kIfPresent},
                {.key = "a2", .value = "y", .condition = PutCondition::kIfAbsent}});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)[0].outcome, PutOutcome::kSkipped);
  EXPECT_NE((*put)[0].expire_time, NoDeadline());
  EXPECT_EQ((*put)[1].outcome, PutOutcome::kSkipped);
  EXPECT_EQ((*put)[2].outcome, PutOutcome::kCreated);
  put = Put("c", {{.key = "a", .value = "z", .condition = PutCondition::kIfPresent}});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)[0].outcome, PutOutcome::kReplaced);
  EXPECT_EQ((*put)[0].expire_time, NoDeadline());
  EXPECT_EQ((*Get("c", {"a"}))[0].value, "z");
  EXPECT_FALSE((*Get("c", {"b"}))[0].found);
}

TEST_F(RedisClusterStoreTest, KeepExpirationKeepsTheDeadlineAndDefaultsApplyToTheRest) {
  absl::StatusOr<std::vector<PutResult>> first =
      Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Hours(1))}});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "a", .value = "2", .keep_expiration = true}, {.key = "b", .value = "3"}},
          {.default_expiration = Expiration::Ttl(absl::Hours(2))});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)[0].expire_time, (*first)[0].expire_time);
  EXPECT_GT((*put)[1].expire_time, (*first)[0].expire_time + absl::Minutes(59));
}

TEST_F(RedisClusterStoreTest, MaxMembersFailsAndWritesNothing) {
  ASSERT_TRUE(Put("c", {{.key = "a", .value = "1"}, {.key = "b", .value = "2"}}).ok());
  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "b", .value = "new"}, {.key = "c", .value = "3"}}, {.max_members = 2});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(put.status().message(), "collection \"c\" would hold 3 members; max_members is 2");
  absl::StatusOr<std::vector<GetResult>> got = Get("c", {"b", "c"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].value, "2");
  EXPECT_FALSE((*got)[1].found);
}

TEST_F(RedisClusterStoreTest, RemoveSaysWhichExisted) {
  ASSERT_TRUE(Put("c", {{.key = "a", .value = "1"}}).ok());
  absl::StatusOr<std::vector<bool>> removed = Remove("c", {"a", "b"});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<bool>{true, false}));
  EXPECT_FALSE((*Get("c", {"a"}))[0].found);
  // The collection is gone from its partition's list.
  EXPECT_EQ(On(KeysOf("c").collections, {"ZSCORE", KeysOf("c").collections, "c"}), "");
}

TEST_F(RedisClusterStoreTest, GetWithRefreshMovesTheDeadlineOfMembersFound) {
  ASSERT_TRUE(
      Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Hours(1))}}).ok());
  absl::StatusOr<std::vector<GetResult>> got =
      Get("c", {"a", "b"}, Expiration::Ttl(absl::Hours(5)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT((*got)[0].expire_time, absl::Now() + absl::Hours(4));
  EXPECT_EQ((*Get("c", {"a"}))[0].expire_time, (*got)[0].expire_time);
  EXPECT_FALSE((*got)[1].found);
}

TEST_F(RedisClusterStoreTest, ADueMemberIsNeverReturnedAndExpiresWithOneEvent) {
  ASSERT_TRUE(
      Put("c", {{.key = "late", .value = "v", .expiration = Expiration::Ttl(absl::Hours(1))},
                {.key = "kept", .value = "w"}})
          .ok());
  const CollectionKeys keys = KeysOf("c");
  // Its deadline passes: moved into the past behind the store's back.
  ASSERT_EQ(On(keys.deadlines, {"ZADD", keys.deadlines, "1000", "late"}), "0");

  absl::StatusOr<std::vector<GetResult>> got = Get("c", {"late", "kept"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE((*got)[0].found);
  EXPECT_TRUE((*got)[1].found);
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  // The event: sequence 1 of the partition, then collection, key, value,
  // deadline and when it expired.
  const std::string event = On(keys.events, {"XRANGE", keys.events, "-", "+"});
  EXPECT_TRUE(absl::StartsWith(event, "1-0\nc\nc\nk\nlate\nv\nv\nd\n1000\nx\n")) << event;
  // A second look expires nothing more; the due index no longer has it.
  ASSERT_TRUE(Get("c", {"late"}).ok());
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "c"}), "");
}

TEST_F(RedisClusterStoreTest, AScriptClockDecidesWhenMembersAreDueInsteadOfTheMasters) {
  FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
  RedisClusterStoreOptions options = Options();
  options.script_clock = &clock;
  // Gets alone expire here; and `clock` dies before the fixture's store.
  options.reap = false;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> opened = RedisClusterStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store_ = std::move(*opened);

  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Seconds(10))}});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)[0].expire_time, clock.Now() + absl::Seconds(10));
  clock.Advance(absl::Seconds(9));
  EXPECT_TRUE((*Get("c", {"a"}))[0].found);
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE((*Get("c", {"a"}))[0].found);
}

TEST_F(RedisClusterStoreTest, TheDueIndexHoldsEachCollectionsEarliestDeadline) {
  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Hours(2))},
                {.key = "b", .value = "2", .expiration = Expiration::Ttl(absl::Hours(1))}});
  ASSERT_TRUE(put.ok()) << put.status();
  const CollectionKeys keys = KeysOf("c");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "c"}),
            absl::StrCat(absl::ToUnixMillis((*put)[1].expire_time)));
}

TEST_F(RedisClusterStoreTest, AnAnswerTooBigFailsResourceExhaustedRefreshingNothing) {
  RedisClusterStoreOptions options = Options();
  options.limits.max_response_bytes = 200;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> small = RedisClusterStore::Open(options);
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(Put("c", {{.key = "a", .value = std::string(300, 'x')}}).ok());
  absl::StatusOr<std::vector<GetResult>> got = Await<std::vector<GetResult>>([&](auto done) {
    (*small)->GetMembers("c", {"a"}, Expiration::Ttl(absl::Hours(1)), std::move(done));
  });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "get fewer keys per request"))
      << got.status();
  EXPECT_EQ((*Get("c", {"a"}))[0].expire_time, NoDeadline());
}

TEST_F(RedisClusterStoreTest, BadInputIsInvalidArgumentNamingTheField) {
  absl::StatusOr<std::vector<PutResult>> put =
      Put("c", {{.key = "a", .value = "1"}, {.key = "a", .value = "2"}});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(put.status().message(), "members[1].key")) << put.status();
  put = Put("c", {{.key = "a", .value = "1", .expiration = Expiration::Ttl(absl::Seconds(-1))}});
  EXPECT_TRUE(absl::StartsWith(put.status().message(), "members[0].ttl")) << put.status();
  absl::StatusOr<std::vector<GetResult>> got = Get("", {"a"});
  EXPECT_TRUE(absl::StartsWith(got.status().message(), "collection")) << got.status();
}

TEST_F(RedisClusterStoreTest, ThePartitionCountIsTheOneRecordedFirst) {
  RedisClusterStoreOptions options = Options();
  options.partitions = 16;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> again = RedisClusterStore::Open(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->partitions(), 8);
  EXPECT_EQ((*again)->events().store_id(), store_->events().store_id());
}

TEST_F(RedisClusterStoreTest, PartitionTagsSpreadOverTheSlotsAndTheMasters) {
  std::set<int> owners;
  for (int p = 0; p < store_->partitions(); ++p) {
    const int slot = KeySlot(store_->TagOf(p));
    EXPECT_GE(slot, p * kClusterSlots / store_->partitions());
    EXPECT_LT(slot, (p + 1) * kClusterSlots / store_->partitions());
    owners.insert(OwnerOf(absl::StrCat("{", store_->TagOf(p), "}")));
  }
  EXPECT_EQ(owners.size(), RedisCluster::kMasters);
}

TEST_F(RedisClusterStoreTest, OperationsNotYetDoneAnswerUnimplemented) {
  absl::StatusOr<uint64_t> deleted =
      Await<uint64_t>([&](auto done) { store_->DeleteCollection("c", std::move(done)); });
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(deleted.status().message(),
            "DeleteCollection is not yet supported by --store=redis-cluster");
}

}  // namespace
}  // namespace lapse::redis

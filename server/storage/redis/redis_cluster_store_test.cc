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
#include "server/storage/redis/partition_scripts.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/shared_redis_cluster.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::Await;
using ::lapse::testing::PendingAnswer;
using ::lapse::testing::RedisCluster;
using ::lapse::testing::SharedRedisClusterTest;

class RedisClusterStoreTest : public SharedRedisClusterTest {
 protected:
  void SetUp() override {
    SharedRedisClusterTest::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(Options());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  RedisClusterStoreOptions Options() const {
    RedisClusterStoreOptions options;
    options.router.seeds = cluster_->seeds();
    options.partitions = 8;
    return options;
  }

  // Replaces the store with one whose scripts run at clock_'s time (and
  // validate by it), without a reaper: operations alone expire members.
  void UseScriptClock(RedisClusterStoreOptions options) {
    options.script_clock = &clock_;
    options.clock = &clock_;
    options.reap = false;
    store_.reset();
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> opened = RedisClusterStore::Open(options);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }
  void UseScriptClock() { UseScriptClock(Options()); }

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
  absl::StatusOr<std::vector<ExpireResult>> Expire(absl::string_view collection,
                                                   std::vector<absl::string_view> keys,
                                                   Expiration expiration,
                                                   ExpireCondition condition) {
    return Await<std::vector<ExpireResult>>([&](auto done) {
      store_->ExpireMembers(collection, keys, expiration, condition, std::move(done));
    });
  }
  absl::StatusOr<std::vector<PersistOutcome>> Persist(absl::string_view collection,
                                                      std::vector<absl::string_view> keys) {
    return Await<std::vector<PersistOutcome>>(
        [&](auto done) { store_->PersistMembers(collection, keys, std::move(done)); });
  }
  absl::StatusOr<MemberPage> List(absl::string_view collection, ListMembersOptions options) {
    return Await<MemberPage>(
        [&](auto done) { store_->ListMembers(collection, options, std::move(done)); });
  }
  // The keys of every page of `collection`, following the cursors; each
  // page's size in `sizes`.
  std::vector<std::string> ListAll(absl::string_view collection, ListMembersOptions options,
                                   std::vector<size_t>* sizes = nullptr) {
    std::vector<std::string> keys;
    for (int pages = 0; pages < 100; ++pages) {
      absl::StatusOr<MemberPage> page = List(collection, options);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const ListedMember& m : page->members) keys.push_back(m.key);
      if (sizes != nullptr) sizes->push_back(page->members.size());
      if (!page->next.has_value()) break;
      options.after = page->next;
    }
    return keys;
  }
  absl::StatusOr<CollectionInfo> Info(absl::string_view name) {
    return Await<CollectionInfo>([&](auto done) { store_->GetCollection(name, std::move(done)); });
  }
  absl::StatusOr<CollectionPage> Collections(absl::string_view prefix, int page_size,
                                             absl::string_view after) {
    return Await<CollectionPage>(
        [&](auto done) { store_->ListCollections(prefix, page_size, after, std::move(done)); });
  }
  absl::StatusOr<uint64_t> Delete(absl::string_view name) {
    return Await<uint64_t>([&](auto done) { store_->DeleteCollection(name, std::move(done)); });
  }

  // Runs a command on the master of `key`.
  std::string On(const std::string& key, std::vector<std::string> args) const {
    absl::StatusOr<std::string> reply = cluster_->Command(cluster_->MasterOf(key), args);
    return reply.ok() ? *reply : reply.status().ToString();
  }
  CollectionKeys KeysOf(absl::string_view collection) const {
    return CollectionKeys(store_->TagOf(store_->PartitionOf(collection)), collection);
  }

  // Before the store, which may run scripts at its time.
  FakeClock clock_{absl::FromUnixSeconds(1'700'000'000)};
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

// max_total_members is shared among the partitions: 16 over 8 partitions
// lets each hold 2 members, whatever the others hold, and each partition's
// count follows every way a member comes and goes.
TEST_F(RedisClusterStoreTest, EachPartitionHoldsItsShareOfMaxTotalMembersCountedExactly) {
  RedisClusterStoreOptions options = Options();
  options.limits.max_total_members = 16;
  UseScriptClock(options);
  ASSERT_FALSE(HasFatalFailure());
  const std::string a = "a";
  std::string same = "b0", other = "c0";
  for (int i = 1; store_->PartitionOf(same) != store_->PartitionOf(a); ++i) {
    same = absl::StrCat("b", i);
  }
  for (int i = 1; store_->PartitionOf(other) == store_->PartitionOf(a); ++i) {
    other = absl::StrCat("c", i);
  }
  const std::string members = KeysOf(a).members;
  auto count = [&] { return On(members, {"GET", members}); };

  ASSERT_TRUE(
      Put(a, {{.key = "1", .value = "", .expiration = Expiration::Ttl(absl::Seconds(5))}}).ok());
  ASSERT_TRUE(Put(same, {{.key = "1", .value = ""}}).ok());
  EXPECT_EQ(count(), "2");
  absl::StatusOr<std::vector<PutResult>> refused =
      Put(a, {{.key = "1", .value = "new"}, {.key = "2", .value = ""}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "max_total_members"))
      << refused.status();
  EXPECT_EQ((*Get(a, {"1"}))[0].value, "") << "a refused put writes nothing";
  EXPECT_TRUE(Put(a, {{.key = "1", .value = "replaced", .keep_expiration = true}}).ok());
  EXPECT_TRUE(Put(other, {{.key = "1", .value = ""}, {.key = "2", .value = ""}}).ok())
      << "another partition has its own share";

  // Each way out: expiry (reaped by the collection's next script), removal,
  // ExpireMembers with a past time, DeleteCollection.
  clock_.Advance(absl::Seconds(5));
  EXPECT_FALSE((*Get(a, {"1"}))[0].found);
  EXPECT_EQ(count(), "1");
  EXPECT_TRUE(Put(same, {{.key = "2", .value = ""}}).ok());
  EXPECT_EQ(count(), "2");
  ASSERT_TRUE(Remove(same, {"1", "missing"}).ok());
  EXPECT_EQ(count(), "1");
  ASSERT_TRUE(Put(a, {{.key = "3", .value = ""}}).ok());
  ASSERT_TRUE(
      Expire(a, {"3"}, Expiration::At(clock_.Now() - absl::Seconds(1)), ExpireCondition::kAlways)
          .ok());
  EXPECT_EQ(count(), "1");
  ASSERT_TRUE(Put(a, {{.key = "4", .value = ""}}).ok());
  EXPECT_EQ(count(), "2");
  EXPECT_EQ(*Delete(same), 1u);
  EXPECT_EQ(count(), "1");
  EXPECT_EQ(*Delete(a), 1u);
  EXPECT_EQ(count(), "0");
}

TEST_F(RedisClusterStoreTest, OpeningWithMaxTotalMembersBelowThePartitionCountFails) {
  RedisClusterStoreOptions options = Options();
  options.limits.max_total_members = 7;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> opened = RedisClusterStore::Open(options);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument) << opened.status();
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
  UseScriptClock();
  FakeClock& clock = clock_;

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
    owners.insert(cluster_->MasterOf(absl::StrCat("{", store_->TagOf(p), "}")));
  }
  EXPECT_EQ(owners.size(), RedisCluster::kMasters);
}

TEST_F(RedisClusterStoreTest, ExpireMembersAppliesEachConditionLikeHexpire) {
  UseScriptClock();
  const absl::Time now = clock_.Now();
  ASSERT_TRUE(
      Put("jobs", {{.key = "timed", .value = "1", .expiration = Expiration::Ttl(absl::Seconds(60))},
                   {.key = "forever", .value = "2"}})
          .ok());
  absl::StatusOr<std::vector<ExpireResult>> r =
      Expire("jobs", {"timed", "forever", "missing"}, Expiration::Ttl(absl::Seconds(120)),
             ExpireCondition::kIfLater);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kUpdated);
  EXPECT_EQ((*r)[0].expire_time, now + absl::Seconds(120));
  // A persistent member expires infinitely late: nothing is later.
  EXPECT_EQ((*r)[1].outcome, ExpireOutcome::kConditionNotMet);
  EXPECT_EQ((*r)[1].expire_time, NoDeadline());
  EXPECT_EQ((*r)[2].outcome, ExpireOutcome::kNotFound);

  r = Expire("jobs", {"timed", "forever"}, Expiration::Ttl(absl::Seconds(90)),
             ExpireCondition::kIfEarlier);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kUpdated);
  EXPECT_EQ((*r)[1].outcome, ExpireOutcome::kUpdated);
  EXPECT_EQ((*r)[1].expire_time, now + absl::Seconds(90));

  ASSERT_TRUE(Persist("jobs", {"forever"}).ok());
  r = Expire("jobs", {"timed", "forever"}, Expiration::Ttl(absl::Seconds(30)),
             ExpireCondition::kIfNoExpiration);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kConditionNotMet);
  EXPECT_EQ((*r)[0].expire_time, now + absl::Seconds(90));
  EXPECT_EQ((*r)[1].outcome, ExpireOutcome::kUpdated);

  r = Expire("jobs", {"timed"}, Expiration::At(now + absl::Seconds(45)),
             ExpireCondition::kIfHasExpiration);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kUpdated);
  EXPECT_EQ((*r)[0].expire_time, now + absl::Seconds(45));
  absl::StatusOr<std::vector<GetResult>> got = Get("jobs", {"timed", "forever"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].expire_time, now + absl::Seconds(45));
  EXPECT_EQ((*got)[1].expire_time, now + absl::Seconds(30));
  // The due index follows the earliest deadline.
  const CollectionKeys keys = KeysOf("jobs");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "jobs"}),
            absl::StrCat(absl::ToUnixMillis(now + absl::Seconds(30))));
}

TEST_F(RedisClusterStoreTest, ExpireMembersWithAPastTimeExpiresAtOnceWithOneEvent) {
  UseScriptClock();
  const absl::Time now = clock_.Now();
  ASSERT_TRUE(
      Put("jobs", {{.key = "gone", .value = "v", .expiration = Expiration::Ttl(absl::Seconds(60))},
                   {.key = "kept", .value = "w"}})
          .ok());
  absl::StatusOr<std::vector<ExpireResult>> r =
      Expire("jobs", {"gone"}, Expiration::At(now - absl::Seconds(1)), ExpireCondition::kAlways);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kExpired);
  EXPECT_EQ((*r)[0].expire_time, NoDeadline());
  EXPECT_FALSE((*Get("jobs", {"gone"}))[0].found);
  const CollectionKeys keys = KeysOf("jobs");
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  // Its event carries the deadline asked for, and now.
  const std::string event = On(keys.events, {"XRANGE", keys.events, "-", "+"});
  EXPECT_EQ(event, absl::StrCat("1-0\nc\njobs\nk\ngone\nv\nv\nd\n",
                                absl::ToUnixMillis(now - absl::Seconds(1)), "\nx\n",
                                absl::ToUnixMillis(now)));
  EXPECT_EQ(On(keys.key_index, {"ZRANGE", keys.key_index, "0", "-1"}), "kept");
}

TEST_F(RedisClusterStoreTest, AWritesOwnExpiryEventsAreReadableOnceItIsAcknowledged) {
  UseScriptClock();  // No reaper: nothing but the write itself delivers them.
  constexpr uint64_t kOneEvent = RedisEventSource::kPositionSpacing;
  ASSERT_TRUE(
      Put("jobs", {{.key = "gone", .value = "v", .expiration = Expiration::Ttl(absl::Seconds(60))}})
          .ok());
  const uint64_t before = store_->events().last_sequence();
  ASSERT_TRUE(Expire("jobs", {"gone"}, Expiration::At(clock_.Now() - absl::Seconds(1)),
                     ExpireCondition::kAlways)
                  .ok());
  EXPECT_EQ(store_->events().last_sequence(), before + kOneEvent);

  // A put that first expires a due member of its collection.
  ASSERT_TRUE(
      Put("jobs", {{.key = "due", .value = "w", .expiration = Expiration::Ttl(absl::Seconds(1))}})
          .ok());
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(Put("jobs", {{.key = "kept", .value = "x"}}).ok());
  EXPECT_EQ(store_->events().last_sequence(), before + 2 * kOneEvent);

  // A read that expires one leaves its event to the reaper: it is not known
  // replicated.
  ASSERT_TRUE(
      Put("jobs", {{.key = "late", .value = "y", .expiration = Expiration::Ttl(absl::Seconds(1))}})
          .ok());
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE((*Get("jobs", {"late"}))[0].found);
  EXPECT_EQ(store_->events().last_sequence(), before + 2 * kOneEvent);
}

TEST_F(RedisClusterStoreTest, PersistMembersClearsDeadlinesAndSaysWhatItDid) {
  UseScriptClock();
  ASSERT_TRUE(
      Put("p", {{.key = "timed", .value = "1", .expiration = Expiration::Ttl(absl::Seconds(60))},
                {.key = "forever", .value = "2"}})
          .ok());
  absl::StatusOr<std::vector<PersistOutcome>> r = Persist("p", {"timed", "forever", "missing"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r,
            (std::vector<PersistOutcome>{PersistOutcome::kPersisted, PersistOutcome::kNoExpiration,
                                         PersistOutcome::kNotFound}));
  const CollectionKeys keys = KeysOf("p");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "p"}), "");
  clock_.Advance(absl::Seconds(120));
  absl::StatusOr<std::vector<GetResult>> got = Get("p", {"timed"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].expire_time, NoDeadline());
}

TEST_F(RedisClusterStoreTest, ListMembersPagesByKeyInByteOrder) {
  ASSERT_TRUE(Put("list", {{.key = "b", .value = "v:b"},
                           {.key = "a\xc3\xa9", .value = "v:a\xc3\xa9"},
                           {.key = "ab", .value = "v:ab"},
                           {.key = "B", .value = "v:B"},
                           {.key = "a", .value = "v:a"}})
                  .ok());
  std::vector<size_t> sizes;
  EXPECT_EQ(ListAll("list", {.page_size = 2}, &sizes),
            (std::vector<std::string>{"B", "a", "ab", "a\xc3\xa9", "b"}));
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  absl::StatusOr<MemberPage> page = List("list", {.page_size = 1});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->members[0].value, "v:B");
  EXPECT_EQ(page->members[0].expire_time, NoDeadline());
}

TEST_F(RedisClusterStoreTest, ListMembersPagesByDeadlineWithTiesByKeyAndPersistentMembersLast) {
  UseScriptClock();
  ASSERT_TRUE(
      Put("byexp", {{.key = "late", .value = "", .expiration = Expiration::Ttl(absl::Seconds(30))},
                    {.key = "early", .value = "", .expiration = Expiration::Ttl(absl::Seconds(10))},
                    {.key = "mid", .value = "", .expiration = Expiration::Ttl(absl::Seconds(20))},
                    {.key = "zz-forever", .value = ""},
                    {.key = "aaa-forever", .value = ""}})
          .ok());
  ASSERT_TRUE(
      Put("byexp",
          {{.key = "t2", .value = ""}, {.key = "t1", .value = ""}, {.key = "t3", .value = ""}},
          {.default_expiration = Expiration::Ttl(absl::Seconds(15))})
          .ok());
  const std::vector<std::string> order = {"early", "t1",   "t2",          "t3",
                                          "mid",   "late", "aaa-forever", "zz-forever"};
  for (int page_size : {1, 2, 3, 100}) {
    EXPECT_EQ(ListAll("byexp", {.order = MemberOrder::kExpireTime, .page_size = page_size}), order)
        << page_size;
  }
  absl::StatusOr<MemberPage> page =
      List("byexp", {.order = MemberOrder::kExpireTime, .page_size = 2, .keys_only = true});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->members[1].expire_time, clock_.Now() + absl::Seconds(15));
  ASSERT_TRUE(page->next.has_value());
  EXPECT_EQ(page->next->key, "t1");
  EXPECT_EQ(page->next->expire_time, clock_.Now() + absl::Seconds(15));

  // The cursor's member is gone: the listing resumes after its place, past
  // the members that tie with its deadline and come before its key.
  ASSERT_TRUE(Remove("byexp", {"t2"}).ok());
  ListMembersOptions options{.order = MemberOrder::kExpireTime,
                             .page_size = 100,
                             .after = MemberCursor{clock_.Now() + absl::Seconds(15), "t2"}};
  EXPECT_EQ(ListAll("byexp", options),
            (std::vector<std::string>{"t3", "mid", "late", "aaa-forever", "zz-forever"}));
  // The cursor's member moved on: likewise.
  ASSERT_TRUE(
      Expire("byexp", {"t1"}, Expiration::Ttl(absl::Seconds(40)), ExpireCondition::kAlways).ok());
  options.after = page->next;
  EXPECT_EQ(ListAll("byexp", options),
            (std::vector<std::string>{"t3", "mid", "late", "t1", "aaa-forever", "zz-forever"}));
  options.after = MemberCursor{NoDeadline(), "aaa-forever"};
  EXPECT_EQ(ListAll("byexp", options), (std::vector<std::string>{"zz-forever"}));
}

TEST_F(RedisClusterStoreTest, ListMembersPageSizeDefaultsAndIsCoercedToTheMaximum) {
  RedisClusterStoreOptions options = Options();
  options.limits.default_page_size = 2;
  options.limits.max_page_size = 3;
  UseScriptClock(options);
  ASSERT_TRUE(Put("many", {{.key = "a", .value = ""},
                           {.key = "b", .value = ""},
                           {.key = "c", .value = ""},
                           {.key = "d", .value = ""},
                           {.key = "e", .value = ""}})
                  .ok());
  absl::StatusOr<MemberPage> page = List("many", {});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->members.size(), 2u);
  EXPECT_TRUE(page->next.has_value());
  page = List("many", {.page_size = 1000});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->members.size(), 3u);
  EXPECT_EQ(page->next->key, "c");
  // The last page ends the listing.
  page = List("many", {.page_size = 1000, .after = page->next});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->members.size(), 2u);
  EXPECT_FALSE(page->next.has_value());
  page = List("missing", {});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->members.empty());
  EXPECT_FALSE(page->next.has_value());
}

TEST_F(RedisClusterStoreTest, ListMembersEndsAPageEarlyBeforeTheResponseBytesLimit) {
  RedisClusterStoreOptions options = Options();
  // Two entries of 2 + 300 + kResponseEntryOverhead bytes fit, not three.
  options.limits.max_response_bytes = 1000;
  UseScriptClock(options);
  std::vector<MemberWrite> writes;
  const std::string value(300, 'v');
  for (const char* key : {"k0", "k1", "k2", "k3", "k4"})
    writes.push_back({.key = key, .value = value});
  const std::string big(2000, 'x');
  writes.push_back({.key = "k5", .value = big});
  ASSERT_TRUE(Put("wide", writes).ok());
  std::vector<size_t> sizes;
  EXPECT_EQ(ListAll("wide", {}, &sizes).size(), 6u);
  // A member bigger than the limit has a page of its own.
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 1}));
  sizes.clear();
  EXPECT_EQ(ListAll("wide", {.keys_only = true}, &sizes).size(), 6u);
  EXPECT_EQ(sizes, (std::vector<size_t>{6}));
}

TEST_F(RedisClusterStoreTest, DueMembersAreNeverListedOrCounted) {
  UseScriptClock();
  ASSERT_TRUE(Put("c", {{.key = "a", .value = "", .expiration = Expiration::Ttl(absl::Seconds(10))},
                        {.key = "b", .value = "", .expiration = Expiration::Ttl(absl::Seconds(20))},
                        {.key = "p", .value = ""}})
                  .ok());
  const absl::Time b_deadline = clock_.Now() + absl::Seconds(20);
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(ListAll("c", {.order = MemberOrder::kExpireTime}),
            (std::vector<std::string>{"b", "p"}));
  const CollectionKeys keys = KeysOf("c");
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  absl::StatusOr<CollectionInfo> info = Info("c");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "c");
  EXPECT_EQ(info->member_count, 2u);
  EXPECT_EQ(info->expiring_count, 1u);
  EXPECT_EQ(info->next_expire_time, b_deadline);

  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(ListAll("c", {}), (std::vector<std::string>{"p"}));
  info = Info("c");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->member_count, 1u);
  EXPECT_EQ(info->expiring_count, 0u);
  EXPECT_EQ(info->next_expire_time, NoDeadline());
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "2");
}

TEST_F(RedisClusterStoreTest, GetCollectionOfACollectionWithNoLiveMemberIsNotFound) {
  UseScriptClock();
  absl::StatusOr<CollectionInfo> info = Info("nothing");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(info.status().message(), "collection \"nothing\" not found");
  ASSERT_TRUE(
      Put("brief", {{.key = "k", .value = "", .expiration = Expiration::Ttl(absl::Seconds(1))}})
          .ok());
  ASSERT_TRUE(Info("brief").ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Info("brief").status().code(), absl::StatusCode::kNotFound);
  // It expired with its event, and left its partition's lists.
  const CollectionKeys keys = KeysOf("brief");
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  EXPECT_EQ(On(keys.collections, {"ZSCORE", keys.collections, "brief"}), "");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "brief"}), "");
}

TEST_F(RedisClusterStoreTest, ListCollectionsMergesEveryPartitionInNameOrderAcrossPages) {
  std::vector<std::string> orders;
  std::set<int> partitions;
  for (int i = 0; i < 12; ++i) {
    const std::string name = absl::StrCat("orders:", absl::Dec(i, absl::kZeroPad2));
    orders.push_back(name);
    partitions.insert(store_->PartitionOf(name));
    std::vector<MemberWrite> writes;
    for (const char* key : {"k0", "k1", "k2"}) {
      if (writes.size() <= static_cast<size_t>(i % 3)) writes.push_back({.key = key, .value = ""});
    }
    ASSERT_TRUE(Put(name, writes).ok());
  }
  ASSERT_GT(partitions.size(), 2u);
  for (const char* name : {"carts:1", "ordersX", "a"}) {
    ASSERT_TRUE(Put(name, {{.key = "k", .value = ""}}).ok());
  }
  std::vector<std::string> names;
  std::string after;
  int pages = 0;
  for (; pages < 20; ++pages) {
    absl::StatusOr<CollectionPage> page = Collections("orders:", 5, after);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->collections.size(), 5u);
    for (const CollectionInfo& info : page->collections) {
      names.push_back(info.name);
      const int i = std::stoi(info.name.substr(7));
      EXPECT_EQ(info.member_count, static_cast<uint64_t>(i % 3 + 1)) << info.name;
      EXPECT_EQ(info.expiring_count, 0u);
    }
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  EXPECT_EQ(names, orders);
  EXPECT_EQ(pages, 2);
  // Without a prefix: every collection.
  absl::StatusOr<CollectionPage> all = Collections("", 100, "");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->collections.size(), 15u);
  EXPECT_EQ(all->collections.front().name, "a");
  EXPECT_EQ(all->collections[1].name, "carts:1");
  EXPECT_EQ(all->collections.back().name, "ordersX");
  EXPECT_FALSE(all->next_after.has_value());
  // An `after` before the prefix starts at the prefix.
  absl::StatusOr<CollectionPage> from = Collections("orders:", 1, "b");
  ASSERT_TRUE(from.ok()) << from.status();
  ASSERT_EQ(from->collections.size(), 1u);
  EXPECT_EQ(from->collections[0].name, "orders:00");
}

TEST_F(RedisClusterStoreTest, ListCollectionsNeverListsACollectionWhoseMembersAreAllDue) {
  UseScriptClock();
  for (const char* name : {"a0", "a1"}) {
    ASSERT_TRUE(
        Put(name, {{.key = "k", .value = "", .expiration = Expiration::Ttl(absl::Seconds(10))}})
            .ok());
  }
  ASSERT_TRUE(Put("a2", {{.key = "k", .value = ""}}).ok());
  ASSERT_TRUE(
      Put("a3", {{.key = "k", .value = "", .expiration = Expiration::Ttl(absl::Seconds(60))},
                 {.key = "j", .value = "", .expiration = Expiration::Ttl(absl::Seconds(5))}})
          .ok());
  clock_.Advance(absl::Seconds(10));
  absl::StatusOr<CollectionPage> page = Collections("a", 1, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].name, "a2");
  EXPECT_EQ(page->next_after, "a2");
  page = Collections("a", 1, "a2");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].name, "a3");
  EXPECT_EQ(page->collections[0].member_count, 1u);
  EXPECT_EQ(page->collections[0].next_expire_time, clock_.Now() + absl::Seconds(50));
  EXPECT_FALSE(page->next_after.has_value());
  // The due members expired on the way, each with its event, and their
  // collections left their partitions' lists.
  for (const char* name : {"a0", "a1"}) {
    const CollectionKeys keys = KeysOf(name);
    EXPECT_EQ(On(keys.collections, {"ZSCORE", keys.collections, name}), "") << name;
    EXPECT_EQ(On(keys.key_index, {"EXISTS", keys.key_index}), "0") << name;
  }
  int events = 0;
  for (int p = 0; p < store_->partitions(); ++p) {
    const PartitionKeys keys(store_->TagOf(p));
    int n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(On(keys.events, {"XLEN", keys.events}), &n));
    events += n;
  }
  EXPECT_EQ(events, 3);
}

TEST_F(RedisClusterStoreTest,
       ListCollectionsWhileAReshardingSplitsItsKeysWaitsForTheSlotAndListsEveryCollection) {
  UseScriptClock();
  ASSERT_TRUE(Put("c", {{.key = "a", .value = "1"},
                        {.key = "b", .value = "2", .expiration = Expiration::Ttl(absl::Hours(1))}})
                  .ok());
  // A member of c's partition expired, so that its stream and sequence exist.
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const std::string name = absl::StrCat("e", i);
    if (store_->PartitionOf(name) == store_->PartitionOf("c")) other = name;
  }
  ASSERT_TRUE(
      Put(other, {{.key = "x", .value = "", .expiration = Expiration::Ttl(absl::Seconds(1))}})
          .ok());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Get(other, {"x"}).ok());
  // The partition's own keys move first; c's keys stay behind, so a script
  // that touched them undeclared would run on the target and find c empty.
  const CollectionKeys keys = KeysOf("c");
  std::optional<PendingAnswer<CollectionPage>> listed;
  const absl::Status moved =
      cluster_->MoveSlotSplitAfter({keys.collections, keys.due, keys.events, keys.sequence}, [&] {
        listed.emplace([&](auto done) { store_->ListCollections("", 10, "", std::move(done)); });
      });
  ASSERT_TRUE(moved.ok()) << moved;
  ASSERT_TRUE(listed.has_value());

  absl::StatusOr<CollectionPage> page = listed->Wait();
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].name, "c");
  EXPECT_EQ(page->collections[0].member_count, 2u);
  EXPECT_EQ(page->collections[0].expiring_count, 1u);
}

TEST_F(RedisClusterStoreTest, ListCollectionsEndsAPageEarlyBeforeTheResponseBytesLimit) {
  RedisClusterStoreOptions options = Options();
  // Two names of 2 bytes and their overhead fit, not three.
  options.limits.max_response_bytes = 2 * (2 + kResponseEntryOverhead);
  UseScriptClock(options);
  for (const char* name : {"c1", "c2", "c3", "c4", "c5"}) {
    ASSERT_TRUE(Put(name, {{.key = "k", .value = ""}}).ok());
  }
  std::vector<size_t> sizes;
  std::string after;
  for (int pages = 0; pages < 10; ++pages) {
    absl::StatusOr<CollectionPage> page = Collections("c", 100, after);
    ASSERT_TRUE(page.ok()) << page.status();
    sizes.push_back(page->collections.size());
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
}

TEST_F(RedisClusterStoreTest, DeleteCollectionRemovesLiveMembersWithoutEventsAfterExpiringDueOnes) {
  UseScriptClock();
  ASSERT_TRUE(
      Put("doomed", {{.key = "a", .value = "", .expiration = Expiration::Ttl(absl::Seconds(10))},
                     {.key = "b", .value = "", .expiration = Expiration::Ttl(absl::Seconds(60))},
                     {.key = "c", .value = ""}})
          .ok());
  clock_.Advance(absl::Seconds(10));
  absl::StatusOr<uint64_t> removed = Delete("doomed");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  const CollectionKeys keys = KeysOf("doomed");
  // The due member's event only.
  EXPECT_EQ(On(keys.events, {"XLEN", keys.events}), "1");
  EXPECT_EQ(*Delete("doomed"), 0u);
  EXPECT_EQ(Info("doomed").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(On(keys.values, {"EXISTS", keys.values, keys.deadlines, keys.key_index}), "0");
  EXPECT_EQ(On(keys.collections, {"ZSCORE", keys.collections, "doomed"}), "");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "doomed"}), "");
}

TEST_F(RedisClusterStoreTest, BadInputOfEveryCollectionOperationIsInvalidArgumentNamingTheField) {
  auto expect_invalid = [](const absl::Status& status, absl::string_view field) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StartsWith(status.message(), field)) << status;
  };
  expect_invalid(Expire("c", {"a"}, Expiration::None(), ExpireCondition::kAlways).status(),
                 "expiration");
  expect_invalid(
      Expire("c", {"a"}, Expiration::Ttl(absl::Seconds(-1)), ExpireCondition::kAlways).status(),
      "ttl");
  expect_invalid(
      Expire("c", {}, Expiration::Ttl(absl::Seconds(1)), ExpireCondition::kAlways).status(),
      "keys");
  expect_invalid(
      Expire("", {"a"}, Expiration::Ttl(absl::Seconds(1)), ExpireCondition::kAlways).status(),
      "collection");
  expect_invalid(Persist("c", {"a", "a"}).status(), "keys[1]");
  expect_invalid(List("c", {.page_size = -1}).status(), "page_size");
  expect_invalid(List("bad name", {}).status(), "collection");
  expect_invalid(Collections("bad prefix", 10, "").status(), "prefix");
  expect_invalid(Collections("", -1, "").status(), "page_size");
  expect_invalid(Info("").status(), "name");
  expect_invalid(Delete("").status(), "name");
}

// The cluster refusing lapsed's password (rotated under it) is not the
// caller's credentials: UNAVAILABLE, naming Redis and where the password
// comes from as its configurer put it, where the router says
// UNAUTHENTICATED. The store names no flag of lapsed's.
TEST(RedisClusterStoreAuthTest, APasswordChangedUnderItIsUnavailableNamingThePasswordsOrigin) {
  RedisCluster cluster({.password = "s3cret"});
  ASSERT_TRUE(cluster.status().ok()) << cluster.status();
  RedisClusterStoreOptions options;
  options.router.seeds = cluster.seeds();
  options.router.password = "s3cret";
  options.router.password_origin = "the test's vault";
  options.partitions = 1;
  options.reap = false;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<absl::string_view> keys = {"k"};
  auto get = [&] {
    return Await<std::vector<GetResult>>(
        [&](auto done) { (*store)->GetMembers("c", keys, Expiration::None(), std::move(done)); });
  };
  ASSERT_TRUE(get().ok());
  for (int port : cluster.MasterPorts()) ASSERT_TRUE(cluster.ChangePassword(port, "n3w").ok());
  // Idempotent, the get is sent again on a new connection, whose AUTH is
  // refused.
  const absl::Status status = get().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(
      absl::StrContains(status.message(), "Redis Cluster refused the password in the test's vault"))
      << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "--")) << status;
}

}  // namespace
}  // namespace lapse::redis

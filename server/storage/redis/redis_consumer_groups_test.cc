// The Redis Cluster store's consumer groups against a real cluster: two
// store instances (two lapsed replicas) share every group. The tests expire
// members with a FakeClock as the scripts' time and move the delivery
// watermarks themselves (no reaper), so every step is deterministic.
#include "server/storage/redis/redis_consumer_groups.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/redis/group_scripts.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/redis_partitions.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::Await;
using ::lapse::testing::CollectionPerPartition;
using ::lapse::testing::PendingAnswer;
using ::lapse::testing::RedisPartitionsTest;
using ::lapse::testing::WaitWithPatience;

constexpr int kPartitions = 4;
constexpr absl::Duration kVisibility = absl::Seconds(30);

// One lapsed replica's store, and the groups its listener was told of.
struct Replica {
  Mutex mu;
  CondVar cv;
  std::vector<std::string> readable ABSL_GUARDED_BY(mu);
  std::unique_ptr<RedisClusterStore> store;

  bool WaitRead(int partition, uint64_t sequence) {
    MutexLock lock(&mu);
    return WaitWithPatience(
        mu, cv, [&] { return store->event_source().read_sequence(partition) >= sequence; });
  }
  bool WaitReadable(absl::string_view group, size_t count) {
    MutexLock lock(&mu);
    return WaitWithPatience(mu, cv, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return static_cast<size_t>(std::count(readable.begin(), readable.end(), group)) >= count;
    });
  }
  size_t ReadableCount(absl::string_view group) {
    MutexLock lock(&mu);
    return std::count(readable.begin(), readable.end(), group);
  }
};

std::vector<LeaseRef> LeasesOf(const PollResult& polled) {
  std::vector<LeaseRef> leases;
  for (const Delivery& d : polled.deliveries) {
    leases.push_back({.sequence = d.event.sequence, .delivery_count = d.delivery_count});
  }
  return leases;
}

class RedisConsumerGroupsTest : public RedisPartitionsTest {
 protected:
  void SetUp() override {
    RedisPartitionsTest::SetUp();
    if (HasFatalFailure()) return;
    a_ = OpenReplica();
    b_ = OpenReplica();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
    collections_ = CollectionPerPartition(*a_->store, "orders:");
  }

  std::unique_ptr<Replica> OpenReplica() {
    auto replica = std::make_unique<Replica>();
    RedisClusterStoreOptions options = StoreOptions(kPartitions);
    options.clock = &clock_;
    options.limits = limits_;
    options.on_events_readable = [r = replica.get()](uint64_t) {
      MutexLock lock(&r->mu);
      r->cv.SignalAll();
    };
    options.on_group_readable = [r = replica.get()](absl::string_view group) {
      MutexLock lock(&r->mu);
      r->readable.emplace_back(group);
      r->cv.SignalAll();
    };
    replica->store = OpenStore(std::move(options));
    if (replica->store == nullptr) return nullptr;
    return replica;
  }

  // Expires `n` members of `collection` (partition p's by default), each with
  // its event, and delivers them to both replicas. Returns the keys.
  std::vector<std::string> Expire(int p, int n, std::string collection = "") {
    if (collection.empty()) collection = collections_[p];
    EXPECT_EQ(a_->store->PartitionOf(collection), p);
    auto [keys, sequence] = ExpireMembers(*a_->store, collection, n);
    ::lapse::testing::SetDelivered(*cluster_, *a_->store, p, sequence);
    for (Replica* r : {a_.get(), b_.get()}) {
      r->store->event_source().Advance(p, sequence);
      EXPECT_TRUE(r->WaitRead(p, sequence));
    }
    return keys;
  }

  absl::StatusOr<ConsumerGroupInfo> Create(Replica& r, absl::string_view name,
                                           ConsumerGroupOptions options = {},
                                           GroupStart start = {}) {
    return Await<ConsumerGroupInfo>(
        [&](auto done) { r.store->CreateConsumerGroup(name, options, start, std::move(done)); });
  }
  absl::StatusOr<ConsumerGroupInfo> Get(Replica& r, absl::string_view name, size_t max_leases = 0) {
    return Await<ConsumerGroupInfo>(
        [&](auto done) { r.store->GetConsumerGroup(name, max_leases, std::move(done)); });
  }
  absl::StatusOr<PollResult> Poll(Replica& r, absl::string_view group, absl::string_view consumer,
                                  size_t max_events) {
    return Await<PollResult>(
        [&](auto done) { r.store->Poll(group, consumer, max_events, std::move(done)); });
  }
  absl::StatusOr<std::vector<absl::Status>> Ack(Replica& r, absl::string_view group,
                                                absl::string_view consumer,
                                                const std::vector<LeaseRef>& leases) {
    return Await<std::vector<absl::Status>>(
        [&](auto done) { r.store->Ack(group, consumer, leases, std::move(done)); });
  }
  absl::StatusOr<std::vector<absl::Status>> Nack(Replica& r, absl::string_view group,
                                                 absl::string_view consumer,
                                                 const std::vector<LeaseRef>& leases) {
    return Await<std::vector<absl::Status>>(
        [&](auto done) { r.store->Nack(group, consumer, leases, std::move(done)); });
  }

  Limits limits_;
  std::vector<std::string> collections_;
  std::unique_ptr<Replica> a_;
  std::unique_ptr<Replica> b_;
};

TEST_F(RedisConsumerGroupsTest, CreateGetListAndDeleteGroupsFromEitherReplica) {
  ConsumerGroupOptions options;
  options.filter.prefix = "orders:";
  options.filter.include_values = true;
  options.visibility_timeout = absl::Seconds(7);
  options.max_deliveries = 3;
  options.max_unacked_per_consumer = 9;
  absl::StatusOr<ConsumerGroupInfo> created = Create(*a_, "billing", options);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->name, "billing");
  for (const char* name : {"audit", "ship", "zeta"}) ASSERT_TRUE(Create(*a_, name).ok());

  absl::StatusOr<ConsumerGroupInfo> got = Get(*b_, "billing");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->options.filter.prefix, "orders:");
  EXPECT_TRUE(got->options.filter.include_values);
  EXPECT_EQ(got->options.visibility_timeout, absl::Seconds(7));
  EXPECT_EQ(got->options.max_deliveries, 3u);
  EXPECT_EQ(got->options.max_unacked_per_consumer, 9u);
  EXPECT_EQ(got->pending, 0u);

  absl::StatusOr<ConsumerGroupInfo> again = Create(*b_, "billing");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();

  absl::StatusOr<ConsumerGroups::Page> first = Await<ConsumerGroups::Page>(
      [&](auto done) { b_->store->ListConsumerGroups(2, "", std::move(done)); });
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->groups.size(), 2u);
  EXPECT_EQ(first->groups[0].name, "audit");
  EXPECT_EQ(first->groups[1].name, "billing");
  ASSERT_EQ(first->next_after, "billing");
  absl::StatusOr<ConsumerGroupInfo> deleted = Await<ConsumerGroupInfo>(
      [&](auto done) { a_->store->DeleteConsumerGroup("ship", std::move(done)); });
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->name, "ship");
  absl::StatusOr<ConsumerGroups::Page> rest = Await<ConsumerGroups::Page>(
      [&](auto done) { b_->store->ListConsumerGroups(2, "billing", std::move(done)); });
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->groups.size(), 1u);
  EXPECT_EQ(rest->groups[0].name, "zeta");
  EXPECT_FALSE(rest->next_after.has_value());

  EXPECT_EQ(Get(*b_, "ship").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Await<ConsumerGroupInfo>(
                [&](auto done) { a_->store->DeleteConsumerGroup("ship", std::move(done)); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(a_->ReadableCount("ship"), 1u) << "the deleted group's waiters are told";
  // A name can be used again once deleted.
  EXPECT_TRUE(Create(*b_, "ship").ok());
}

TEST_F(RedisConsumerGroupsTest, TwoReplicasPollingAtOnceLeaseEveryEventOnce) {
  ASSERT_TRUE(Create(*a_, "billing", {.filter = {.include_values = true}}).ok());
  std::set<std::string> keys;
  for (int p = 0; p < kPartitions; ++p) {
    for (const std::string& k : Expire(p, 30)) keys.insert(k);
  }
  std::map<std::string, int> acked;
  std::set<uint64_t> ids;
  for (int round = 0; acked.size() < keys.size(); ++round) {
    ASSERT_LT(round, 100) << "the group stopped delivering";
    // Both replicas poll at once.
    Replica* replicas[2] = {a_.get(), b_.get()};
    std::future<absl::StatusOr<PollResult>> answers[2];
    for (int i = 0; i < 2; ++i) {
      auto promise = std::make_shared<std::promise<absl::StatusOr<PollResult>>>();
      answers[i] = promise->get_future();
      replicas[i]->store->Poll(
          "billing", absl::StrCat("c", i), 7,
          [promise](absl::StatusOr<PollResult> r) { promise->set_value(std::move(r)); });
    }
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(answers[i].wait_for(std::chrono::seconds(30)), std::future_status::ready);
      absl::StatusOr<PollResult> answer = answers[i].get();
      ASSERT_TRUE(answer.ok()) << answer.status();
      const PollResult& polled = *answer;
      EXPECT_LE(polled.deliveries.size(), 7u);
      for (const Delivery& d : polled.deliveries) {
        EXPECT_EQ(d.delivery_count, 1u);
        EXPECT_EQ(d.event.value, "v:" + d.event.key);
        EXPECT_EQ(d.event.sequence % kGroupIdPartitions,
                  static_cast<uint64_t>(a_->store->PartitionOf(d.event.collection)));
        EXPECT_TRUE(ids.insert(d.event.sequence).second) << "id " << d.event.sequence;
        ++acked[d.event.key];
      }
      absl::StatusOr<std::vector<absl::Status>> results =
          Ack(*replicas[1 - i], "billing", absl::StrCat("c", i), LeasesOf(polled));
      ASSERT_TRUE(results.ok()) << results.status();
      for (const absl::Status& s : *results) EXPECT_TRUE(s.ok()) << s;
    }
  }
  for (const std::string& key : keys) EXPECT_EQ(acked[key], 1) << key;
  absl::StatusOr<PollResult> none = Poll(*b_, "billing", "c0", 100);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->deliveries.empty());
  absl::StatusOr<ConsumerGroupInfo> info = Get(*a_, "billing");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->acked_total, keys.size());
  EXPECT_EQ(info->delivered_total, keys.size());
  EXPECT_EQ(info->pending, 0u);
  EXPECT_EQ(info->lag, 0u);
  EXPECT_EQ(info->position, 4u * 30);
  EXPECT_GT(a_->ReadableCount("billing") + b_->ReadableCount("billing"), 0u)
      << "acks announce that the consumer may take more";
}

TEST_F(RedisConsumerGroupsTest, ANewGroupStartsAfterTheEventsDeliveredBeforeIt) {
  Expire(0, 3);
  ASSERT_TRUE(Create(*a_, "new").ok());
  ASSERT_TRUE(Create(*a_, "oldest", {}, {.kind = GroupStart::Kind::kOldest}).ok());
  const std::vector<std::string> later = Expire(0, 2);
  EXPECT_EQ(Get(*b_, "new")->lag, 2u);
  EXPECT_EQ(Get(*b_, "oldest")->lag, 5u);
  absl::StatusOr<PollResult> fresh = Poll(*b_, "new", "c", 100);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->deliveries.size(), 2u);
  EXPECT_EQ(fresh->deliveries[0].event.key, later[0]);
  EXPECT_EQ(fresh->deliveries[0].event.value, "") << "values only with include_values";
  absl::StatusOr<PollResult> all = Poll(*b_, "oldest", "c", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->deliveries.size(), 5u);
}

TEST_F(RedisConsumerGroupsTest, APollWhileAReshardingSplitsTheGroupsKeysWaitsForTheSlot) {
  ASSERT_TRUE(Create(*a_, "g").ok());
  Expire(0, 3);
  absl::StatusOr<PollResult> first = Poll(*a_, "g", "c", 100);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->deliveries.size(), 3u);
  ASSERT_TRUE(Ack(*a_, "g", "c", LeasesOf(*first)).ok());
  const std::vector<std::string> later = Expire(0, 2);
  // The group's hash moves first; its positions stay behind, so a script
  // that touched them undeclared would run on the target and read the
  // group from its start.
  const GroupKeys keys("g");
  const std::string positions = keys.prefix + "pos";
  ASSERT_EQ(*cluster_->Command(cluster_->MasterOf(positions), {"EXISTS", positions}), "1");
  std::optional<PendingAnswer<PollResult>> polled;
  const absl::Status moved = cluster_->MoveSlotSplitAfter({keys.group}, [&] {
    polled.emplace([&](auto done) { b_->store->Poll("g", "c", 100, std::move(done)); });
  });
  ASSERT_TRUE(moved.ok()) << moved;
  ASSERT_TRUE(polled.has_value());

  absl::StatusOr<PollResult> second = polled->Wait();
  ASSERT_TRUE(second.ok()) << second.status();
  std::vector<std::string> keys_polled;
  for (const Delivery& d : second->deliveries) keys_polled.push_back(d.event.key);
  EXPECT_EQ(keys_polled, later);
}

TEST_F(RedisConsumerGroupsTest, AGroupStartsAfterASequenceOfTheReplicasWatchFeed) {
  const std::vector<std::string> keys = Expire(0, 3);
  absl::StatusOr<EventBatch> watched =
      a_->store->events().Read(0, EventFilter{}, ReadLimits{.max_events = 2});
  ASSERT_TRUE(watched.ok()) << watched.status();
  ASSERT_EQ(watched->events.size(), 2u);
  ASSERT_TRUE(Create(*a_, "g", {},
                     {.kind = GroupStart::Kind::kAfterSequence,
                      .after_sequence = watched->events[1].sequence})
                  .ok());
  absl::StatusOr<PollResult> polled = Poll(*b_, "g", "c", 10);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 1u);
  EXPECT_EQ(polled->deliveries[0].event.key, keys[2]);
  EXPECT_EQ(Create(*a_, "beyond", {},
                   {.kind = GroupStart::Kind::kAfterSequence,
                    .after_sequence =
                        a_->store->events().last_sequence() + RedisEventSource::kPositionSpacing})
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(RedisConsumerGroupsTest, AGroupGetsOnlyTheEventsItsFilterMatches) {
  const std::string other = CollectionPerPartition(*a_->store, "users:")[1];
  ASSERT_TRUE(Create(*a_, "orders", {.filter = {.prefix = "orders:"}}).ok());
  ASSERT_TRUE(Create(*a_, "one", {.filter = {.collections = {other}}}).ok());
  Expire(1, 4);
  Expire(1, 3, other);
  absl::StatusOr<PollResult> orders = Poll(*a_, "orders", "c", 100);
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_EQ(orders->deliveries.size(), 4u);
  absl::StatusOr<PollResult> one = Poll(*b_, "one", "c", 100);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->deliveries.size(), 3u);
  for (const Delivery& d : one->deliveries) EXPECT_EQ(d.event.collection, other);
}

TEST_F(RedisConsumerGroupsTest, APollReadsPastABacklogItsFilterDoesNotMatch) {
  const std::string wanted = CollectionPerPartition(*a_->store, "wanted:")[0];
  ASSERT_TRUE(Create(*a_, "narrow", {.filter = {.collections = {wanted}}}).ok());
  // More than one read of a partition examines.
  Expire(0, 700);
  Expire(0, 700);
  const std::vector<std::string> keys = Expire(0, 1, wanted);
  absl::StatusOr<PollResult> polled = Poll(*b_, "narrow", "c", 10);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 1u);
  EXPECT_EQ(polled->deliveries[0].event.key, keys[0]);
}

TEST_F(RedisConsumerGroupsTest, AnExpiredLeaseIsRedeliveredAndTheLateAckRefused) {
  ASSERT_TRUE(Create(*a_, "g", {.visibility_timeout = kVisibility}).ok());
  Expire(2, 6);
  absl::StatusOr<PollResult> dead = Poll(*a_, "g", "dies", 3);
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->deliveries.size(), 3u);
  EXPECT_EQ(dead->deliveries[0].lease_deadline, clock_.Now() + kVisibility);
  absl::StatusOr<PollResult> alive = Poll(*b_, "g", "survivor", 100);
  ASSERT_TRUE(alive.ok()) << alive.status();
  ASSERT_EQ(alive->deliveries.size(), 3u) << "the leased half is not handed out again";
  ASSERT_TRUE(Ack(*b_, "g", "survivor", LeasesOf(*alive)).ok());

  clock_.Advance(kVisibility - absl::Milliseconds(1));
  EXPECT_TRUE(Poll(*b_, "g", "survivor", 100)->deliveries.empty());
  clock_.Advance(absl::Milliseconds(1));
  absl::StatusOr<PollResult> redelivered = Poll(*b_, "g", "survivor", 100);
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  ASSERT_EQ(redelivered->deliveries.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(redelivered->deliveries[i].event.sequence, dead->deliveries[i].event.sequence);
    EXPECT_EQ(redelivered->deliveries[i].delivery_count, 2u);
  }
  absl::StatusOr<std::vector<absl::Status>> late = Ack(*a_, "g", "dies", LeasesOf(*dead));
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_EQ(late->size(), 3u);
  EXPECT_EQ((*late)[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains((*late)[0].message(), "handled more than once")) << (*late)[0];
  EXPECT_TRUE(absl::StrContains((*late)[0].message(), "leased to consumer \"survivor\""))
      << (*late)[0];

  absl::StatusOr<ConsumerGroupInfo> info = Get(*a_, "g", 10);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->leases.size(), 3u);
  EXPECT_EQ(info->leases[0].consumer, "survivor");
  EXPECT_EQ(info->leases[0].delivery_count, 2u);
  ASSERT_EQ(info->consumers.size(), 2u);
  EXPECT_EQ(info->consumers[0].name, "dies");
  EXPECT_EQ(info->consumers[0].unacked, 0u);
  EXPECT_EQ(info->consumers[1].unacked, 3u);
}

TEST_F(RedisConsumerGroupsTest, ALeaseThatExpiresIsAnnouncedOnAReplicaWaitingOnTheGroup) {
  ASSERT_TRUE(Create(*a_, "g", {.visibility_timeout = kVisibility}).ok());
  Expire(1, 2);
  absl::StatusOr<PollResult> held = Poll(*a_, "g", "holder", 10);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->deliveries.size(), 2u);
  // A long poll on the other replica finds nothing and waits.
  absl::StatusOr<PollResult> waiting = Poll(*b_, "g", "waiter", 10);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_TRUE(waiting->deliveries.empty());
  const size_t before = b_->ReadableCount("g");

  clock_.Advance(kVisibility - absl::Milliseconds(1));
  b_->store->consumer_groups().FireDueAlarmsForTesting();
  EXPECT_EQ(b_->ReadableCount("g"), before) << "announced before the lease expired";
  clock_.Advance(absl::Milliseconds(1));
  b_->store->consumer_groups().FireDueAlarmsForTesting();
  ASSERT_TRUE(b_->WaitReadable("g", before + 1));
  absl::StatusOr<PollResult> redelivered = Poll(*b_, "g", "waiter", 10);
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  EXPECT_EQ(redelivered->deliveries.size(), 2u);
}

TEST_F(RedisConsumerGroupsTest, ANackThroughOneReplicaWakesTheWaitersOfAnother) {
  ASSERT_TRUE(Create(*a_, "g").ok());
  Expire(2, 1);
  absl::StatusOr<PollResult> held = Poll(*a_, "g", "holder", 10);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->deliveries.size(), 1u);
  absl::StatusOr<PollResult> waiting = Poll(*b_, "g", "waiter", 10);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_TRUE(waiting->deliveries.empty());
  // Subscribing announces the group once (a message may have been missed).
  ASSERT_TRUE(b_->WaitReadable("g", 1));
  const size_t before = b_->ReadableCount("g");

  ASSERT_TRUE(Nack(*a_, "g", "holder", LeasesOf(*held)).ok());
  ASSERT_TRUE(b_->WaitReadable("g", before + 1));
  absl::StatusOr<PollResult> redelivered = Poll(*b_, "g", "waiter", 10);
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  ASSERT_EQ(redelivered->deliveries.size(), 1u);
  EXPECT_EQ(redelivered->deliveries[0].delivery_count, 2u);
}

TEST_F(RedisConsumerGroupsTest, AnExtendedLeaseOutlivesTheVisibilityTimeout) {
  ASSERT_TRUE(Create(*a_, "g", {.visibility_timeout = kVisibility}).ok());
  Expire(3, 1);
  absl::StatusOr<PollResult> polled = Poll(*a_, "g", "slow", 1);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 1u);
  absl::StatusOr<std::vector<absl::Status>> extended =
      Await<std::vector<absl::Status>>([&](auto done) {
        b_->store->ExtendLeases("g", "slow", LeasesOf(*polled), absl::Minutes(5), std::move(done));
      });
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_TRUE((*extended)[0].ok()) << (*extended)[0];
  clock_.Advance(kVisibility * 2);
  EXPECT_TRUE(Poll(*b_, "g", "other", 10)->deliveries.empty());
  absl::StatusOr<std::vector<absl::Status>> acked = Ack(*b_, "g", "slow", LeasesOf(*polled));
  ASSERT_TRUE(acked.ok()) << acked.status();
  EXPECT_TRUE((*acked)[0].ok()) << (*acked)[0];
}

TEST_F(RedisConsumerGroupsTest, NackRedeliversThenDeadLettersAfterMaxDeliveriesAndRedriveRevives) {
  ASSERT_TRUE(Create(*a_, "g", {.max_deliveries = 2}).ok());
  const std::vector<std::string> keys = Expire(0, 2);
  absl::StatusOr<PollResult> first = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->deliveries.size(), 2u);
  ASSERT_TRUE(Ack(*a_, "g", "c", {LeasesOf(*first)[1]}).ok());
  const LeaseRef lease = LeasesOf(*first)[0];
  absl::StatusOr<std::vector<absl::Status>> released = Nack(*b_, "g", "c", {lease});
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE((*released)[0].ok()) << (*released)[0];
  absl::StatusOr<PollResult> second = Poll(*b_, "g", "d", 10);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->deliveries.size(), 1u);
  EXPECT_EQ(second->deliveries[0].event.sequence, lease.sequence);
  EXPECT_EQ(second->deliveries[0].delivery_count, 2u);
  ASSERT_TRUE(Nack(*b_, "g", "d", LeasesOf(*second)).ok());
  EXPECT_TRUE(Poll(*a_, "g", "c", 10)->deliveries.empty()) << "dead-lettered after 2 deliveries";

  absl::StatusOr<DeadLetterPage> letters = Await<DeadLetterPage>(
      [&](auto done) { a_->store->ListDeadLetters("g", 0, 10, std::move(done)); });
  ASSERT_TRUE(letters.ok()) << letters.status();
  ASSERT_EQ(letters->letters.size(), 1u);
  EXPECT_EQ(letters->letters[0].event.sequence, lease.sequence);
  EXPECT_EQ(letters->letters[0].event.key, keys[0]);
  EXPECT_EQ(letters->letters[0].delivery_count, 2u);
  EXPECT_EQ(letters->letters[0].consumer, "d");
  EXPECT_EQ(letters->letters[0].dead_lettered_at,
            absl::FromUnixMillis(absl::ToUnixMillis(clock_.Now())));
  EXPECT_FALSE(letters->next_after.has_value());
  EXPECT_EQ(Get(*a_, "g")->dead_lettered, 1u);

  absl::StatusOr<size_t> redriven =
      Await<size_t>([&](auto done) { b_->store->RedriveDeadLetters("g", {}, std::move(done)); });
  ASSERT_TRUE(redriven.ok()) << redriven.status();
  EXPECT_EQ(*redriven, 1u);
  absl::StatusOr<PollResult> revived = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(revived.ok()) << revived.status();
  ASSERT_EQ(revived->deliveries.size(), 1u);
  EXPECT_EQ(revived->deliveries[0].delivery_count, 1u);
  EXPECT_EQ(Get(*a_, "g")->dead_lettered, 0u);
}

TEST_F(RedisConsumerGroupsTest, DeadLettersArePagedAndRedrivenByTheirIds) {
  ASSERT_TRUE(Create(*a_, "g", {.max_deliveries = 1}).ok());
  Expire(3, 3);
  absl::StatusOr<PollResult> polled = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 3u);
  ASSERT_TRUE(Nack(*a_, "g", "c", LeasesOf(*polled)).ok());
  absl::StatusOr<DeadLetterPage> first = Await<DeadLetterPage>(
      [&](auto done) { b_->store->ListDeadLetters("g", 0, 2, std::move(done)); });
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->letters.size(), 2u);
  EXPECT_EQ(first->letters[0].event.sequence, polled->deliveries[0].event.sequence);
  ASSERT_EQ(first->next_after, first->letters[1].event.sequence);
  absl::StatusOr<DeadLetterPage> rest = Await<DeadLetterPage>(
      [&](auto done) { b_->store->ListDeadLetters("g", *first->next_after, 2, std::move(done)); });
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->letters.size(), 1u);
  EXPECT_EQ(rest->letters[0].event.sequence, polled->deliveries[2].event.sequence);
  EXPECT_FALSE(rest->next_after.has_value());

  const std::vector<uint64_t> ids = {polled->deliveries[1].event.sequence, GroupEventId(99, 3)};
  absl::StatusOr<size_t> redriven =
      Await<size_t>([&](auto done) { a_->store->RedriveDeadLetters("g", ids, std::move(done)); });
  ASSERT_TRUE(redriven.ok()) << redriven.status();
  EXPECT_EQ(*redriven, 1u) << "ids that are not dead letters are skipped";
  absl::StatusOr<PollResult> revived = Poll(*b_, "g", "c", 10);
  ASSERT_TRUE(revived.ok()) << revived.status();
  ASSERT_EQ(revived->deliveries.size(), 1u);
  EXPECT_EQ(revived->deliveries[0].event.sequence, ids[0]);
  EXPECT_EQ(Get(*b_, "g")->dead_lettered, 2u);
}

TEST_F(RedisConsumerGroupsTest, ResetDropsThePendingEventsAndMovesThePosition) {
  ASSERT_TRUE(Create(*a_, "g").ok());
  Expire(1, 3);
  absl::StatusOr<PollResult> polled = Poll(*a_, "g", "c", 2);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 2u);
  absl::StatusOr<ConsumerGroupInfo> reset = Await<ConsumerGroupInfo>([&](auto done) {
    b_->store->ResetConsumerGroup("g", {.kind = GroupStart::Kind::kOldest}, std::move(done));
  });
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(reset->pending, 0u);
  EXPECT_EQ(reset->position, 0u);
  absl::StatusOr<std::vector<absl::Status>> refused = Ack(*a_, "g", "c", LeasesOf(*polled));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ((*refused)[0].code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<PollResult> again = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->deliveries.size(), 3u);
  EXPECT_EQ(b_->ReadableCount("g"), 1u);
}

TEST_F(RedisConsumerGroupsTest, APollBoundsWhatAConsumerHoldsByMaxUnacked) {
  ASSERT_TRUE(Create(*a_, "g", {.max_unacked_per_consumer = 4}).ok());
  Expire(2, 6);
  absl::StatusOr<PollResult> first = Poll(*a_, "g", "c", 3);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->deliveries.size(), 3u);
  absl::StatusOr<PollResult> second = Poll(*b_, "g", "c", 3);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->deliveries.size(), 1u);
  EXPECT_EQ(Poll(*b_, "g", "other", 10)->deliveries.size(), 2u);
}

TEST_F(RedisConsumerGroupsTest, EventsTrimmedBeforeTheGroupReadThemAreReportedLostOnce) {
  ASSERT_TRUE(Create(*a_, "g").ok());
  Expire(3, 5);
  // As MAXLEN does when the stream passes its retention.
  const std::string events = PartitionKeys(a_->store->TagOf(3)).events;
  ASSERT_TRUE(cluster_->CommandOnOwner(events, {"XTRIM", events, "MAXLEN", "2"}).ok());
  absl::StatusOr<PollResult> polled = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_TRUE(polled->lost.has_value());
  EXPECT_EQ(polled->lost->first, GroupEventId(1, 3));
  EXPECT_EQ(polled->lost->last, GroupEventId(3, 3));
  EXPECT_EQ(polled->deliveries.size(), 2u);
  absl::StatusOr<PollResult> after = Poll(*a_, "g", "c", 10);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->lost.has_value());
  EXPECT_EQ(Get(*b_, "g")->lost_sequences_total, 3u);
}

TEST_F(RedisConsumerGroupsTest, BadRequestsAreInvalidArgumentNamingTheField) {
  absl::StatusOr<ConsumerGroupInfo> created =
      Create(*a_, "g", {.visibility_timeout = absl::ZeroDuration()});
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(created.status().message(), "visibility_timeout"));
  EXPECT_TRUE(absl::StrContains(Create(*a_, "bad name").status().message(), "name"));
  EXPECT_TRUE(absl::StrContains(
      Create(*a_, "g", {.max_deliveries = limits_.max_deliveries + 1}).status().message(),
      "max_deliveries"));
  ASSERT_TRUE(Create(*a_, "g").ok());

  EXPECT_EQ(Poll(*a_, "missing", "c", 1).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<PollResult> nameless = Poll(*a_, "g", "", 1);
  EXPECT_EQ(nameless.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(nameless.status().message(), "consumer"));
  EXPECT_TRUE(absl::StrContains(Poll(*a_, "g", "c", 0).status().message(), "max_events"));
  absl::StatusOr<std::vector<absl::Status>> extended =
      Await<std::vector<absl::Status>>([&](auto done) {
        a_->store->ExtendLeases("g", "c", {}, absl::ZeroDuration(), std::move(done));
      });
  EXPECT_TRUE(absl::StrContains(extended.status().message(), "extension"));
  std::vector<uint64_t> many(limits_.max_members_per_request + 1, 1);
  absl::StatusOr<size_t> redriven =
      Await<size_t>([&](auto done) { a_->store->RedriveDeadLetters("g", many, std::move(done)); });
  EXPECT_TRUE(absl::StrContains(redriven.status().message(), "sequences"));
  absl::StatusOr<ConsumerGroups::Page> page = Await<ConsumerGroups::Page>(
      [&](auto done) { a_->store->ListConsumerGroups(-1, "", std::move(done)); });
  EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<absl::Status>> unknown =
      Ack(*a_, "g", "c", {{.sequence = GroupEventId(5, 0)}});
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_TRUE(absl::StrContains((*unknown)[0].message(), "has not delivered it")) << (*unknown)[0];
}

TEST_F(RedisConsumerGroupsTest, GroupCountIsBoundedByMaxConsumerGroups) {
  limits_.max_consumer_groups = 2;
  a_ = OpenReplica();
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(Create(*a_, "one").ok());
  ASSERT_TRUE(Create(*a_, "two").ok());
  EXPECT_EQ(Create(*a_, "three").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(RedisConsumerGroupsTest, CreatesOnTwoReplicasAtOnceNeverPassMaxConsumerGroups) {
  limits_.max_consumer_groups = 3;
  a_ = OpenReplica();
  b_ = OpenReplica();
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  // Every create is sent before any is answered: each sees room if the
  // check and the create are apart.
  constexpr int kCreates = 10;
  Mutex mu;
  CondVar cv;
  int answered = 0;
  int created = 0;
  int exhausted = 0;
  for (int i = 0; i < kCreates; ++i) {
    Replica& r = i % 2 == 0 ? *a_ : *b_;
    r.store->CreateConsumerGroup(
        absl::StrCat("g", i), {}, {}, [&](absl::StatusOr<ConsumerGroupInfo> info) {
          MutexLock lock(&mu);
          ++answered;
          if (info.ok()) ++created;
          if (absl::IsResourceExhausted(info.status())) ++exhausted;
          EXPECT_TRUE(info.ok() || absl::IsResourceExhausted(info.status())) << info.status();
          cv.SignalAll();
        });
  }
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(WaitWithPatience(mu, cv, [&] { return answered == kCreates; }));
    EXPECT_EQ(created, 3);
    EXPECT_EQ(exhausted, kCreates - 3);
  }
  absl::StatusOr<ConsumerGroups::Page> page = Await<ConsumerGroups::Page>(
      [&](auto done) { b_->store->ListConsumerGroups(0, "", std::move(done)); });
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->groups.size(), 3u);
  // A create refused for want of room leaves none taken: deleting one group
  // makes room for exactly one.
  ASSERT_TRUE(Await<ConsumerGroupInfo>([&](auto done) {
                b_->store->DeleteConsumerGroup(page->groups[0].name, std::move(done));
              }).ok());
  EXPECT_TRUE(Create(*a_, "again").ok());
  EXPECT_EQ(Create(*b_, "more").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(RedisConsumerGroupsTest, ACreateRefusedAsAlreadyExistingTakesNoRoom) {
  limits_.max_consumer_groups = 2;
  a_ = OpenReplica();
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(Create(*a_, "one").ok());
  EXPECT_EQ(Create(*a_, "one").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Create(*b_, "one").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(Create(*b_, "two").ok());
  EXPECT_EQ(Create(*a_, "three").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Get(*b_, "one").ok());
}

// A create whose reservation WAIT cannot confirm (the {meta} master's
// replica is stopped) fails UNAVAILABLE and gives the reservation back: the
// name takes no room, and another group can be created in it.
TEST_F(RedisConsumerGroupsTest, ACreateWhoseReservationWaitTimesOutGivesTheRoomBack) {
  limits_.max_consumer_groups = 1;
  a_ = OpenReplica();
  ASSERT_NE(a_, nullptr);
  RedisClusterStoreOptions options = StoreOptions(kPartitions);
  options.limits = limits_;
  options.wait_timeout = absl::Milliseconds(100);
  std::unique_ptr<RedisClusterStore> hasty = OpenStore(std::move(options));
  ASSERT_NE(hasty, nullptr);
  const GroupIndexKeys index;
  const int replica = cluster_->ReplicaOf(cluster_->MasterOf(index.names));
  ASSERT_NE(replica, 0);

  cluster_->Signal(replica, SIGSTOP);
  const absl::Status unconfirmed = Await<ConsumerGroupInfo>([&](auto done) {
                                     hasty->CreateConsumerGroup("lost", {}, {}, std::move(done));
                                   }).status();
  cluster_->Signal(replica, SIGCONT);
  EXPECT_EQ(unconfirmed.code(), absl::StatusCode::kUnavailable) << unconfirmed;
  EXPECT_TRUE(absl::StrContains(unconfirmed.message(), "WAIT")) << unconfirmed;

  EXPECT_EQ(*cluster_->Command(cluster_->MasterOf(index.names), {"ZSCORE", index.names, "lost"}),
            "");
  EXPECT_TRUE(Create(*a_, "other").ok());
  EXPECT_EQ(Get(*a_, "lost").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lapse::redis

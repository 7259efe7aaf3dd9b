#include "server/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixMillis(1'700'000'000'000);

class EngineTest : public ::testing::Test {
 protected:
  EngineTest()
      : clock_(kStart), log_(EventFeed::Options{}), engine_(MakeOptions(), &clock_, &log_) {}

  static Engine::Options MakeOptions() {
    Engine::Options options;
    options.shards = 4;
    return options;
  }

  absl::Status PutTtl(absl::string_view c, absl::string_view key, absl::string_view value,
                      absl::Duration ttl) {
    MemberWrite w{key, value, Expiration::Ttl(ttl)};
    return engine_.Put(c, {w}, {}).status();
  }
  absl::Status PutPersistent(absl::string_view c, absl::string_view key, absl::string_view value) {
    MemberWrite w{key, value, Expiration::None()};
    return engine_.Put(c, {w}, {}).status();
  }

  // Puts "a" and "b" in collection "c", both "new" and persistent, under
  // `condition`; the outcome of each, or none when the put failed.
  std::vector<PutOutcome> PutNewAAndB(PutCondition condition) {
    MemberWrite writes[] = {
        {"a", "new", Expiration::None(), condition},
        {"b", "new", Expiration::None(), condition},
    };
    absl::StatusOr<std::vector<PutResult>> r = engine_.Put("c", writes, {});
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<PutOutcome> outcomes;
    if (r.ok()) {
      for (const PutResult& result : *r) outcomes.push_back(result.outcome);
    }
    return outcomes;
  }

  // Every event appended since the last call.
  std::vector<ExpiryEvent> NewEvents() {
    EventFilter all;
    all.include_values = true;
    absl::StatusOr<EventBatch> batch = log_.Read(cursor_, all, ReadLimits{});
    EXPECT_TRUE(batch.ok()) << batch.status();
    cursor_ = batch->examined_sequence;
    return std::move(batch->events);
  }

  std::vector<std::string> KeysOf(const std::vector<ExpiryEvent>& events) {
    std::vector<std::string> keys;
    for (const ExpiryEvent& e : events) keys.push_back(e.key);
    return keys;
  }

  GetResult GetOne(absl::string_view c, absl::string_view key) {
    absl::string_view keys[] = {key};
    absl::StatusOr<std::vector<GetResult>> r = engine_.Get(c, keys);
    EXPECT_TRUE(r.ok()) << r.status();
    return (*r)[0];
  }

  FakeClock clock_;
  EventFeed log_;
  Engine engine_;
  uint64_t cursor_ = 0;
};

TEST_F(EngineTest, PutThenGetReturnsValueAndDeadlineRoundedUpToTheMillisecond) {
  ASSERT_TRUE(PutTtl("orders:42", "o1", "v1", absl::Microseconds(1500)).ok());
  GetResult r = GetOne("orders:42", "o1");
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.value, "v1");
  EXPECT_EQ(r.expire_time, kStart + absl::Milliseconds(2));
}

TEST_F(EngineTest, PutWithAbsoluteExpireTime) {
  MemberWrite w{"k", "v", Expiration::At(kStart + absl::Seconds(10))};
  auto r = engine_.Put("c", {w}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, PutOutcome::kCreated);
  EXPECT_EQ((*r)[0].expire_time, kStart + absl::Seconds(10));
}

TEST_F(EngineTest, PutReportsCreatedThenReplaced) {
  MemberWrite w{"k", "v", Expiration::None()};
  EXPECT_EQ((*engine_.Put("c", {w}, {}))[0].outcome, PutOutcome::kCreated);
  EXPECT_EQ((*engine_.Put("c", {w}, {}))[0].outcome, PutOutcome::kReplaced);
  EXPECT_EQ(engine_.total_members(), 1u);
}

TEST_F(EngineTest, PersistentMemberHasNoDeadlineAndNeverExpires) {
  ASSERT_TRUE(PutPersistent("c", "k", "v").ok());
  clock_.Advance(absl::Hours(24 * 365));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  GetResult r = GetOne("c", "k");
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.expire_time, NoDeadline());
}

TEST_F(EngineTest, IfAbsentSkipsExistingMembersAndWritesNewOnes) {
  ASSERT_TRUE(PutPersistent("c", "a", "old").ok());
  EXPECT_THAT(PutNewAAndB(PutCondition::kIfAbsent),
              ElementsAre(PutOutcome::kSkipped, PutOutcome::kCreated));
  EXPECT_EQ(GetOne("c", "a").value, "old");
  EXPECT_EQ(GetOne("c", "b").value, "new");
}

TEST_F(EngineTest, IfPresentSkipsAbsentMembers) {
  ASSERT_TRUE(PutPersistent("c", "a", "old").ok());
  EXPECT_THAT(PutNewAAndB(PutCondition::kIfPresent),
              ElementsAre(PutOutcome::kReplaced, PutOutcome::kSkipped));
  EXPECT_EQ(GetOne("c", "a").value, "new");
  EXPECT_FALSE(GetOne("c", "b").found);
}

TEST_F(EngineTest, IfPresentOnMissingCollectionCreatesNothing) {
  MemberWrite w{"a", "v", Expiration::None(), PutCondition::kIfPresent};
  auto r = engine_.Put("c", {w}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, PutOutcome::kSkipped);
  EXPECT_EQ(engine_.GetCollection("c").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, KeepExpirationOverwritesValueAndKeepsDeadline) {
  ASSERT_TRUE(PutTtl("c", "k", "v1", absl::Seconds(30)).ok());
  MemberWrite w{"k", "a-longer-value", Expiration::None()};
  w.keep_expiration = true;
  auto r = engine_.Put("c", {w}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].expire_time, kStart + absl::Seconds(30));
  GetResult g = GetOne("c", "k");
  EXPECT_EQ(g.value, "a-longer-value");
  EXPECT_EQ(g.expire_time, kStart + absl::Seconds(30));
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(engine_.ExpireDue(), 1u);
}

TEST_F(EngineTest, KeepExpirationOnNewMemberMakesItPersistent) {
  MemberWrite w{"k", "v", Expiration::None()};
  w.keep_expiration = true;
  auto r = engine_.Put("c", {w}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].expire_time, NoDeadline());
}

TEST_F(EngineTest, KeepExpirationWithTtlIsInvalid) {
  MemberWrite w{"k", "v", Expiration::Ttl(absl::Seconds(1))};
  w.keep_expiration = true;
  absl::Status s = engine_.Put("c", {w}, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("members[0].keep_expiration"));
}

TEST_F(EngineTest, DefaultExpirationAppliesOnlyToWritesWithoutTheirOwn) {
  ASSERT_TRUE(PutTtl("c", "kept", "v", absl::Seconds(30)).ok());
  MemberWrite writes[] = {
      {"plain", "v", Expiration::None()},
      {"own", "v", Expiration::Ttl(absl::Seconds(5))},
      {"kept", "v2", Expiration::None()},
  };
  writes[2].keep_expiration = true;
  PutOptions options;
  options.default_expiration = Expiration::Ttl(absl::Microseconds(10'500));
  auto r = engine_.Put("c", writes, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].expire_time, kStart + absl::Milliseconds(11));
  EXPECT_EQ((*r)[1].expire_time, kStart + absl::Seconds(5));
  EXPECT_EQ((*r)[2].expire_time, kStart + absl::Seconds(30));
  EXPECT_EQ(GetOne("c", "plain").expire_time, kStart + absl::Milliseconds(11));
}

TEST_F(EngineTest, InvalidDefaultExpirationNamesItsFieldAndWritesNothing) {
  MemberWrite w{"k", "v", Expiration::None()};
  PutOptions options;
  options.default_expiration = Expiration::Ttl(-absl::Seconds(1));
  absl::Status s = engine_.Put("c", {w}, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("default_ttl"));
  options.default_expiration = Expiration::At(kStart - absl::Seconds(1));
  s = engine_.Put("c", {w}, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("default_expire_time"));
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, MaxMembersRejectsTheWholeBatchAndWritesNothing) {
  ASSERT_TRUE(PutPersistent("orders", "o1", "v").ok());
  ASSERT_TRUE(PutPersistent("orders", "o2", "v").ok());
  MemberWrite writes[] = {
      {"o2", "replaced", Expiration::None()},
      {"o3", "v", Expiration::None()},
      {"o4", "v", Expiration::None()},
  };
  absl::Status s = engine_.Put("orders", writes, {.max_members = 3}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("max_members"));
  EXPECT_EQ(GetOne("orders", "o2").value, "v");
  EXPECT_FALSE(GetOne("orders", "o3").found);
  EXPECT_EQ(engine_.GetCollection("orders")->member_count, 2u);
}

TEST_F(EngineTest, MaxMembersCountsReplacementsAsNoGrowth) {
  ASSERT_TRUE(PutPersistent("orders", "o1", "v").ok());
  MemberWrite writes[] = {{"o1", "v2", Expiration::None()}, {"o2", "v", Expiration::None()}};
  EXPECT_TRUE(engine_.Put("orders", writes, {.max_members = 2}).ok());
}

TEST_F(EngineTest, MaxMembersIgnoresMembersPastTheirDeadline) {
  ASSERT_TRUE(PutTtl("orders", "o1", "v", absl::Seconds(1)).ok());
  clock_.Advance(absl::Seconds(1));
  MemberWrite w{"o2", "v", Expiration::None()};
  EXPECT_TRUE(engine_.Put("orders", {w}, {.max_members = 1}).ok());
  EXPECT_THAT(KeysOf(NewEvents()), ElementsAre("o1"));
}

TEST_F(EngineTest, MaxMembersIsAtomicUnderConcurrentWriters) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string key = absl::StrCat("t", t, "-", i);
        MemberWrite w{key, "v", Expiration::None()};
        if (engine_.Put("limited", {w}, {.max_members = 3}).ok()) ++accepted;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 3);
  EXPECT_EQ(engine_.GetCollection("limited")->member_count, 3u);
}

TEST_F(EngineTest, MaxTotalMembersIsResourceExhausted) {
  Engine::Options options = MakeOptions();
  options.limits.max_total_members = 2;
  Engine engine(options, &clock_, &log_);
  MemberWrite a{"a", "v", Expiration::None()}, b{"b", "v", Expiration::None()},
      c{"c", "v", Expiration::None()};
  ASSERT_TRUE(engine.Put("x", {a}, {}).ok());
  ASSERT_TRUE(engine.Put("y", {b}, {}).ok());
  EXPECT_EQ(engine.Put("z", {c}, {}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(engine.Put("x", {a}, {}).ok()) << "replacing does not grow the total";
}

TEST_F(EngineTest, MaxTotalMembersHoldsForWritersOnTwoShardsCheckingAtOnce) {
  // The first writer is held between its limit check and its write while a
  // writer on another shard checks and writes: only one of them may pass.
  Mutex mu;
  CondVar cv;
  bool hold_next = false;
  bool held = false;
  bool released = false;
  Engine::Options options = MakeOptions();
  options.limits.max_total_members = 1;
  options.put_checked_hook_for_testing = [&] {
    MutexLock lock(&mu);
    if (!hold_next) return;
    hold_next = false;
    held = true;
    cv.SignalAll();
    EXPECT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return released; }));
  };
  Engine engine(options, &clock_, &log_);
  std::string other = "other-0";
  for (int i = 1; engine.ShardIndexForTesting(other) == engine.ShardIndexForTesting("held"); ++i) {
    other = absl::StrCat("other-", i);
  }
  MemberWrite a{"a", "v", Expiration::None()}, b{"b", "v", Expiration::None()};
  {
    MutexLock lock(&mu);
    hold_next = true;
  }
  absl::Status held_status;
  std::thread writer([&] { held_status = engine.Put("held", {a}, {}).status(); });
  bool was_held;
  {
    MutexLock lock(&mu);
    was_held = testing::WaitWithPatience(mu, cv, [&] { return held; });
  }
  EXPECT_TRUE(was_held);
  absl::Status other_status = absl::UnknownError("not run");
  if (was_held) other_status = engine.Put(other, {b}, {}).status();
  {
    MutexLock lock(&mu);
    released = true;
    cv.SignalAll();
  }
  writer.join();
  EXPECT_TRUE(held_status.ok()) << held_status;
  EXPECT_EQ(other_status.code(), absl::StatusCode::kResourceExhausted) << other_status;
  EXPECT_EQ(engine.total_members(), 1u);
}

TEST_F(EngineTest, ExpiredMemberIsInvisibleBeforeTheExpirerRuns) {
  ASSERT_TRUE(PutTtl("c", "gone", "v", absl::Seconds(5)).ok());
  ASSERT_TRUE(PutTtl("c", "stays", "v", absl::Seconds(50)).ok());
  clock_.Advance(absl::Seconds(5));
  // No ExpireDue: the member is past its deadline but not yet reaped.
  EXPECT_FALSE(GetOne("c", "gone").found);
  absl::StatusOr<CollectionInfo> info = engine_.GetCollection("c");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->member_count, 1u);
  EXPECT_EQ(info->expiring_count, 1u);
  EXPECT_EQ(info->next_expire_time, kStart + absl::Seconds(50));
  auto page = engine_.ListMembers("c", {});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->members.size(), 1u);
  EXPECT_EQ(page->members[0].key, "stays");
  auto cols = engine_.ListCollections("", 0, "");
  ASSERT_EQ(cols->collections.size(), 1u);
  EXPECT_EQ(cols->collections[0].member_count, 1u);
}

TEST_F(EngineTest, MemberIsVisibleUntilTheMillisecondOfItsDeadline) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(5)).ok());
  clock_.Advance(absl::Seconds(5) - absl::Nanoseconds(1));
  EXPECT_TRUE(GetOne("c", "k").found);
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_FALSE(GetOne("c", "k").found);
}

TEST_F(EngineTest, EachExpiryProducesExactlyOneEventWithValueAndTimes) {
  ASSERT_TRUE(PutTtl("orders:42", "o1", "payload", absl::Seconds(30)).ok());
  clock_.Advance(absl::Seconds(31));
  EXPECT_EQ(engine_.ExpireDue(), 1u);
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  std::vector<ExpiryEvent> events = NewEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].collection, "orders:42");
  EXPECT_EQ(events[0].key, "o1");
  EXPECT_EQ(events[0].value, "payload");
  EXPECT_EQ(events[0].expire_time, kStart + absl::Seconds(30));
  EXPECT_EQ(events[0].expired_at, kStart + absl::Seconds(31));
  EXPECT_TRUE(NewEvents().empty());
}

TEST_F(EngineTest, LazilyReapedMemberStillProducesExactlyOneEvent) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(1)).ok());
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(GetOne("c", "k").found);  // Reaps it, emitting its event.
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_THAT(KeysOf(NewEvents()), ElementsAre("k"));
}

TEST_F(EngineTest, OverwritingAnExpiredButUnreapedMemberEmitsItsEvent) {
  ASSERT_TRUE(PutTtl("c", "k", "old", absl::Seconds(1)).ok());
  clock_.Advance(absl::Seconds(2));
  MemberWrite w{"k", "new", Expiration::None()};
  auto r = engine_.Put("c", {w}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, PutOutcome::kCreated);
  std::vector<ExpiryEvent> events = NewEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value, "old");
}

TEST_F(EngineTest, NoEventAfterRemove) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(1)).ok());
  absl::string_view keys[] = {"k", "missing"};
  auto removed = engine_.Remove("c", keys);
  ASSERT_TRUE(removed.ok());
  EXPECT_THAT(*removed, ElementsAre(true, false));
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(NewEvents().empty());
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, NoEventAfterOverwriteWithNewDeadline) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutTtl("c", "k", "v2", absl::Seconds(10)).ok());
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(NewEvents().empty());
  clock_.Advance(absl::Seconds(8));
  EXPECT_EQ(engine_.ExpireDue(), 1u);
  std::vector<ExpiryEvent> events = NewEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value, "v2");
}

TEST_F(EngineTest, NoEventAfterOverwriteWithoutExpiration) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutPersistent("c", "k", "v2").ok());
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(NewEvents().empty());
  EXPECT_TRUE(GetOne("c", "k").found);
}

TEST_F(EngineTest, NoEventAfterPersist) {
  ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutPersistent("c", "p", "v").ok());
  absl::string_view keys[] = {"k", "p", "missing"};
  auto r = engine_.Persist("c", keys);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r, ElementsAre(PersistOutcome::kPersisted, PersistOutcome::kNoExpiration,
                              PersistOutcome::kNotFound));
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(NewEvents().empty());
  EXPECT_EQ(GetOne("c", "k").expire_time, NoDeadline());
}

TEST_F(EngineTest, NoEventAfterDeleteCollection) {
  ASSERT_TRUE(PutTtl("c", "a", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutPersistent("c", "b", "v").ok());
  auto removed = engine_.DeleteCollection("c");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2u);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(NewEvents().empty());
  EXPECT_EQ(*engine_.DeleteCollection("c"), 0u);
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, DeleteCollectionExpiresMembersAlreadyPastTheirDeadlineFirst) {
  ASSERT_TRUE(PutTtl("c", "due", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutTtl("c", "later", "v", absl::Seconds(10)).ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(*engine_.DeleteCollection("c"), 1u);
  EXPECT_THAT(KeysOf(NewEvents()), ElementsAre("due"));
}

TEST_F(EngineTest, EventsComeInDeadlineOrderWithIncreasingSequences) {
  ASSERT_TRUE(PutTtl("a", "third", "v", absl::Seconds(3)).ok());
  ASSERT_TRUE(PutTtl("b", "first", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutTtl("a", "second", "v", absl::Seconds(2)).ok());
  ASSERT_TRUE(PutTtl("c", "fourth", "v", absl::Seconds(4)).ok());
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Seconds(1));
    engine_.ExpireDue();
  }
  std::vector<ExpiryEvent> events = NewEvents();
  EXPECT_THAT(KeysOf(events), ElementsAre("first", "second", "third", "fourth"));
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].sequence, events[i - 1].sequence + 1);
  }
}

TEST_F(EngineTest, ABacklogExpiresEveryMemberEachCollectionInDeadlineOrder) {
  Engine::Options options;
  options.shards = 1;
  options.expire_batch = 2;
  EventFeed log(EventFeed::Options{});
  Engine engine(options, &clock_, &log);
  for (int i = 9; i >= 0; --i) {
    const std::string key = absl::StrCat("k", i);
    MemberWrite w{key, "v", Expiration::Ttl(absl::Seconds(i + 1))};
    ASSERT_TRUE(engine.Put(absl::StrCat("c", i % 3), {w}, {}).ok());
  }
  clock_.Advance(absl::Seconds(100));
  EXPECT_EQ(engine.ExpireDue(), 10u);
  absl::StatusOr<EventBatch> batch = log.Read(0, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->events.size(), 10u);
  std::map<std::string, std::vector<std::string>> by_collection;
  for (const ExpiryEvent& e : batch->events) by_collection[e.collection].push_back(e.key);
  EXPECT_THAT(by_collection["c0"], ElementsAre("k0", "k3", "k6", "k9"));
  EXPECT_THAT(by_collection["c1"], ElementsAre("k1", "k4", "k7"));
  EXPECT_THAT(by_collection["c2"], ElementsAre("k2", "k5", "k8"));
  EXPECT_EQ(batch->events.front().key, "k0");
}

// Large collections go in bulk (every member due) or a batch at a time
// (expire_batch cuts into one): each member makes one event, with its
// value and deadline, in (deadline, key) order within its collection.
TEST_F(EngineTest, LargeCollectionsExpireInBulkWithOneEventPerMember) {
  Engine::Options options;
  options.shards = 1;
  options.expire_batch = 30;
  EventFeed log(EventFeed::Options{});
  Engine engine(options, &clock_, &log);
  std::map<std::string, std::vector<std::string>> want;
  for (const auto& [name, members] : {std::pair<std::string, int>{"big", 100}, {"whole", 40}}) {
    std::vector<std::pair<int, std::string>> order;
    for (int i = 0; i < members; ++i) {
      const std::string key = absl::StrFormat("k%03d", i);
      const int seconds = name == "big" ? 1 + i % 4 : 1;
      const std::string value = absl::StrCat("v", i);
      MemberWrite w{key, value, Expiration::Ttl(absl::Seconds(seconds))};
      ASSERT_TRUE(engine.Put(name, {w}, {}).ok());
      order.emplace_back(seconds, absl::StrCat(key, "=v", i, "@", seconds));
    }
    std::sort(order.begin(), order.end());
    for (const auto& [seconds, event] : order) want[name].push_back(event);
  }
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(engine.ExpireDue(), 140u);
  EXPECT_EQ(engine.total_members(), 0u);
  EventFilter with_values;
  with_values.include_values = true;
  absl::StatusOr<EventBatch> batch = log.Read(0, with_values, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  std::map<std::string, std::vector<std::string>> got;
  for (const ExpiryEvent& e : batch->events) {
    got[e.collection].push_back(
        absl::StrCat(e.key, "=", e.value, "@", absl::ToInt64Seconds(e.expire_time - kStart)));
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(engine.ListCollections("", 0, "")->collections.empty());
}

TEST_F(EngineTest, SimultaneousExpiriesAllProduceEvents) {
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(
        PutTtl(absl::StrCat("c", i % 37), absl::StrCat("k", i), "v", absl::Seconds(1)).ok());
  }
  EXPECT_EQ(engine_.total_members(), 5000u);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(engine_.ExpireDue(), 5000u);
  EXPECT_EQ(engine_.total_members(), 0u);
  size_t events = 0;
  while (true) {
    size_t n = NewEvents().size();
    if (n == 0) break;
    events += n;
  }
  EXPECT_EQ(events, 5000u);
  EXPECT_EQ(engine_.NextDeadline(), NoDeadline());
  EXPECT_TRUE(engine_.ListCollections("", 0, "")->collections.empty());
}

TEST_F(EngineTest, NextDeadlineTracksTheEarliestMember) {
  EXPECT_EQ(engine_.NextDeadline(), NoDeadline());
  ASSERT_TRUE(PutTtl("a", "k", "v", absl::Seconds(30)).ok());
  ASSERT_TRUE(PutTtl("b", "k", "v", absl::Seconds(10)).ok());
  EXPECT_EQ(engine_.NextDeadline(), kStart + absl::Seconds(10));
  absl::string_view keys[] = {"k"};
  ASSERT_TRUE(engine_.Remove("b", keys).ok());
  EXPECT_EQ(engine_.NextDeadline(), kStart + absl::Seconds(30));
}

TEST_F(EngineTest, EarlierDeadlineListenerFiresOnlyWhenTheFrontMovesEarlier) {
  std::vector<absl::Time> notified;
  Engine::Options options;
  options.shards = 1;
  options.earlier_deadline_listener = [&](absl::Time t) { notified.push_back(t); };
  Engine one_shard(options, &clock_, &log_);
  MemberWrite a{"a", "v", Expiration::Ttl(absl::Seconds(30))};
  MemberWrite b{"b", "v", Expiration::Ttl(absl::Seconds(60))};
  MemberWrite c{"c", "v", Expiration::Ttl(absl::Seconds(10))};
  ASSERT_TRUE(one_shard.Put("x", {a}, {}).ok());
  ASSERT_TRUE(one_shard.Put("y", {b}, {}).ok());
  ASSERT_TRUE(one_shard.Put("z", {c}, {}).ok());
  EXPECT_THAT(notified, ElementsAre(kStart + absl::Seconds(30), kStart + absl::Seconds(10)));
}

#ifndef NDEBUG
TEST_F(EngineTest, DebugBuildsCatchAListenerThatCallsIntoTheEngine) {
  Engine* engine = nullptr;
  Engine::Options options;
  options.earlier_deadline_listener = [&](absl::Time) { engine->NextDeadline(); };
  Engine calls_back(options, &clock_, &log_);
  engine = &calls_back;
  MemberWrite w{"k", "v", Expiration::Ttl(absl::Seconds(1))};
  EXPECT_DEATH(calls_back.Put("c", {w}, {}).IgnoreError(), "shard lock taken under another");
}
#endif

// ---- GetMembers with refresh ----

TEST_F(EngineTest, GetWithRefreshTtlSlidesTheDeadline) {
  ASSERT_TRUE(PutTtl("sessions", "s1", "v", absl::Seconds(10)).ok());
  clock_.Advance(absl::Seconds(8));
  absl::string_view keys[] = {"s1", "missing"};
  auto r = engine_.Get("sessions", keys, Expiration::Ttl(absl::Seconds(10)));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].found);
  EXPECT_EQ((*r)[0].expire_time, kStart + absl::Seconds(18));
  EXPECT_FALSE((*r)[1].found);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(engine_.ExpireDue(), 0u);
  EXPECT_TRUE(GetOne("sessions", "s1").found);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(engine_.ExpireDue(), 1u);
}

TEST_F(EngineTest, GetWithRefreshFarFromTheOtherDeadlinesAnswersEveryKey) {
  // A small collection keeps deadlines within 49 days of each other: the
  // first refresh moves its members to the large form.
  ASSERT_TRUE(PutTtl("c", "a", "va", absl::Hours(24 * 100)).ok());
  ASSERT_TRUE(PutTtl("c", "b", "vb", absl::Hours(24 * 99)).ok());
  ASSERT_TRUE(PutTtl("c", "c", "vc", absl::Hours(24 * 98)).ok());
  absl::string_view keys[] = {"c", "b", "missing", "a"};
  auto r = engine_.Get("c", keys, Expiration::Ttl(absl::Seconds(1)));
  ASSERT_TRUE(r.ok());
  const std::vector<std::string> values = {"vc", "vb", "", "va"};
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ((*r)[i].found, !values[i].empty()) << i;
    if (!(*r)[i].found) continue;
    EXPECT_EQ((*r)[i].value, values[i]) << i;
    EXPECT_EQ((*r)[i].expire_time, kStart + absl::Seconds(1)) << i;
  }
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(engine_.ExpireDue(), 3u);
}

TEST_F(EngineTest, GetWithRefreshInThePastIsInvalid) {
  ASSERT_TRUE(PutPersistent("c", "k", "v").ok());
  absl::string_view keys[] = {"k"};
  absl::Status s = engine_.Get("c", keys, Expiration::At(kStart - absl::Seconds(1))).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("refresh_expire_time"));
}

// ---- ExpireMembers ----

struct ExpireCase {
  const char* name;
  bool had_deadline;       // Member starts with a 60 s deadline, or persistent.
  absl::Duration new_ttl;  // New deadline relative to now.
  ExpireCondition condition;
  ExpireOutcome outcome;
};

class ExpireConditionTest : public EngineTest, public ::testing::WithParamInterface<ExpireCase> {};

TEST_P(ExpireConditionTest, AppliesTheConditionLikeHexpire) {
  const ExpireCase& tc = GetParam();
  if (tc.had_deadline) {
    ASSERT_TRUE(PutTtl("c", "k", "v", absl::Seconds(60)).ok());
  } else {
    ASSERT_TRUE(PutPersistent("c", "k", "v").ok());
  }
  absl::string_view keys[] = {"k"};
  auto r = engine_.Expire("c", keys, Expiration::Ttl(tc.new_ttl), tc.condition);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, tc.outcome);
  const absl::Time want = tc.outcome == ExpireOutcome::kUpdated
                              ? kStart + tc.new_ttl
                              : (tc.had_deadline ? kStart + absl::Seconds(60) : NoDeadline());
  EXPECT_EQ((*r)[0].expire_time, want);
  EXPECT_EQ(GetOne("c", "k").expire_time, want);
}

INSTANTIATE_TEST_SUITE_P(
    Conditions, ExpireConditionTest,
    ::testing::Values(ExpireCase{"AlwaysOnPersistent", false, absl::Seconds(5),
                                 ExpireCondition::kAlways, ExpireOutcome::kUpdated},
                      ExpireCase{"NxOnPersistent", false, absl::Seconds(5),
                                 ExpireCondition::kIfNoExpiration, ExpireOutcome::kUpdated},
                      ExpireCase{"NxOnExpiring", true, absl::Seconds(5),
                                 ExpireCondition::kIfNoExpiration, ExpireOutcome::kConditionNotMet},
                      ExpireCase{"XxOnExpiring", true, absl::Seconds(5),
                                 ExpireCondition::kIfHasExpiration, ExpireOutcome::kUpdated},
                      ExpireCase{"XxOnPersistent", false, absl::Seconds(5),
                                 ExpireCondition::kIfHasExpiration,
                                 ExpireOutcome::kConditionNotMet},
                      ExpireCase{"GtLater", true, absl::Seconds(90), ExpireCondition::kIfLater,
                                 ExpireOutcome::kUpdated},
                      ExpireCase{"GtEarlier", true, absl::Seconds(5), ExpireCondition::kIfLater,
                                 ExpireOutcome::kConditionNotMet},
                      ExpireCase{"GtOnPersistentIsNeverMet", false, absl::Hours(1000),
                                 ExpireCondition::kIfLater, ExpireOutcome::kConditionNotMet},
                      ExpireCase{"LtEarlier", true, absl::Seconds(5), ExpireCondition::kIfEarlier,
                                 ExpireOutcome::kUpdated},
                      ExpireCase{"LtLater", true, absl::Seconds(90), ExpireCondition::kIfEarlier,
                                 ExpireOutcome::kConditionNotMet},
                      ExpireCase{"LtOnPersistentIsAlwaysMet", false, absl::Hours(1000),
                                 ExpireCondition::kIfEarlier, ExpireOutcome::kUpdated}),
    [](const ::testing::TestParamInfo<ExpireCase>& info) { return info.param.name; });

TEST_F(EngineTest, ExpireReportsNotFound) {
  ASSERT_TRUE(PutPersistent("c", "k", "v").ok());
  absl::string_view keys[] = {"missing"};
  auto r = engine_.Expire("c", keys, Expiration::Ttl(absl::Seconds(1)), ExpireCondition::kAlways);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kNotFound);
  auto none =
      engine_.Expire("nope", keys, Expiration::Ttl(absl::Seconds(1)), ExpireCondition::kAlways);
  EXPECT_EQ((*none)[0].outcome, ExpireOutcome::kNotFound);
}

TEST_F(EngineTest, ExpireWithAPastDeadlineExpiresNowWithItsEvent) {
  ASSERT_TRUE(PutPersistent("c", "k", "payload").ok());
  absl::string_view keys[] = {"k"};
  const absl::Time past = kStart - absl::Seconds(5);
  auto r = engine_.Expire("c", keys, Expiration::At(past), ExpireCondition::kAlways);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].outcome, ExpireOutcome::kExpired);
  EXPECT_FALSE(GetOne("c", "k").found);
  std::vector<ExpiryEvent> events = NewEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value, "payload");
  EXPECT_EQ(events[0].expire_time, past);
  EXPECT_EQ(events[0].expired_at, kStart);
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, ExpireWithoutExpirationIsInvalid) {
  absl::string_view keys[] = {"k"};
  absl::Status s = engine_.Expire("c", keys, Expiration::None(), ExpireCondition::kAlways).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// ---- ListMembers ----

TEST_F(EngineTest, ListMembersByKeyPagesWithoutGapsOrDuplicates) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(PutPersistent("c", absl::StrFormat("k%02d", i), absl::StrCat("v", i)).ok());
  }
  std::vector<std::string> seen;
  ListMembersOptions options;
  options.page_size = 10;
  int pages = 0;
  while (true) {
    auto page = engine_.ListMembers("c", options);
    ASSERT_TRUE(page.ok());
    ++pages;
    for (const ListedMember& m : page->members) seen.push_back(m.key);
    if (!page->next.has_value()) break;
    options.after = page->next;
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 25u);
  for (int i = 0; i < 25; ++i) EXPECT_EQ(seen[i], absl::StrFormat("k%02d", i));
}

TEST_F(EngineTest, ListMembersByExpireTimeOrdersByDeadlineThenKeyPersistentLast) {
  ASSERT_TRUE(PutPersistent("c", "p2", "v").ok());
  ASSERT_TRUE(PutTtl("c", "late", "v", absl::Seconds(30)).ok());
  ASSERT_TRUE(PutPersistent("c", "p1", "v").ok());
  ASSERT_TRUE(PutTtl("c", "tie-b", "v", absl::Seconds(10)).ok());
  ASSERT_TRUE(PutTtl("c", "tie-a", "v", absl::Seconds(10)).ok());
  ASSERT_TRUE(PutTtl("c", "early", "v", absl::Seconds(1)).ok());
  std::vector<std::string> seen;
  ListMembersOptions options;
  options.order = MemberOrder::kExpireTime;
  options.page_size = 2;
  while (true) {
    auto page = engine_.ListMembers("c", options);
    ASSERT_TRUE(page.ok());
    for (const ListedMember& m : page->members) seen.push_back(m.key);
    if (!page->next.has_value()) break;
    options.after = page->next;
  }
  EXPECT_THAT(seen, ElementsAre("early", "tie-a", "tie-b", "late", "p1", "p2"));
}

TEST_F(EngineTest, ListMembersKeysOnlyLeavesValuesOut) {
  ASSERT_TRUE(PutPersistent("c", "k", "v").ok());
  ListMembersOptions options;
  options.keys_only = true;
  auto page = engine_.ListMembers("c", options);
  ASSERT_EQ(page->members.size(), 1u);
  EXPECT_EQ(page->members[0].value, "");
}

TEST_F(EngineTest, ListMembersPageSizeDefaultsAndIsCoercedToTheMaximum) {
  for (int i = 0; i < 1005; ++i) ASSERT_TRUE(PutPersistent("c", absl::StrCat(i), "v").ok());
  EXPECT_EQ(engine_.ListMembers("c", {})->members.size(), 100u);
  ListMembersOptions options;
  options.page_size = 5000;
  EXPECT_EQ(engine_.ListMembers("c", options)->members.size(), 1000u);
  options.page_size = -1;
  EXPECT_EQ(engine_.ListMembers("c", options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Room for `n` entries of `payload` bytes in one answer.
size_t RoomFor(size_t n, size_t payload) { return n * (payload + kResponseEntryOverhead); }

TEST_F(EngineTest, ListMembersPageEndsBeforeTheMemberThatWouldNotFitInOneResponse) {
  Engine::Options options = MakeOptions();
  const std::string value(1000, 'v');
  // Keys are "k0".."k9": 2 bytes.
  options.limits.max_response_bytes = RoomFor(3, 2 + value.size()) + 10;
  Engine engine(options, &clock_, &log_);
  for (int i = 0; i < 10; ++i) {
    const std::string key = absl::StrCat("k", i);
    MemberWrite w{key, value, Expiration::None()};
    ASSERT_TRUE(engine.Put("c", {w}, {}).ok());
  }
  std::vector<size_t> page_sizes;
  std::vector<std::string> seen;
  ListMembersOptions list;
  while (true) {
    absl::StatusOr<MemberPage> page = engine.ListMembers("c", list);
    ASSERT_TRUE(page.ok()) << page.status();
    page_sizes.push_back(page->members.size());
    for (const ListedMember& m : page->members) seen.push_back(m.key);
    if (!page->next.has_value()) break;
    list.after = page->next;
  }
  EXPECT_THAT(page_sizes, ElementsAre(3, 3, 3, 1));
  EXPECT_THAT(seen, ElementsAre("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"));

  ListMembersOptions keys_only;
  keys_only.keys_only = true;
  absl::StatusOr<MemberPage> page = engine.ListMembers("c", keys_only);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->members.size(), 10u) << "values left out take no room";
  EXPECT_FALSE(page->next.has_value());
}

TEST_F(EngineTest, ListMembersPageHoldsOneMemberEvenWhenItAloneIsOverTheResponseBound) {
  Engine::Options options = MakeOptions();
  options.limits.max_response_bytes = 1;
  Engine engine(options, &clock_, &log_);
  MemberWrite a{"a", "v", Expiration::None()}, b{"b", "v", Expiration::None()};
  ASSERT_TRUE(engine.Put("c", {a, b}, {}).ok());
  absl::StatusOr<MemberPage> page = engine.ListMembers("c", {});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->members.size(), 1u);
  EXPECT_EQ(page->members[0].key, "a");
  ASSERT_TRUE(page->next.has_value());
  ListMembersOptions rest;
  rest.after = page->next;
  page = engine.ListMembers("c", rest);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->members.size(), 1u);
  EXPECT_EQ(page->members[0].key, "b");
  EXPECT_FALSE(page->next.has_value());
}

TEST_F(EngineTest,
       GetMembersWhoseAnswerWouldNotFitInOneResponseIsResourceExhaustedAndRefreshesNothing) {
  Engine::Options options = MakeOptions();
  const std::string value(1000, 'v');
  options.limits.max_response_bytes = RoomFor(2, 1 + value.size());
  Engine engine(options, &clock_, &log_);
  MemberWrite a{"a", value, Expiration::Ttl(absl::Seconds(10))},
      b{"b", value, Expiration::Ttl(absl::Seconds(10))},
      c{"c", value, Expiration::Ttl(absl::Seconds(10))};
  ASSERT_TRUE(engine.Put("coll", {a, b, c}, {}).ok());

  absl::string_view two[] = {"a", "b"};
  EXPECT_TRUE(engine.Get("coll", two).ok()) << "two members fit";
  absl::string_view two_and_missing[] = {"a", "b", "missing"};
  absl::Status s = engine.Get("coll", two_and_missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << "a missing key is echoed too";
  absl::string_view three[] = {"a", "b", "c"};
  s = engine.Get("coll", three, Expiration::Ttl(absl::Hours(1))).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("get fewer keys per request"));
  EXPECT_THAT(s.message(), HasSubstr("3 keys (3 found)"));

  absl::string_view one[] = {"a"};
  absl::StatusOr<std::vector<GetResult>> r = engine.Get("coll", one);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].expire_time, kStart + absl::Seconds(10)) << "the failed refresh wrote nothing";
}

TEST_F(EngineTest, ListMembersOfMissingCollectionIsEmpty) {
  auto page = engine_.ListMembers("none", {});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->members.empty());
  EXPECT_FALSE(page->next.has_value());
}

// ---- Collections ----

TEST_F(EngineTest, GetCollectionCountsMembersAndDeadlines) {
  ASSERT_TRUE(PutTtl("c", "a", "v", absl::Seconds(20)).ok());
  ASSERT_TRUE(PutTtl("c", "b", "v", absl::Seconds(10)).ok());
  ASSERT_TRUE(PutPersistent("c", "p", "v").ok());
  auto info = engine_.GetCollection("c");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->name, "c");
  EXPECT_EQ(info->member_count, 3u);
  EXPECT_EQ(info->expiring_count, 2u);
  EXPECT_EQ(info->next_expire_time, kStart + absl::Seconds(10));
}

TEST_F(EngineTest, CollectionIsGoneWhenItsLastMemberExpires) {
  ASSERT_TRUE(PutTtl("c", "a", "v", absl::Seconds(1)).ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(engine_.ExpireDue(), 1u);
  EXPECT_EQ(engine_.GetCollection("c").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, ListCollectionsPagesByNameAcrossShardsWithPrefix) {
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(PutPersistent(absl::StrFormat("user:%02d", i), "k", "v").ok());
  }
  ASSERT_TRUE(PutPersistent("other", "k", "v").ok());
  std::vector<std::string> seen;
  std::string after;
  while (true) {
    auto page = engine_.ListCollections("user:", 7, after);
    ASSERT_TRUE(page.ok());
    for (const CollectionInfo& c : page->collections) seen.push_back(c.name);
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  ASSERT_EQ(seen.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(seen[i], absl::StrFormat("user:%02d", i));
}

// The shards' name order against a std::set: names sharing prefixes of
// every length around the 8-byte words they are compared by, the
// alphabet's lowest and highest bytes; each found by name, listed in byte
// order, and gone once deleted.
TEST_F(EngineTest, CollectionsAreFoundAndListedInByteOrderOfTheirNames) {
  std::mt19937 random(11);
  const std::vector<std::string> prefixes = {"",          "a",
                                             "aaaaaaa",   "aaaaaaaa",
                                             "aaaaaaaaa", "aaaaaaaaaaaaaaaa",
                                             "user-42:",  "c000000000012345"};
  const std::string alphabet = "!09AZaz~";
  std::set<std::string> model;
  while (model.size() < 1500) {
    std::string name = prefixes[random() % prefixes.size()];
    for (size_t n = random() % 18; n > 0; --n) name += alphabet[random() % alphabet.size()];
    if (name.empty()) continue;
    if (model.insert(name).second) {
      ASSERT_TRUE(PutPersistent(name, "k", "v").ok()) << name;
    }
  }
  const auto listed = [&] {
    std::vector<std::string> seen;
    std::string after;
    while (true) {
      absl::StatusOr<CollectionPage> page = engine_.ListCollections("", 100, after);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const CollectionInfo& c : page->collections) seen.push_back(c.name);
      if (!page->next_after.has_value()) break;
      after = *page->next_after;
    }
    return seen;
  };
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(listed(), std::vector<std::string>(model.begin(), model.end()));
    for (const std::string& name : model) {
      EXPECT_TRUE(engine_.GetCollection(name).ok()) << name;
      const std::string absent = name + "!";
      if (model.count(absent) == 0) {
        EXPECT_EQ(engine_.GetCollection(absent).status().code(), absl::StatusCode::kNotFound)
            << absent;
      }
    }
    // Delete every other one.
    bool drop = false;
    for (auto it = model.begin(); it != model.end();) {
      drop = !drop;
      if (!drop) {
        ++it;
        continue;
      }
      ASSERT_EQ(engine_.DeleteCollection(*it).value_or(0), 1u) << *it;
      it = model.erase(it);
    }
  }
}

TEST_F(EngineTest, ListCollectionsPageEndsBeforeTheCollectionThatWouldNotFitInOneResponse) {
  Engine::Options options = MakeOptions();
  // Names are "name:0".."name:9": 6 bytes.
  options.limits.max_response_bytes = RoomFor(4, 6);
  Engine engine(options, &clock_, &log_);
  for (int i = 0; i < 10; ++i) {
    MemberWrite w{"k", "v", Expiration::None()};
    ASSERT_TRUE(engine.Put(absl::StrCat("name:", i), {w}, {}).ok());
  }
  std::vector<size_t> page_sizes;
  std::vector<std::string> seen;
  std::string after;
  while (true) {
    absl::StatusOr<CollectionPage> page = engine.ListCollections("", 0, after);
    ASSERT_TRUE(page.ok()) << page.status();
    page_sizes.push_back(page->collections.size());
    for (const CollectionInfo& c : page->collections) seen.push_back(c.name);
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  EXPECT_THAT(page_sizes, ElementsAre(4, 4, 2));
  ASSERT_EQ(seen.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(seen[i], absl::StrCat("name:", i));
}

TEST_F(EngineTest, ListCollectionsSkipsCollectionsWhoseMembersAllExpired) {
  ASSERT_TRUE(PutTtl("a", "k", "v", absl::Seconds(1)).ok());
  ASSERT_TRUE(PutPersistent("b", "k", "v").ok());
  clock_.Advance(absl::Seconds(1));
  auto page = engine_.ListCollections("", 0, "");
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].name, "b");
  EXPECT_THAT(KeysOf(NewEvents()), ElementsAre("k"));
}

// ---- Bad input ----

TEST_F(EngineTest, BadInputIsInvalidArgumentNamingTheFieldAndWritesNothing) {
  const std::string long_key(2000, 'k');
  const std::string big_value((1 << 20) + 1, 'v');
  struct Case {
    std::string collection;
    MemberWrite write;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"", {"k", "v", Expiration::None()}, "collection"},
      {"has space", {"k", "v", Expiration::None()}, "collection"},
      {std::string(300, 'c'), {"k", "v", Expiration::None()}, "collection"},
      {"c", {"", "v", Expiration::None()}, "members[0].key"},
      {"c", {long_key, "v", Expiration::None()}, "members[0].key"},
      {"c", {"bad\xff", "v", Expiration::None()}, "members[0].key"},
      {"c", {"tab\tkey", "v", Expiration::None()}, "members[0].key"},
      {"c", {"k", big_value, Expiration::None()}, "members[0].value"},
      {"c", {"k", "v", Expiration::Ttl(absl::ZeroDuration())}, "members[0].ttl"},
      {"c", {"k", "v", Expiration::Ttl(-absl::Seconds(1))}, "members[0].ttl"},
      {"c", {"k", "v", Expiration::Ttl(absl::Hours(24 * 3651))}, "members[0].ttl"},
      {"c", {"k", "v", Expiration::At(kStart - absl::Seconds(1))}, "members[0].expire_time"},
      {"c", {"k", "v", Expiration::At(kStart)}, "members[0].expire_time"},
      {"c", {"k", "v", Expiration::At(kStart + absl::Hours(24 * 3651))}, "members[0].expire_time"},
  };
  for (const Case& tc : cases) {
    absl::Status s = engine_.Put(tc.collection, {tc.write}, {}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << tc.field;
    EXPECT_THAT(s.message(), HasSubstr(tc.field));
  }
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, DuplicateKeysInOneRequestAreInvalid) {
  MemberWrite writes[] = {{"a", "1", Expiration::None()},
                          {"b", "2", Expiration::None()},
                          {"a", "3", Expiration::None()}};
  absl::Status s = engine_.Put("c", writes, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("members[2].key: duplicates members[0].key"));
  absl::string_view keys[] = {"x", "x"};
  EXPECT_THAT(engine_.Remove("c", keys).status().message(), HasSubstr("keys[1]"));
  EXPECT_EQ(engine_.total_members(), 0u);
}

TEST_F(EngineTest, EmptyAndOversizedBatchesAreInvalid) {
  EXPECT_EQ(engine_.Put("c", {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> keys(1001);
  std::vector<absl::string_view> views;
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = absl::StrCat("k", i);
    views.push_back(keys[i]);
  }
  absl::Status s = engine_.Get("c", views).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("keys"));
}

TEST_F(EngineTest, AFailedBatchLeavesEarlierValidMembersUnwritten) {
  MemberWrite writes[] = {{"good", "v", Expiration::None()},
                          {"bad", "v", Expiration::Ttl(-absl::Seconds(1))}};
  EXPECT_FALSE(engine_.Put("c", writes, {}).ok());
  EXPECT_FALSE(GetOne("c", "good").found);
}

TEST_F(EngineTest, UnicodeKeysAreAccepted) {
  ASSERT_TRUE(PutPersistent("c", "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80", "v").ok());
  EXPECT_TRUE(GetOne("c", "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80").found);
  EXPECT_FALSE(PutPersistent("c", "\xc0\xaf", "v").ok()) << "overlong encoding";
  EXPECT_FALSE(PutPersistent("c", "\xed\xa0\x80", "v").ok()) << "surrogate";
}

TEST_F(EngineTest, ConcurrentWritersAndExpirerLoseNoEvent) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  std::atomic<bool> done{false};
  std::thread expirer([&] {
    while (!done.load()) engine_.ExpireDue();
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = absl::StrCat("k", i);
        MemberWrite w{key, "v", Expiration::Ttl(absl::Milliseconds(1 + i % 7))};
        ASSERT_TRUE(engine_.Put(absl::StrCat("c", t, "-", i % 13), {w}, {}).ok());
        if (i % 100 == 0) clock_.Advance(absl::Milliseconds(3));
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  expirer.join();
  clock_.Advance(absl::Seconds(1));
  engine_.ExpireDue();
  EXPECT_EQ(engine_.total_members(), 0u);
  EXPECT_EQ(log_.last_sequence() - log_.oldest_retained_sequence() + 1,
            static_cast<uint64_t>(kThreads * kPerThread));
}

// ---- Replay ----

// Keeps every committed batch and its undo; refuses changes once `refusal`
// is set.
class RecordingJournal final : public Journal {
 public:
  CommitTicket Commit(absl::string_view batch, absl::string_view undo, uint64_t) override {
    batches.emplace_back(batch);
    undos.emplace_back(undo);
    return batches.size();
  }
  absl::Status status() const override { return refusal; }

  std::vector<std::string> batches;
  std::vector<std::string> undos;
  absl::Status refusal;
};

// Records the event sequences of committed batches in commit order.
class SequenceOrderJournal final : public Journal {
 public:
  CommitTicket Commit(absl::string_view, absl::string_view, uint64_t last_event_sequence) override {
    MutexLock lock(&mu_);
    if (last_event_sequence != 0) sequences_.push_back(last_event_sequence);
    return sequences_.size();
  }
  absl::Status status() const override { return absl::OkStatus(); }

  std::vector<uint64_t> sequences() {
    MutexLock lock(&mu_);
    return sequences_;
  }

 private:
  Mutex mu_;
  std::vector<uint64_t> sequences_ ABSL_GUARDED_BY(mu_);
};

// The durable store makes every event up to the highest sequence of its
// durable batches visible, so a batch must never reach the journal before a
// batch holding an earlier event: that event would be shown to watchers before
// it is durable.
TEST(EngineJournalTest, BatchesReachTheJournalInTheOrderOfTheirEventsAcrossShards) {
  // More threads than cores, so that some are preempted mid-operation; a few
  // rounds, as the interleaving this guards against is up to the scheduler.
  constexpr int kRounds = 10;
  constexpr int kThreads = 8;
  constexpr int kCollections = 1000;
  for (int round = 0; round < kRounds; ++round) {
    FakeClock clock(kStart);
    EventFeed log(EventFeed::Options{});
    SequenceOrderJournal journal;
    Engine engine({.shards = 16, .journal = &journal}, &clock, &log);
    for (int t = 0; t < kThreads; ++t) {
      for (int c = 0; c < kCollections; ++c) {
        ASSERT_TRUE(engine
                        .Put(absl::StrCat("t", t, "c", c),
                             {{.key = "k",
                               .value = "v",
                               .expiration = Expiration::Ttl(absl::Milliseconds(1))}},
                             {})
                        .ok());
      }
    }
    clock.Advance(absl::Milliseconds(1));
    // Each thread reaps its own collections, each read expiring one member
    // with its event, all threads at once.
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&engine, t] {
        for (int c = 0; c < kCollections; ++c) {
          ASSERT_TRUE(engine.Get(absl::StrCat("t", t, "c", c), {"k"}).ok());
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    const std::vector<uint64_t> sequences = journal.sequences();
    ASSERT_EQ(sequences.size(), static_cast<size_t>(kThreads * kCollections));
    ASSERT_TRUE(std::is_sorted(sequences.begin(), sequences.end())) << "round " << round;
  }
}

// An event feed that records each sequence its readers are told of.
struct ToldFeed {
  ToldFeed() : feed({.on_readable = [this](uint64_t last) { told.push_back(last); }}) {}
  std::vector<uint64_t> told;
  EventFeed feed;
};

TEST(EngineReadableTest, ExpireDueTellsReadersOnceForAllTheShardsItExpiredIn) {
  FakeClock clock(kStart);
  ToldFeed log;
  Engine engine({.shards = 4}, &clock, &log.feed);
  // One due member in each of three collections under three shard locks.
  std::vector<std::string> names;
  std::vector<size_t> shards;
  for (int i = 0; names.size() < 3; ++i) {
    const std::string name = absl::StrCat("c", i);
    const size_t shard = engine.ShardIndexForTesting(name);
    if (std::find(shards.begin(), shards.end(), shard) != shards.end()) continue;
    shards.push_back(shard);
    names.push_back(name);
  }
  for (const std::string& name : names) {
    ASSERT_TRUE(
        engine
            .Put(name,
                 {{.key = "k", .value = "v", .expiration = Expiration::Ttl(absl::Seconds(1))}}, {})
            .ok());
  }
  clock.Advance(absl::Seconds(1));
  ASSERT_EQ(engine.ExpireDue(), 3u);
  // Once, after the pass, for all three: a reader woken per shard could take
  // the CPU from the expirer before it reached the next shard.
  EXPECT_THAT(log.told, ElementsAre(log.feed.last_sequence()));
}

TEST(EngineReadableTest, ExpireDueTellsReadersOfALargeBacklogWhileItDrains) {
  FakeClock clock(kStart);
  ToldFeed log;
  Engine engine({.shards = 1, .expire_batch = 2}, &clock, &log.feed);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(engine
                    .Put("c",
                         {{.key = absl::StrCat("k", i),
                           .value = "v",
                           .expiration = Expiration::Ttl(absl::Seconds(1))}},
                         {})
                    .ok());
  }
  clock.Advance(absl::Seconds(1));
  ASSERT_EQ(engine.ExpireDue(), 5u);
  // After each expire_batch of events, then the rest: readers start on a
  // backlog before it has drained.
  const uint64_t last = log.feed.last_sequence();
  EXPECT_THAT(log.told, ElementsAre(last - 3, last - 1, last));
}

// Every member as Scan sees it, due or not, and the member count.
std::string DumpState(Engine& engine) {
  std::string out;
  Engine::ScanCursor cursor;
  while (engine.Scan(
      &cursor, 100,
      [&](absl::string_view c, absl::string_view k, absl::string_view v, int64_t deadline_ms) {
        absl::StrAppend(&out, c, "/", k, "=", v, " @", deadline_ms, "\n");
      })) {
  }
  absl::StrAppend(&out, "total=", engine.total_members(), "\n");
  return out;
}

TEST(EngineReplayTest, ReplayingTheJournalRebuildsTheStateWithoutEventsOrJournaling) {
  FakeClock clock(kStart);
  EventFeed live_log(EventFeed::Options{});
  RecordingJournal live_journal;
  Engine live({.shards = 4, .journal = &live_journal}, &clock, &live_log);
  auto put = [&](absl::string_view c, absl::string_view k, absl::string_view v, Expiration e,
                 bool keep = false) {
    MemberWrite w{k, v, e};
    w.keep_expiration = keep;
    ASSERT_TRUE(live.Put(c, {w}, {}).ok());
  };
  put("a", "k1", "v1", Expiration::Ttl(absl::Seconds(10)));
  put("a", "k2", "v2", Expiration::None());
  put("a", "k3", "v3", Expiration::Ttl(absl::Seconds(20)));
  put("a", "k1", "a longer value", Expiration::None(), /*keep=*/true);
  put("b", "x", "vx", Expiration::Ttl(absl::Seconds(5)));
  put("c", "p", "vp", Expiration::Ttl(absl::Seconds(1)));
  put("d", "y", "vy", Expiration::Ttl(absl::Seconds(1)));
  put("e", "z", "vz", Expiration::None());
  for (int i = 0; i < 50; ++i) {
    put(absl::StrCat("f", i % 3), absl::StrCat("m", i), "v", Expiration::Ttl(absl::Seconds(3)));
  }
  absl::string_view k3[] = {"k3"}, k2[] = {"k2"}, x[] = {"x"}, p[] = {"p"}, y[] = {"y"};
  ASSERT_TRUE(live.Get("a", k3, Expiration::Ttl(absl::Seconds(30))).ok());
  ASSERT_TRUE(live.Remove("a", k2).ok());
  ASSERT_TRUE(
      live.Expire("a", k3, Expiration::Ttl(absl::Seconds(60)), ExpireCondition::kAlways).ok());
  ASSERT_TRUE(live.Persist("c", p).ok());
  ASSERT_TRUE(
      live.Expire("b", x, Expiration::At(kStart - absl::Seconds(1)), ExpireCondition::kAlways)
          .ok());
  ASSERT_TRUE(live.DeleteCollection("e").ok());
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(live.Get("d", y).ok());  // expires "y" on the way
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(live.ExpireDue(), 50u);
  ASSERT_GT(live_log.last_sequence(), 0u);

  EventFeed replay_log(EventFeed::Options{});
  RecordingJournal replay_journal;
  Engine replayed({.shards = 4, .journal = &replay_journal}, &clock, &replay_log);
  for (const std::string& batch : live_journal.batches) {
    ASSERT_TRUE(DecodeBatch(batch, [&](const JournalRecord& r) {
                  replayed.Apply(r);
                  return absl::OkStatus();
                }).ok());
  }

  EXPECT_EQ(DumpState(replayed), DumpState(live));
  EXPECT_EQ(replayed.NextDeadline(), live.NextDeadline());
  EXPECT_EQ(replay_log.last_sequence(), 0u) << "replay emits no event";
  EXPECT_TRUE(replay_journal.batches.empty()) << "replay journals nothing";
}

// Batches that create members before and between the ones they replace, in
// collections small enough to keep their members in one buffer and past it.
TEST(EngineReplayTest, BatchedWritesToSmallCollectionsReplayToTheSameMembers) {
  FakeClock clock(kStart);
  EventFeed live_log(EventFeed::Options{});
  RecordingJournal live_journal;
  Engine live({.shards = 4, .journal = &live_journal}, &clock, &live_log);
  const std::string v300(300, 'x'), v255(255, 'y'), z300(300, 'z');
  const auto ttl = [](int s) { return Expiration::Ttl(absl::Seconds(s)); };
  MemberWrite first[] = {{"c", "c1", ttl(10)}, {"e", v300, ttl(20)}, {"a", "", Expiration::None()}};
  ASSERT_TRUE(live.Put("s", first, {}).ok());
  MemberWrite second[] = {
      {"b", v255, ttl(5)},  // created before "c"
      {"c", v300, Expiration::None(), PutCondition::kAlways, /*keep_expiration=*/true},
      {"d", "d1", ttl(7)},   // created between "c" and "e"
      {"e", z300, ttl(30)},  // same size
      {"a", "a2", ttl(3), PutCondition::kIfPresent},
      {"f", "f1", ttl(1), PutCondition::kIfPresent},  // skipped
  };
  absl::StatusOr<std::vector<PutResult>> r = live.Put("s", second, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].expire_time, kStart + absl::Seconds(10));
  EXPECT_EQ((*r)[5].outcome, PutOutcome::kSkipped);
  const int64_t start_ms = absl::ToUnixMillis(kStart);
  EXPECT_EQ(DumpState(live), absl::StrCat("s/a=a2 @", start_ms + 3000, "\n", "s/b=", v255, " @",
                                          start_ms + 5000, "\n", "s/c=", v300, " @",
                                          start_ms + 10000, "\n", "s/d=d1 @", start_ms + 7000, "\n",
                                          "s/e=", z300, " @", start_ms + 30000, "\n", "total=5\n"));
  // Past the small form in one batch, and back by removals.
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back(absl::StrFormat("g%02d", 19 - i));
  std::vector<MemberWrite> grow;
  for (int i = 0; i < 20; ++i) grow.push_back({keys[i], keys[i], ttl(40 + i)});
  ASSERT_TRUE(live.Put("s", grow, {}).ok());
  std::vector<absl::string_view> removed(keys.begin(), keys.begin() + 18);
  ASSERT_TRUE(live.Remove("s", removed).ok());
  absl::string_view b[] = {"b"};
  ASSERT_TRUE(
      live.Expire("s", b, Expiration::At(kStart - absl::Seconds(1)), ExpireCondition::kAlways)
          .ok());
  clock.Advance(absl::Seconds(4));
  EXPECT_EQ(live.ExpireDue(), 1u);  // "a"

  EventFeed replay_log(EventFeed::Options{});
  Engine replayed({.shards = 4}, &clock, &replay_log);
  for (const std::string& batch : live_journal.batches) {
    ASSERT_TRUE(DecodeBatch(batch, [&](const JournalRecord& record) {
                  replayed.Apply(record);
                  return absl::OkStatus();
                }).ok());
  }
  EXPECT_EQ(DumpState(replayed), DumpState(live));
  EXPECT_EQ(replayed.NextDeadline(), live.NextDeadline());
}

// ---- Rolling back ----

TEST(EngineRollBackTest, RollingBackUndoesTheChangesNotDurableAndDropsTheirEvents) {
  FakeClock clock(kStart);
  EventFeed log({.first_sequence = 1, .visible_on_append = false});
  RecordingJournal journal;
  Engine engine({.shards = 4, .journal = &journal}, &clock, &log);
  auto put = [&](absl::string_view c, absl::string_view k, absl::string_view v, Expiration e,
                 bool keep = false) {
    MemberWrite w{k, v, e};
    w.keep_expiration = keep;
    ASSERT_TRUE(engine.Put(c, {w}, {}).ok());
  };
  // Durable: the log made everything so far visible.
  put("a", "k1", "v1", Expiration::Ttl(absl::Seconds(10)));
  put("a", "k2", "v2", Expiration::None());
  put("b", "x", "vx", Expiration::Ttl(absl::Seconds(5)));
  put("c", "p", "vp", Expiration::Ttl(absl::Seconds(1)));
  put("d", "y", "vy", Expiration::Ttl(absl::Seconds(1)));
  put("e", "z", "vz", Expiration::None());
  absl::string_view x[] = {"x"}, y[] = {"y"}, p[] = {"p"}, k2[] = {"k2"};
  ASSERT_TRUE(
      engine.Expire("b", x, Expiration::At(kStart - absl::Seconds(1)), ExpireCondition::kAlways)
          .ok());
  log.MakeVisibleThrough(log.last_sequence() + 1);
  const uint64_t visible = log.last_sequence();
  ASSERT_EQ(visible, 1u);
  const size_t durable_batches = journal.batches.size();
  const std::string durable_state = DumpState(engine);
  const absl::Time durable_next_deadline = engine.NextDeadline();

  // Not durable yet: every kind of change, and expiries with events.
  put("a", "k1", "replaced", Expiration::None(), /*keep=*/true);
  put("a", "k3", "v3", Expiration::Ttl(absl::Seconds(20)));
  put("b", "x", "back", Expiration::Ttl(absl::Seconds(3)));
  ASSERT_TRUE(engine.Get("a", k2, Expiration::Ttl(absl::Seconds(30))).ok());
  ASSERT_TRUE(engine.Remove("a", k2).ok());
  ASSERT_TRUE(engine.DeleteCollection("e").ok());
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(engine.Get("d", y).ok());  // expires "y" on the way
  EXPECT_EQ(engine.ExpireDue(), 1u);     // "p"
  ASSERT_TRUE(engine.Persist("c", p).ok());

  engine.RollBack([&] {
    journal.refusal = absl::ResourceExhaustedError("disk full");
    std::vector<std::string> undos(journal.undos.begin() + durable_batches, journal.undos.end());
    std::reverse(undos.begin(), undos.end());
    return undos;
  });

  EXPECT_EQ(DumpState(engine), durable_state);
  EXPECT_EQ(engine.NextDeadline(), durable_next_deadline);
  EXPECT_EQ(log.last_sequence(), visible);
  // The events of the undone expiries are gone; their sequences are given
  // again, as no reader saw them.
  journal.refusal = absl::OkStatus();
  EXPECT_EQ(engine.ExpireDue(), 2u);  // "p" and "y" again
  log.MakeVisibleThrough(visible + 2);
  absl::StatusOr<EventBatch> events = log.Read(visible, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->events.size(), 2u);
  EXPECT_EQ(events->events[0].sequence, visible + 1);
}

TEST(EngineRollBackTest, WhileTheJournalRefusesChangesWritesAndReadsOfDueMembersFail) {
  FakeClock clock(kStart);
  EventFeed log(EventFeed::Options{});
  RecordingJournal journal;
  Engine engine({.shards = 4, .journal = &journal}, &clock, &log);
  MemberWrite writes[] = {{"a", "va", Expiration::Ttl(absl::Seconds(1))},
                          {"b", "vb", Expiration::None()}};
  ASSERT_TRUE(engine.Put("c", writes, {}).ok());
  const size_t batches = journal.batches.size();
  journal.refusal = absl::ResourceExhaustedError("disk full");
  absl::string_view b[] = {"b"};

  EXPECT_EQ(engine.Put("c", {writes[1]}, {}).status(), journal.refusal);
  EXPECT_EQ(engine.Remove("c", b).status(), journal.refusal);
  EXPECT_EQ(engine.Persist("c", b).status(), journal.refusal);
  EXPECT_EQ(
      engine.Expire("c", b, Expiration::Ttl(absl::Seconds(9)), ExpireCondition::kAlways).status(),
      journal.refusal);
  EXPECT_EQ(engine.Get("c", b, Expiration::Ttl(absl::Seconds(9))).status(), journal.refusal);
  EXPECT_EQ(engine.DeleteCollection("c").status(), journal.refusal);
  // Nothing is due: reads go on.
  EXPECT_TRUE(engine.Get("c", b).ok());
  EXPECT_TRUE(engine.GetCollection("c").ok());

  // "a" is due but cannot expire: reads that would meet it fail rather than
  // return it.
  clock.Advance(absl::Seconds(2));
  const absl::Status get = engine.Get("c", b).status();
  EXPECT_EQ(get.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(get.message(), HasSubstr("past their deadline"));
  EXPECT_THAT(get.message(), HasSubstr("disk full"));
  EXPECT_EQ(engine.GetCollection("c").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine.ListMembers("c", {}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine.ListCollections("", 10, "").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine.ExpireDue(), 0u);
  EXPECT_EQ(journal.batches.size(), batches) << "nothing recorded while refused";
  EXPECT_EQ(engine.total_members(), 2u);

  journal.refusal = absl::OkStatus();
  EXPECT_EQ(engine.ExpireDue(), 1u);
  EXPECT_TRUE(engine.Get("c", b).ok());
}

}  // namespace
}  // namespace lapse

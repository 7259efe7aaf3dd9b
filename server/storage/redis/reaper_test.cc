#include "server/storage/redis/reaper.h"

#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "server/storage/redis/script_clock.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/redis_partitions.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::Await;
using ::lapse::testing::kPatience;
using ::lapse::testing::RedisCluster;
using ::lapse::testing::WaitWithPatience;

constexpr int kPartitions = 4;
const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// The watermarks a reaper reported through its `advance` hook.
class Watermarks {
 public:
  std::function<void(int, uint64_t)> Hook() {
    return [this](int p, uint64_t delivered) {
      MutexLock lock(&mu_);
      uint64_t& known = delivered_[p];
      known = std::max(known, delivered);
      cv_.SignalAll();
    };
  }
  // Waits until the partitions' watermarks add up to `total`.
  bool WaitForTotal(uint64_t total) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_,
                            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return Total() == total; });
  }
  uint64_t total() {
    MutexLock lock(&mu_);
    return Total();
  }

 private:
  uint64_t Total() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint64_t sum = 0;
    for (const auto& [p, d] : delivered_) sum += d;
    return sum;
  }

  Mutex mu_;
  CondVar cv_;
  std::map<int, uint64_t> delivered_ ABSL_GUARDED_BY(mu_);
};

// A cluster with a store that does not reap (the reapers under test do), all
// on a FakeClock.
class ReaperTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenStore(); }

  void OpenStore(int wait_replicas = 1) {
    ASSERT_TRUE(cluster_.status().ok()) << cluster_.status();
    tags_.clear();
    RedisClusterStoreOptions options;
    options.wait_replicas = wait_replicas;
    options.router.seeds = cluster_.seeds();
    options.partitions = kPartitions;
    options.clock = &clock_;
    options.script_clock = &clock_;
    options.reap = false;
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    for (int p = 0; p < kPartitions; ++p) tags_.push_back(store_->TagOf(p));
  }

  // A reaper on its own router, as on another lapsed replica.
  std::unique_ptr<Reaper> StartReaper(ReaperOptions options, Watermarks& marks) {
    routers_.push_back(std::make_unique<ClusterRouter>(RouterOptions{.seeds = cluster_.seeds()}));
    options.clock = &clock_;
    options.script_clock = &clock_;
    options.advance = marks.Hook();
    return std::make_unique<Reaper>(*routers_.back(), tags_, std::move(options));
  }

  // A reaper that has passed every partition once and then waits for a
  // wake-up: no heartbeat for an hour, no Wake(). Null if it did not start.
  std::unique_ptr<Reaper> StartIdleReaper(Watermarks& marks) {
    std::unique_ptr<Reaper> reaper = StartReaper({.heartbeat_interval = absl::Hours(1)}, marks);
    const bool idle = AwaitStats(*reaper, [](const Reaper::Stats& s) {
      return s.owned == kPartitions && s.passes >= kPartitions;
    });
    return idle ? std::move(reaper) : nullptr;
  }

  static bool AwaitStats(const Reaper& reaper, absl::FunctionRef<bool(const Reaper::Stats&)> done) {
    if (reaper.AwaitStats(done, kPatience)) return true;
    const Reaper::Stats s = reaper.stats();
    ADD_FAILURE() << reaper.replica_id() << ": heartbeats " << s.heartbeats << ", live "
                  << s.live_replicas << ", owned " << s.owned << ", passes " << s.passes
                  << ", reaped " << s.reaped << ", advances " << s.watermark_advances
                  << ", wait failures " << s.wait_failures << ", failures " << s.failures;
    return false;
  }

  void Put(absl::string_view collection, std::vector<MemberWrite> writes) {
    absl::StatusOr<std::vector<PutResult>> put = Await<std::vector<PutResult>>(
        [&](auto done) { store_->PutMembers(collection, writes, {}, std::move(done)); });
    ASSERT_TRUE(put.ok()) << put.status();
  }

  // Runs a command on the master of `key`'s slot.
  std::string On(const std::string& key, std::vector<std::string> args) const {
    const int port = MasterOf(key);
    absl::StatusOr<std::string> reply = cluster_.Command(port, args);
    return reply.ok() ? *reply : reply.status().ToString();
  }
  int MasterOf(const std::string& key) const { return cluster_.MasterOf(key); }
  PartitionKeys KeysOf(absl::string_view collection) const {
    return PartitionKeys(store_->TagOf(store_->PartitionOf(collection)));
  }
  // Events in every partition's stream, as "collection/key".
  std::multiset<std::string> AllEvents() const {
    std::multiset<std::string> out;
    for (const std::string& tag : tags_) {
      const std::string events = PartitionKeys(tag).events;
      std::vector<std::string> lines =
          absl::StrSplit(On(events, {"XRANGE", events, "-", "+"}), '\n');
      // Each entry flattens to: id, then c, C, k, K, v, V, d, D, x, X.
      for (size_t i = 0; i + 10 < lines.size(); i += 11) {
        out.insert(absl::StrCat(lines[i + 2], "/", lines[i + 4]));
      }
    }
    return out;
  }

  FakeClock clock_{kStart};
  RedisCluster cluster_;
  std::unique_ptr<RedisClusterStore> store_;
  std::vector<std::string> tags_;
  std::vector<std::unique_ptr<ClusterRouter>> routers_;
};

// `key` must outlive the write.
MemberWrite Expiring(absl::string_view key, absl::Duration ttl) {
  return {.key = key, .value = "v", .expiration = Expiration::Ttl(ttl)};
}

TEST_F(ReaperTest, DueMembersExpireWithOneEventEachAndTheWatermarkFollows) {
  Watermarks marks;
  std::unique_ptr<Reaper> reaper = StartReaper({}, marks);
  ASSERT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  Put("c", {Expiring("a", absl::Seconds(1)), Expiring("b", absl::Seconds(1)),
            Expiring("z", absl::Seconds(2)), Expiring("later", absl::Hours(1))});

  clock_.Advance(absl::Seconds(1));
  reaper->Wake();
  ASSERT_TRUE(marks.WaitForTotal(2));
  const PartitionKeys keys = KeysOf("c");
  EXPECT_EQ(On(keys.delivered, {"GET", keys.delivered}), "2");
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "c"}),
            absl::StrCat(absl::ToUnixMillis(kStart + absl::Seconds(2))));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/a", "c/b"}));

  clock_.Advance(absl::Seconds(1));
  reaper->Wake();
  ASSERT_TRUE(marks.WaitForTotal(3));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/a", "c/b", "c/z"}));
  EXPECT_EQ(On(keys.due, {"ZSCORE", keys.due, "c"}),
            absl::StrCat(absl::ToUnixMillis(kStart + absl::Hours(1))));
  EXPECT_EQ(On(keys.prefix + "v:c", {"HKEYS", keys.prefix + "v:c"}), "later");
}

TEST_F(ReaperTest, TheReapScriptIsBoundedReapsItsCandidatesAndASecondRunFindsNothing) {
  Put("c", {Expiring("a", absl::Seconds(1)), Expiring("b", absl::Seconds(1)),
            Expiring("z", absl::Seconds(1)), Expiring("later", absl::Hours(1))});
  // A collection of c's partition that is not due.
  std::string d;
  for (int i = 0; d.empty(); ++i) {
    const std::string name = absl::StrCat("d", i);
    if (store_->PartitionOf(name) == store_->PartitionOf("c")) d = name;
  }
  Put(d, {Expiring("a", absl::Hours(2))});
  clock_.Advance(absl::Seconds(1));
  ClusterRouter router({.seeds = cluster_.seeds()});
  const PartitionKeys keys = KeysOf("c");
  // [reaped, more, earliest deadline left, sequence, delivered, candidates]
  // of a call with `candidates`, at most 2 members and 1 candidate answered.
  auto reap = [&](std::vector<std::string> candidates) -> std::vector<std::string> {
    std::vector<std::string> args = {ScriptTimeArg(&clock_), "1000", "2", "1"};
    args.insert(args.end(), candidates.begin(), candidates.end());
    absl::StatusOr<RedisReply> reply = Await<RedisReply>([&](auto done) {
      router.Send(RedisCall::Eval(ReapPartitionScript(), keys.ReapKeys(candidates), args),
                  std::move(done));
    });
    std::vector<std::string> out;
    if (!reply.ok()) return {reply.status().ToString()};
    for (const RedisReply& e : reply->elements) {
      if (e.type == RedisReply::Type::kArray) {
        std::vector<std::string> names;
        for (const RedisReply& name : e.elements) names.push_back(name.str);
        out.push_back(absl::StrJoin(names, ","));
      } else {
        out.push_back(e.type == RedisReply::Type::kInteger ? absl::StrCat(e.integer) : e.str);
      }
    }
    return out;
  };
  const std::string due_now = absl::StrCat(absl::ToUnixMillis(clock_.Now()));
  const std::string later = absl::StrCat(absl::ToUnixMillis(kStart + absl::Hours(1)));
  // A due collection that is no candidate is answered as one.
  EXPECT_EQ(reap({}), (std::vector<std::string>{"0", "1", due_now, "0", "0", "c"}));
  EXPECT_EQ(reap({d}), (std::vector<std::string>{"0", "1", due_now, "0", "0", "c"}));
  EXPECT_EQ(reap({"c"}), (std::vector<std::string>{"2", "1", due_now, "2", "0", "c"}));
  EXPECT_EQ(reap({"c"}), (std::vector<std::string>{"1", "0", later, "3", "0", "c"}));
  EXPECT_EQ(reap({"c", d}), (std::vector<std::string>{"0", "0", later, "3", "0", "c"}));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/a", "c/b", "c/z"}));
  EXPECT_EQ(On(keys.members, {"GET", keys.members}), "2");
}

TEST_F(ReaperTest, TheStoreReapsFromOpenToItsDestructor) {
  RedisClusterStoreOptions options;
  options.router.seeds = cluster_.seeds();
  options.partitions = kPartitions;
  options.clock = &clock_;
  options.reaper_clock = &clock_;
  options.script_clock = &clock_;
  absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const Reaper* reaper = (*store)->reaper();
  ASSERT_NE(reaper, nullptr);
  ASSERT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  Put("c", {Expiring("a", absl::Seconds(1))});
  clock_.Advance(absl::Seconds(1));
  (*store)->WakeReaperForTesting();
  EXPECT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.reaped == 1; }));
  EXPECT_EQ(store_->reaper(), nullptr);
}

TEST_F(ReaperTest, TwoReapersAtOnceExpireEachMemberOnce) {
  // One replica id: both own every partition, so both reap all of them.
  Watermarks first_marks, second_marks;
  std::unique_ptr<Reaper> first =
      StartReaper({.replica_id = "same", .max_members_per_pass = 3}, first_marks);
  std::unique_ptr<Reaper> second =
      StartReaper({.replica_id = "same", .max_members_per_pass = 3}, second_marks);
  for (Reaper* r : {first.get(), second.get()}) {
    ASSERT_TRUE(AwaitStats(*r, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  }
  std::multiset<std::string> expected;
  std::vector<std::string> keys;
  for (int k = 0; k < 25; ++k) keys.push_back(absl::StrCat("k", k));
  for (int c = 0; c < 8; ++c) {
    std::vector<MemberWrite> writes;
    for (int k = 0; k < 25; ++k) {
      writes.push_back(Expiring(keys[k], absl::Milliseconds(1 + k)));
      expected.insert(absl::StrCat("c", c, "/k", k));
    }
    Put(absl::StrCat("c", c), std::move(writes));
  }

  clock_.Advance(absl::Seconds(1));
  first->Wake();
  second->Wake();
  ASSERT_TRUE(first_marks.WaitForTotal(expected.size()));
  ASSERT_TRUE(second_marks.WaitForTotal(expected.size()));
  EXPECT_EQ(AllEvents(), expected);
  EXPECT_EQ(first->stats().reaped + second->stats().reaped, expected.size());
}

TEST_F(ReaperTest, APassWhileAReshardingSplitsItsKeysWaitsForTheSlotAndExpiresEachMemberOnce) {
  Watermarks marks;
  std::unique_ptr<Reaper> reaper = StartReaper({}, marks);
  ASSERT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  Put("c", {Expiring("first", absl::Seconds(1)), Expiring("a", absl::Seconds(2))});
  clock_.Advance(absl::Seconds(1));
  reaper->Wake();
  ASSERT_TRUE(marks.WaitForTotal(1));
  const PartitionKeys keys = KeysOf("c");
  // The partition's own keys move first; the member count and c's keys stay
  // behind, so a script that touched them undeclared would run on the target
  // and find c empty there. "a" falls due only then: no pass reaps it before.
  const absl::Status moved = cluster_.MoveSlotSplitAfter(
      {keys.due, keys.events, keys.sequence, keys.collections, keys.delivered, keys.wait}, [&] {
        clock_.Advance(absl::Seconds(1));
        reaper->Wake();
      });
  ASSERT_TRUE(moved.ok()) << moved;

  ASSERT_TRUE(marks.WaitForTotal(2));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/first", "c/a"}));
  EXPECT_EQ(On(keys.members, {"GET", keys.members}), "0");
  EXPECT_EQ(On(keys.due, {"ZCARD", keys.due}), "0");
  EXPECT_EQ(reaper->stats().reaped, 2u);
}

TEST_F(ReaperTest, AWriteThatMovesTheEarliestDeadlineEarlierWakesTheReaper) {
  Watermarks marks;
  std::unique_ptr<Reaper> reaper = StartIdleReaper(marks);
  ASSERT_NE(reaper, nullptr);
  Put("c", {Expiring("a", absl::Seconds(1))});
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(marks.WaitForTotal(1));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/a"}));
}

TEST_F(ReaperTest, EventsAWriteEmittedAreDeliveredWithoutAWake) {
  Watermarks marks;
  std::unique_ptr<Reaper> reaper = StartIdleReaper(marks);
  ASSERT_NE(reaper, nullptr);
  // The reaper waits an hour for "a"; the write after it expires it first.
  Put("c", {Expiring("a", absl::Hours(1))});
  // Asleep until "a" is due before the clock moves: woken after, the
  // reaper would find "a" due at once and reap it.
  ASSERT_TRUE(
      AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.due_heard_at_sleep >= 1; }));
  clock_.Advance(absl::Hours(2));
  Put("c", {Expiring("b", absl::Hours(3))});
  ASSERT_TRUE(marks.WaitForTotal(1));
  EXPECT_EQ(reaper->stats().reaped, 0u);
}

TEST_F(ReaperTest, APartitionOfAReplicaThatStoppedIsTakenOverWithinTheBound) {
  const absl::Duration h = absl::Seconds(1);
  Watermarks dead_marks, live_marks;
  std::unique_ptr<Reaper> dead =
      StartReaper({.replica_id = "dead", .heartbeat_interval = h, .deregister = false}, dead_marks);
  std::unique_ptr<Reaper> live =
      StartReaper({.replica_id = "live", .heartbeat_interval = h}, live_marks);
  // A second heartbeat each: both see both.
  for (Reaper* r : {dead.get(), live.get()}) {
    ASSERT_TRUE(AwaitStats(*r, [](const Reaper::Stats& s) { return s.heartbeats >= 1; }));
  }
  clock_.Advance(h);
  dead->Wake();
  live->Wake();
  for (Reaper* r : {dead.get(), live.get()}) {
    ASSERT_TRUE(AwaitStats(*r, [](const Reaper::Stats& s) { return s.live_replicas == 2; }));
  }
  const std::vector<int> kept = live->owned();
  ASSERT_EQ(kept.size() + dead->owned().size(), static_cast<size_t>(kPartitions));
  ASSERT_FALSE(dead->owned().empty()) << "rendezvous hashing gave the dead replica nothing";
  // One collection in each partition.
  const std::vector<std::string> collections =
      ::lapse::testing::CollectionPerPartition(*store_, "c");
  for (const std::string& c : collections) Put(c, {Expiring("k", absl::Seconds(1))});
  const absl::Time stopped = clock_.Now();
  dead.reset();

  // Its lease still runs: the live replica reaps only its own partitions.
  clock_.Advance(absl::Seconds(1));
  live->Wake();
  ASSERT_TRUE(live_marks.WaitForTotal(kept.size()));
  EXPECT_EQ(live->owned(), kept);

  // Within 4H of the stop the live replica has taken over.
  clock_.Set(stopped + 3 * h);
  live->Wake();
  ASSERT_TRUE(AwaitStats(*live, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  ASSERT_TRUE(live_marks.WaitForTotal(kPartitions));
  EXPECT_LE(clock_.Now() - stopped, 4 * h);
  EXPECT_EQ(AllEvents().size(), static_cast<size_t>(kPartitions));
}

TEST_F(ReaperTest, TheWatermarkHoldsUntilAReplicaHasTheEvents) {
  Watermarks marks;
  std::unique_ptr<Reaper> reaper = StartReaper(
      {.wait_timeout = absl::Milliseconds(100), .max_retry = absl::Milliseconds(100)}, marks);
  ASSERT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  Put("c", {Expiring("a", absl::Seconds(1))});
  const PartitionKeys keys = KeysOf("c");
  const int replica = cluster_.ReplicaOf(MasterOf(keys.due));
  ASSERT_NE(replica, 0);

  cluster_.Signal(replica, SIGSTOP);
  clock_.Advance(absl::Seconds(1));
  reaper->Wake();
  const bool waited =
      AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.wait_failures >= 2; });
  const std::string held = On(keys.delivered, {"GET", keys.delivered});
  const uint64_t reported = marks.total();
  const std::string events = On(keys.events, {"XLEN", keys.events});
  cluster_.Signal(replica, SIGCONT);
  ASSERT_TRUE(waited);
  EXPECT_EQ(events, "1");
  EXPECT_EQ(held, "");
  EXPECT_EQ(reported, 0u);

  ASSERT_TRUE(marks.WaitForTotal(1));
  EXPECT_EQ(On(keys.delivered, {"GET", keys.delivered}), "1");
}

TEST_F(ReaperTest, ReapingResumesAfterItsMasterIsKilled) {
  Watermarks marks;
  // The promoted replica has no replica of its own left to count.
  std::unique_ptr<Reaper> reaper = StartReaper({.wait_replicas = 0}, marks);
  ASSERT_TRUE(AwaitStats(*reaper, [](const Reaper::Stats& s) { return s.owned == kPartitions; }));
  Put("c", {Expiring("a", absl::Seconds(1))});
  const PartitionKeys keys = KeysOf("c");
  cluster_.Kill(MasterOf(keys.due));
  ASSERT_TRUE(cluster_.WaitForClusterOk());

  clock_.Advance(absl::Seconds(1));
  reaper->Wake();
  ASSERT_TRUE(marks.WaitForTotal(1));
  EXPECT_EQ(AllEvents(), (std::multiset<std::string>{"c/a"}));
  // Its wake-ups follow the new master: a write wakes the reaper again.
  OpenStore(/*wait_replicas=*/0);
  Put("c", {Expiring("b", absl::Seconds(1))});
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(marks.WaitForTotal(2));
}

}  // namespace
}  // namespace lapse::redis

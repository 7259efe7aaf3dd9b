// The Redis Cluster store under the failures issue #11 names, against a real
// 3 + 3 cluster (testing/redis_cluster.h): a master SIGKILLed under a write
// and expiry load, one slot resharded under load, and a lapsed replica that
// dies without deregistering. Two stores over one cluster stand for two lapsed
// replicas, each with its reaper; a watcher reads one store's events() as
// WatchExpirations does. What is promised is in docs/redis-cluster.md
// ("Durability"): an acknowledged write survives, a delivered event is never
// lost or renumbered, every member expires once and never early.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/engine/resume_token.h"
#include "server/storage/redis/key_slot.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "testing/await.h"
#include "testing/redis_cluster.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::Await;
using ::lapse::testing::kPatience;
using ::lapse::testing::RedisCluster;
using ::lapse::testing::WaitWithPatience;

constexpr int kPartitions = 8;

// An expiry event, as a partition's stream holds it and a watcher gets it.
struct Event {
  std::string collection;
  std::string key;
  std::string value;
  int64_t deadline_ms = 0;
  int64_t expired_ms = 0;

  friend bool operator==(const Event& a, const Event& b) {
    return std::tie(a.collection, a.key, a.value, a.deadline_ms, a.expired_ms) ==
           std::tie(b.collection, b.key, b.value, b.deadline_ms, b.expired_ms);
  }
};

// Partition and partition sequence.
using Position = std::pair<int, uint64_t>;

// Reads a store's events() the way a WatchExpirations stream does, and
// records each event at its partition position (read back from the resume
// token after it). Thread-safe.
class Watcher {
 public:
  // For RedisClusterStoreOptions::on_events_readable.
  EventsReadableListener Listener() {
    return [this](uint64_t) {
      MutexLock lock(&mu_);
      ++readable_;
      cv_.SignalAll();
    };
  }

  // Reads what `store` has made readable until `done()` holds; false after
  // patience. `done` runs with the watcher's lock held.
  bool ReadUntil(const RedisClusterStore& store, absl::FunctionRef<bool()> done) {
    const absl::Time deadline = absl::Now() + kPatience;
    MutexLock lock(&mu_);
    while (true) {
      const uint64_t readable = readable_;
      ReadLocked(store);
      if (done()) return true;
      if (!cv_.WaitUntil(&mu_, deadline, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return readable_ != readable;
          })) {
        ReadLocked(store);
        return done();
      }
    }
  }

  // REQUIRES (below): the watcher's lock, as inside ReadUntil's `done`, or
  // no ReadUntil running.
  const std::map<Position, Event>& events() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return events_; }
  int TimesSeen(const std::string& key) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = seen_.find(key);
    return it == seen_.end() ? 0 : it->second;
  }
  std::set<int> partitions() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::set<int> out;
    for (const auto& [position, event] : events_) out.insert(position.first);
    return out;
  }
  // Problems seen while reading: an error, a position met twice.
  const std::vector<std::string>& problems() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return problems_;
  }

 private:
  void ReadLocked(const RedisClusterStore& store) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const EventSource& source = store.events();
    const EventFilter all{.include_values = true};
    while (cursor_ < source.last_sequence()) {
      absl::StatusOr<EventBatch> batch = source.Read(cursor_, all, {});
      if (!batch.ok()) {
        problems_.push_back(batch.status().ToString());
        return;
      }
      if (batch->examined_sequence <= cursor_) return;
      for (const ExpiryEvent& e : batch->events) {
        const int partition = store.PartitionOf(e.collection);
        absl::StatusOr<ResumePosition> token =
            DecodeResumeToken(source.ResumeTokenAfter(e.sequence));
        uint64_t sequence = 0;
        for (const PartitionPosition& p :
             token.ok() ? token->partitions : std::vector<PartitionPosition>{}) {
          if (static_cast<int>(p.partition) == partition) sequence = p.sequence;
        }
        const Position position{partition, sequence};
        const Event event{e.collection, e.key, e.value, absl::ToUnixMillis(e.expire_time),
                          absl::ToUnixMillis(e.expired_at)};
        if (!events_.emplace(position, event).second) {
          problems_.push_back(absl::StrCat("partition ", partition, " sequence ", sequence,
                                           " delivered twice (", e.key, ")"));
        }
        ++seen_[e.key];
      }
      cursor_ = batch->examined_sequence;
    }
  }

  Mutex mu_;
  CondVar cv_;
  uint64_t readable_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cursor_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<Position, Event> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> problems_ ABSL_GUARDED_BY(mu_);
};

// One PutMembers of a Load: one member, under a key no other write uses.
struct Write {
  int store = 0;
  std::string collection;
  int partition = 0;
  std::string key;
  std::string value;
  // Every fifth member lives an hour (it must still be there at the end);
  // the others expire within a second.
  bool expires = true;
  absl::Time sent;
  // Unset until answered.
  std::optional<absl::Status> outcome;
  absl::Time answered;
};

// Writers: `chains` PutMembers in flight on each store at every moment, each
// chain sending its next write when the last is answered, over
// `collections` in turn, until Stop(). Thread-safe.
class Load {
 public:
  Load(std::vector<RedisClusterStore*> stores, std::vector<std::string> collections, int chains)
      : stores_(std::move(stores)), collections_(std::move(collections)), chains_(chains) {}
  ~Load() { Stop(); }

  void Start() {
    MutexLock lock(&mu_);
    for (size_t s = 0; s < stores_.size(); ++s) {
      for (int c = 0; c < chains_; ++c) SendLocked(static_cast<int>(s));
    }
  }

  // Sends no more and waits for the writes in flight; false after patience.
  bool Stop() {
    MutexLock lock(&mu_);
    stopping_ = true;
    return WaitWithPatience(mu_, cv_,
                            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; });
  }

  // Waits until `n` answered writes satisfy `which`; false after patience.
  bool WaitForAnswers(size_t n, absl::FunctionRef<bool(const Write&)> which) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      size_t answered = 0;
      for (const Write& w : writes_) answered += w.outcome.has_value() && which(w);
      return answered >= n;
    });
  }

  // Every write; call after Stop().
  const std::deque<Write>& writes() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return writes_; }

 private:
  void SendLocked(int store) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t n = writes_.size();
    Write& w = writes_.emplace_back();
    w.store = store;
    w.collection = collections_[n % collections_.size()];
    w.partition = stores_[store]->PartitionOf(w.collection);
    w.key = absl::StrCat("k", n);
    w.value = absl::StrCat("v", n);
    w.expires = n % 5 != 0;
    w.sent = absl::Now();
    const Expiration expiration =
        w.expires ? Expiration::Ttl(absl::Milliseconds(300 + 100 * static_cast<int>(n % 7)))
                  : Expiration::Ttl(absl::Hours(1));
    const MemberWrite member{.key = w.key, .value = w.value, .expiration = expiration};
    ++in_flight_;
    stores_[store]->PutMembers(w.collection, {&member, 1}, {},
                               [this, store, n](absl::StatusOr<std::vector<PutResult>> put) {
                                 MutexLock lock(&mu_);
                                 Write& w = writes_[n];
                                 w.outcome = put.status();
                                 w.answered = absl::Now();
                                 --in_flight_;
                                 if (!stopping_) SendLocked(store);
                                 cv_.SignalAll();
                               });
  }

  // Constant after construction.
  const std::vector<RedisClusterStore*> stores_;
  const std::vector<std::string> collections_;
  const int chains_;

  Mutex mu_;
  CondVar cv_;
  // A deque: a write's place never moves while its call is in flight.
  std::deque<Write> writes_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.status().ok()) << cluster_.status(); }

  // A store as one lapsed replica opens it, reaping, its events read by
  // `watcher` (may be null).
  std::unique_ptr<RedisClusterStore> OpenStore(Watcher* watcher,
                                               RedisClusterStoreOptions options = {}) {
    options.router.seeds = cluster_.seeds();
    options.partitions = kPartitions;
    if (watcher != nullptr) options.on_events_readable = watcher->Listener();
    absl::StatusOr<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // `per_partition` collection names in each partition, and `extra` more in
  // partition `busy`.
  static std::vector<std::string> Collections(const RedisClusterStore& store, int per_partition,
                                              int busy = 0, int extra = 0) {
    std::vector<int> wanted(kPartitions, per_partition);
    wanted[busy] += extra;
    std::vector<std::string> out;
    for (int i = 0; out.size() < static_cast<size_t>(kPartitions * per_partition + extra); ++i) {
      std::string name = absl::StrCat("orders:", i);
      int& left = wanted[store.PartitionOf(name)];
      if (left > 0) {
        --left;
        out.push_back(std::move(name));
      }
    }
    return out;
  }

  // The master serving `key`'s slot now: the one that does not redirect it.
  int MasterOf(const std::string& key) const {
    for (int port : cluster_.MasterPorts()) {
      absl::StatusOr<std::string> reply = cluster_.Command(port, {"EXISTS", key});
      if (reply.ok() && !absl::StartsWith(*reply, "MOVED") && !absl::StartsWith(*reply, "ASK")) {
        return port;
      }
    }
    return 0;
  }

  // Every partition's stream, read from the masters directly.
  std::map<Position, Event> ReadStreams(const RedisClusterStore& store) const {
    std::map<Position, Event> out;
    for (int p = 0; p < kPartitions; ++p) {
      const std::string stream = PartitionKeys(store.TagOf(p)).events;
      absl::StatusOr<std::string> range =
          cluster_.Command(MasterOf(stream), {"XRANGE", stream, "-", "+"});
      if (!range.ok() || range->empty()) continue;
      const std::vector<std::string> lines = absl::StrSplit(*range, '\n');
      // Each entry flattens to: id, then c, C, k, K, v, V, d, D, x, X.
      for (size_t i = 0; i + 10 < lines.size(); i += 11) {
        uint64_t sequence = 0;
        Event e{lines[i + 2], lines[i + 4], lines[i + 6]};
        const bool parsed = absl::SimpleAtoi(absl::StripSuffix(lines[i], "-0"), &sequence) &&
                            absl::SimpleAtoi(lines[i + 8], &e.deadline_ms) &&
                            absl::SimpleAtoi(lines[i + 10], &e.expired_ms);
        EXPECT_TRUE(parsed) << "partition " << p << " entry " << lines[i];
        out.emplace(Position{p, sequence}, std::move(e));
      }
    }
    return out;
  }

  // Waits until `watcher` has seen an event for every expiring write
  // acknowledged, then checks what every test of a load checks:
  // - every write acknowledged that expires has exactly one event in the
  //   streams and was delivered exactly once; every one that lives an hour
  //   is there, with its value, and has no event;
  // - a write whose outcome is unknown (UNAVAILABLE) has at most one event;
  //   no other error happened;
  // - every event the watcher got is in the streams at the same partition
  //   position with the same content (nothing delivered was lost or
  //   renumbered), each partition's stream is 1, 2, 3, ... without a gap,
  //   and no event came before its member's deadline.
  // Returns the streams.
  std::map<Position, Event> CheckLoad(const Load& load, RedisClusterStore& store,
                                      Watcher& watcher) {
    const std::deque<Write>& writes = load.writes();
    auto acked = [](const Write& w) { return w.outcome.has_value() && w.outcome->ok(); };
    EXPECT_TRUE(watcher.ReadUntil(store, [&] {
      return std::all_of(writes.begin(), writes.end(), [&](const Write& w) {
        return !w.expires || !acked(w) || watcher.TimesSeen(w.key) > 0;
      });
    })) << "events of acknowledged writes were not delivered";
    EXPECT_EQ(watcher.problems(), std::vector<std::string>{});

    const std::map<Position, Event> streams = ReadStreams(store);
    std::map<std::string, int> in_streams;
    std::map<int, uint64_t> last;
    for (const auto& [position, e] : streams) {
      ++in_streams[e.key];
      EXPECT_GE(e.expired_ms, e.deadline_ms) << e.key << " expired early";
      EXPECT_EQ(position.second, ++last[position.first])
          << "partition " << position.first << " skips a sequence";
    }
    for (const auto& [position, e] : watcher.events()) {
      auto it = streams.find(position);
      if (it == streams.end()) {
        ADD_FAILURE() << "delivered event " << e.key << " (partition " << position.first
                      << " sequence " << position.second << ") is gone";
      } else {
        EXPECT_EQ(it->second, e) << "delivered event " << e.key << " (partition " << position.first
                                 << " sequence " << position.second
                                 << ") was renumbered: the stream now holds " << it->second.key;
      }
    }

    std::map<std::string, std::vector<const Write*>> lasting;
    for (const Write& w : writes) {
      if (!w.outcome.has_value()) {
        ADD_FAILURE() << w.key << " was never answered";
      } else if (!acked(w)) {
        EXPECT_EQ(w.outcome->code(), absl::StatusCode::kUnavailable) << *w.outcome;
        EXPECT_LE(in_streams[w.key], 1) << w.key << " (outcome unknown) expired twice";
        EXPECT_LE(watcher.TimesSeen(w.key), 1) << w.key << " (outcome unknown) delivered twice";
      } else if (w.expires) {
        EXPECT_EQ(in_streams[w.key], 1) << w.key << " acknowledged";
        EXPECT_EQ(watcher.TimesSeen(w.key), 1) << w.key << " acknowledged";
      } else {
        EXPECT_EQ(in_streams[w.key], 0) << w.key << " lives an hour";
        lasting[w.collection].push_back(&w);
      }
    }
    for (const auto& [name, members] : lasting) {
      const std::string& collection = name;
      std::vector<absl::string_view> keys;
      for (const Write* w : members) keys.push_back(w->key);
      for (size_t from = 0; from < keys.size(); from += 500) {
        const absl::Span<const absl::string_view> some =
            absl::MakeConstSpan(keys).subspan(from, 500);
        absl::StatusOr<std::vector<GetResult>> got = Await<std::vector<GetResult>>([&](auto done) {
          store.GetMembers(collection, some, Expiration::None(), std::move(done));
        });
        EXPECT_TRUE(got.ok()) << got.status();
        for (size_t i = 0; got.ok() && i < some.size(); ++i) {
          EXPECT_TRUE((*got)[i].found) << "acknowledged " << some[i] << " is lost";
          EXPECT_EQ((*got)[i].value, members[from + i]->value);
        }
      }
    }
    return streams;
  }

  // Two lapsed replicas' stores, a_ with watcher_ reading its events; false
  // if one did not open.
  bool OpenTwoReplicas() {
    a_ = OpenStore(&watcher_);
    b_ = OpenStore(nullptr);
    return a_ != nullptr && b_ != nullptr;
  }

  RedisCluster cluster_;
  // Outlives the stores, which tell it of new events.
  Watcher watcher_;
  std::unique_ptr<RedisClusterStore> a_;
  std::unique_ptr<RedisClusterStore> b_;
};

// A summary of a load's answers, for the log.
std::string Outcomes(const Load& load) {
  size_t ok = 0, unknown = 0;
  for (const Write& w : load.writes()) (w.outcome->ok() ? ok : unknown)++;
  return absl::StrCat(load.writes().size(), " writes: ", ok, " acknowledged, ", unknown,
                      " outcome unknown");
}

TEST_F(FailoverTest, AMasterKilledUnderLoadLosesNoAcknowledgedWriteAndNoDeliveredEvent) {
  ASSERT_TRUE(OpenTwoReplicas());
  RedisClusterStore* const a = a_.get();
  Watcher& watcher = watcher_;
  Load load({a_.get(), b_.get()}, Collections(*a, 3), /*chains=*/3);
  load.Start();
  // Events delivered in every partition before the kill.
  ASSERT_TRUE(watcher.ReadUntil(*a, [&] {
    return watcher.partitions().size() == kPartitions && watcher.events().size() >= 300;
  }));

  const size_t delivered_before_kill = watcher.events().size();
  const int victim = MasterOf(PartitionKeys(a->TagOf(0)).events);
  ASSERT_NE(victim, 0);
  std::set<int> victim_partitions;
  for (int p = 0; p < kPartitions; ++p) {
    if (MasterOf(PartitionKeys(a->TagOf(p)).events) == victim) victim_partitions.insert(p);
  }
  const absl::Time killed = absl::Now();
  cluster_.Kill(victim);
  ASSERT_TRUE(cluster_.WaitForClusterOk());
  const absl::Time promoted = absl::Now();
  // Until the killed node is back as its replica, the promoted master has
  // no replica for WAIT to count: its writes fail UNAVAILABLE (outcome
  // unknown), its watermarks hold, and its expiries go on.
  auto on_victim = [&](absl::Time since, bool ok) {
    return [&, since, ok](const Write& w) {
      return victim_partitions.count(w.partition) > 0 && w.answered > since &&
             w.outcome->ok() == ok;
    };
  };
  ASSERT_TRUE(load.WaitForAnswers(6, on_victim(promoted, false)));
  ASSERT_TRUE(cluster_.Restart(victim).ok());
  ASSERT_TRUE(cluster_.WaitForReplicasLinked());
  const absl::Time linked = absl::Now();
  ASSERT_TRUE(load.WaitForAnswers(100, on_victim(linked, true)));
  ASSERT_TRUE(load.Stop());

  const std::map<Position, Event> streams = CheckLoad(load, *a, watcher);
  // The pause of the victim's partitions: until a write sent after the kill
  // was acknowledged.
  absl::Time first_ack_after_kill = absl::InfiniteFuture();
  for (const Write& w : load.writes()) {
    if (victim_partitions.count(w.partition) > 0 && w.sent > killed && w.outcome->ok()) {
      first_ack_after_kill = std::min(first_ack_after_kill, w.answered);
    }
  }
  int64_t latest_ms = 0;
  for (const auto& [position, e] : streams) {
    latest_ms = std::max(latest_ms, e.expired_ms - e.deadline_ms);
  }
  // Expiry is late by the failover, plus, while the promoted master has no
  // replica, a pass held behind a WAIT, its own WAIT and the reaper's retry
  // backoff (1 s each), plus a margin for this shared machine.
  EXPECT_LE(latest_ms, absl::ToInt64Milliseconds(promoted - killed + absl::Seconds(3 + 4)));
  std::cout << "failover of master :" << victim << " (partitions " << victim_partitions.size()
            << " of " << kPartitions << "): promoted " << absl::FormatDuration(promoted - killed)
            << " after the kill, old master back as its replica "
            << absl::FormatDuration(linked - killed)
            << " after, first write sent after the kill acknowledged "
            << absl::FormatDuration(first_ack_after_kill - killed) << " after; latest expiry "
            << latest_ms << " ms after its deadline; " << Outcomes(load) << "; " << streams.size()
            << " events, " << delivered_before_kill << " delivered before the kill\n";
}

TEST_F(FailoverTest, ASlotMovedUnderLoadLosesAndDuplicatesNothing) {
  ASSERT_TRUE(OpenTwoReplicas());
  RedisClusterStore* const a = a_.get();
  Watcher& watcher = watcher_;
  constexpr int kBusy = 0;
  // Half of the writes go to the busy partition.
  Load load({a_.get(), b_.get()}, Collections(*a, 1, kBusy, kPartitions - 1), /*chains=*/3);
  load.Start();
  ASSERT_TRUE(watcher.ReadUntil(*a, [&] { return watcher.events().size() >= 200; }));

  const std::string busy_stream = PartitionKeys(a->TagOf(kBusy)).events;
  const int source = MasterOf(busy_stream);
  const int target = cluster_.AnotherMaster(source);
  ASSERT_NE(source, 0);
  ASSERT_NE(target, 0);
  // A collection of the busy partition that has no keys yet: while the
  // slot's keys are split, its script's keys are on neither node in full.
  std::string fresh;
  for (int i = 0; fresh.empty(); ++i) {
    const std::string name = absl::StrCat("fresh:", i);
    if (a->PartitionOf(name) == kBusy) fresh = name;
  }
  const MemberWrite member{
      .key = "m", .value = "during", .expiration = Expiration::Ttl(absl::Hours(1))};
  // Its answer's home outlives the store, which answers when destroyed.
  struct Answer {
    Mutex mu;
    CondVar cv;
    std::optional<absl::Status> status ABSL_GUARDED_BY(mu);
  };
  const auto fresh_put = std::make_shared<Answer>();
  const int64_t tryagain_before = cluster_.ErrorReplies("TRYAGAIN");
  const int64_t ask_before = cluster_.ErrorReplies("ASK");
  int moved_keys = 0;
  const absl::Status migrated =
      cluster_.MigrateSlot(KeySlot(a->TagOf(kBusy)), target, [&](int moved) {
        moved_keys = moved;
        if (moved != 1) return;
        a->PutMembers(fresh, {&member, 1}, {},
                      [fresh_put](absl::StatusOr<std::vector<PutResult>> put) {
                        MutexLock lock(&fresh_put->mu);
                        fresh_put->status = put.status();
                        fresh_put->cv.Signal();
                      });
        // Answered TRYAGAIN, and not given up on: it completes below.
        EXPECT_TRUE(cluster_.WaitForErrorReplies("TRYAGAIN", tryagain_before));
      });
  ASSERT_TRUE(migrated.ok()) << migrated;
  const absl::Time moved_at = absl::Now();
  {
    Answer& answer = *fresh_put;
    MutexLock lock(&answer.mu);
    ASSERT_TRUE(WaitWithPatience(
        answer.mu, answer.cv,
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(answer.mu) { return answer.status.has_value(); }));
    EXPECT_TRUE(answer.status->ok()) << *answer.status;
  }
  EXPECT_EQ(MasterOf(busy_stream), target);
  // The busy partition is written, and expires, on its new master.
  ASSERT_TRUE(load.WaitForAnswers(200, [&](const Write& w) {
    return w.partition == kBusy && w.answered > moved_at && w.outcome->ok();
  }));
  ASSERT_TRUE(load.Stop());

  const std::map<Position, Event> streams = CheckLoad(load, *a, watcher);
  for (const Write& w : load.writes()) {
    EXPECT_TRUE(w.outcome->ok()) << w.key << ": " << *w.outcome;
  }
  absl::StatusOr<std::vector<GetResult>> got = Await<std::vector<GetResult>>([&](auto done) {
    b_->GetMembers(fresh, std::vector<absl::string_view>{"m"}, Expiration::None(), std::move(done));
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE((*got)[0].found);
  std::cout << "slot " << KeySlot(a->TagOf(kBusy)) << " moved :" << source << " -> :" << target
            << ", " << moved_keys << " keys; TRYAGAIN answered "
            << cluster_.ErrorReplies("TRYAGAIN") - tryagain_before << " times, ASK "
            << cluster_.ErrorReplies("ASK") - ask_before << " times; " << Outcomes(load) << "; "
            << streams.size() << " events\n";
}

TEST_F(FailoverTest, AReplicaThatDiesWithoutDeregisteringHasItsPartitionsExpiredByTheOther) {
  const absl::Duration h = absl::Seconds(1);
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  FakeClock clock(start);
  auto options = [&](std::string id, bool deregister) {
    RedisClusterStoreOptions o;
    o.replica_id = std::move(id);
    o.clock = &clock;
    o.script_clock = &clock;
    o.reaper_clock = &clock;
    o.heartbeat_interval = h;
    o.deregister = deregister;
    return o;
  };
  Watcher watcher;
  std::unique_ptr<RedisClusterStore> dying = OpenStore(nullptr, options("dying", false));
  std::unique_ptr<RedisClusterStore> live = OpenStore(&watcher, options("live", true));
  ASSERT_NE(dying, nullptr);
  ASSERT_NE(live, nullptr);
  const Reaper& reaper = *live->reaper();
  // A heartbeat each after both registered: each sees the other.
  for (RedisClusterStore* s : {dying.get(), live.get()}) {
    ASSERT_TRUE(s->reaper()->AwaitStats([](const Reaper::Stats& st) { return st.heartbeats >= 1; },
                                        kPatience));
  }
  clock.Advance(h);
  for (RedisClusterStore* s : {dying.get(), live.get()}) {
    s->WakeReaperForTesting();
    ASSERT_TRUE(s->reaper()->AwaitStats(
        [](const Reaper::Stats& st) { return st.live_replicas == 2; }, kPatience));
  }
  const std::vector<int> kept = reaper.owned();
  ASSERT_FALSE(dying->reaper()->owned().empty()) << "rendezvous hashing gave the dying one none";
  ASSERT_EQ(kept.size() + dying->reaper()->owned().size(), static_cast<size_t>(kPartitions));

  // One expiring member in each partition.
  const std::vector<std::string> collections = Collections(*live, 1);
  const MemberWrite member{.key = "k", .value = "v", .expiration = Expiration::Ttl(h)};
  for (const std::string& c : collections) {
    absl::StatusOr<std::vector<PutResult>> put = Await<std::vector<PutResult>>([&](auto done) {
      live->PutMembers(c, {&member, 1}, {}, std::move(done));
    });
    ASSERT_TRUE(put.ok()) << put.status();
  }
  const absl::Time due = clock.Now() + h;
  const absl::Time died = clock.Now();
  dying.reset();

  // Heartbeat by heartbeat: the live replica reaps its own partitions at
  // once, the dead one's once its registration has run out.
  absl::Duration taken_over = absl::InfiniteDuration();
  for (int beat = 1; beat <= 4 && taken_over == absl::InfiniteDuration(); ++beat) {
    clock.Set(died + beat * h);
    const uint64_t heartbeats = reaper.stats().heartbeats;
    live->WakeReaperForTesting();
    ASSERT_TRUE(reaper.AwaitStats([&](const Reaper::Stats& s) { return s.heartbeats > heartbeats; },
                                  kPatience));
    if (reaper.stats().owned == kPartitions) taken_over = clock.Now() - died;
  }
  EXPECT_LE(taken_over, 4 * h) << "the dead replica's partitions were not taken over";
  ASSERT_TRUE(watcher.ReadUntil(
      *live, [&] { return watcher.events().size() == static_cast<size_t>(kPartitions); }));
  for (const auto& [position, e] : watcher.events()) {
    EXPECT_EQ(e.deadline_ms, absl::ToUnixMillis(due));
    EXPECT_GE(e.expired_ms, e.deadline_ms);
    // Within 4H of the death plus one pass (the pass runs at the fake time).
    EXPECT_LE(e.expired_ms, absl::ToUnixMillis(died + 4 * h)) << e.collection;
  }
  EXPECT_EQ(watcher.partitions().size(), static_cast<size_t>(kPartitions));
  std::cout << "the dead replica's " << kPartitions - kept.size() << " partitions taken over "
            << absl::FormatDuration(taken_over)
            << " after its death (H = " << absl::FormatDuration(h) << ")\n";
}

}  // namespace
}  // namespace lapse::redis

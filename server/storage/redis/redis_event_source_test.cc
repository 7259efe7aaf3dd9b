#include "server/storage/redis/redis_event_source.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "testing/redis_cluster.h"
#include "testing/redis_partitions.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::RedisPartitionsTest;
using ::lapse::testing::WaitWithPatience;

constexpr int kPartitions = 4;

// One lapsed replica's store, with a listener that records what its events
// source made readable.
struct Replica {
  Mutex mu;
  CondVar cv;
  int calls ABSL_GUARDED_BY(mu) = 0;
  std::unique_ptr<RedisClusterStore> store;

  RedisEventSource& source() { return store->event_source(); }
  // Waits until `partition` has been read up to `sequence`.
  bool WaitRead(int partition, uint64_t sequence) {
    MutexLock lock(&mu);
    return WaitWithPatience(mu, cv, [&] { return source().read_sequence(partition) >= sequence; });
  }
  int Calls() {
    MutexLock lock(&mu);
    return calls;
  }
};

class RedisEventSourceTest : public RedisPartitionsTest {
 protected:
  void SetUp() override {
    RedisPartitionsTest::SetUp();
    if (HasFatalFailure()) return;
    a_ = OpenReplica();
    ASSERT_NE(a_, nullptr);
    collections_ = ::lapse::testing::CollectionPerPartition(*a_->store, "orders:");
  }

  std::unique_ptr<Replica> OpenReplica(size_t buffer_events = 1'000'000) {
    auto replica = std::make_unique<Replica>();
    RedisClusterStoreOptions options = StoreOptions(kPartitions);
    options.event_buffer_events = buffer_events;
    options.on_events_readable = [r = replica.get()](uint64_t) {
      MutexLock lock(&r->mu);
      ++r->calls;
      r->cv.SignalAll();
    };
    replica->store = OpenStore(std::move(options));
    if (replica->store == nullptr) return nullptr;
    return replica;
  }

  // Expires `n` members of partition p's collection, each with its event in
  // the partition's stream; returns the partition's last sequence.
  uint64_t ExpireIn(int p, int n) { return ExpireMembers(*a_->store, collections_[p], n).sequence; }

  // Delivers partition p up to `sequence` to `replica` and waits for it.
  void Deliver(Replica& replica, int p, uint64_t sequence) {
    ::lapse::testing::SetDelivered(*cluster_, *a_->store, p, sequence);
    replica.source().Advance(p, sequence);
    ASSERT_TRUE(replica.WaitRead(p, sequence));
  }

  // Reads every event after `*after` in batches of `batch`, moving `*after`.
  static std::vector<ExpiryEvent> ReadAll(const EventSource& source, uint64_t* after,
                                          size_t batch = 1000, size_t at_most = SIZE_MAX) {
    std::vector<ExpiryEvent> out;
    while (out.size() < at_most) {
      ReadLimits limits;
      limits.max_events = std::min(batch, at_most - out.size());
      absl::StatusOr<EventBatch> read = source.Read(*after, EventFilter{}, limits);
      EXPECT_TRUE(read.ok()) << read.status();
      if (!read.ok() || read->examined_sequence == *after) break;
      *after = read->examined_sequence;
      for (ExpiryEvent& e : read->events) out.push_back(std::move(e));
    }
    return out;
  }

  std::vector<std::string> collections_;
  std::unique_ptr<Replica> a_;
};

TEST_F(RedisEventSourceTest, MergesPartitionsKeepingEachPartitionsOrder) {
  uint64_t last[kPartitions];
  for (int p = 0; p < kPartitions; ++p) last[p] = ExpireIn(p, 5);
  for (int p = kPartitions - 1; p >= 0; --p) Deliver(*a_, p, last[p]);

  uint64_t after = 0;
  std::vector<ExpiryEvent> events = ReadAll(a_->source(), &after, 3);
  ASSERT_EQ(events.size(), 5u * kPartitions);
  std::map<std::string, std::vector<std::string>> keys;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(events[i].sequence, events[i - 1].sequence);
    }
    EXPECT_EQ(events[i].sequence % RedisEventSource::kPositionSpacing, 0u);
    EXPECT_EQ(events[i].value, "");  // values only with include_values
    keys[events[i].collection].push_back(events[i].key);
  }
  ASSERT_EQ(keys.size(), size_t{kPartitions});
  for (auto& [collection, in_order] : keys) {
    EXPECT_TRUE(std::is_sorted(in_order.begin(), in_order.end())) << collection;
    EXPECT_EQ(in_order.size(), 5u);
  }
  EXPECT_EQ(after, a_->source().last_sequence());
}

TEST_F(RedisEventSourceTest, NothingAboveTheWatermarkIsReadAndEachAdvanceWakesOnce) {
  const uint64_t last = ExpireIn(1, 6);
  ASSERT_EQ(last, 6u);
  const int calls = a_->Calls();
  Deliver(*a_, 1, 4);
  uint64_t after = 0;
  EXPECT_EQ(ReadAll(a_->source(), &after).size(), 4u);
  EXPECT_EQ(a_->source().read_sequence(1), 4u);
  EXPECT_EQ(a_->Calls(), calls + 1);

  Deliver(*a_, 1, 6);
  std::vector<ExpiryEvent> rest = ReadAll(a_->source(), &after);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].key, "k00004");
  EXPECT_EQ(rest[1].key, "k00005");
  EXPECT_EQ(a_->Calls(), calls + 2);
}

TEST_F(RedisEventSourceTest, ATokenResumesOnAnotherReplicaWithoutGapOrDuplicate) {
  // B is opened before anything is delivered.
  std::unique_ptr<Replica> b = OpenReplica();
  ASSERT_NE(b, nullptr);
  uint64_t last[kPartitions];
  for (int p = 0; p < kPartitions; ++p) last[p] = ExpireIn(p, 4);
  // Replica A reads the partitions in one order...
  for (int p = 0; p < kPartitions; ++p) Deliver(*a_, p, last[p]);
  // ...and B in the reverse one, and has not read partition 0 yet: A's
  // tokens are ahead of B there.
  for (int p = kPartitions - 1; p >= 1; --p) {
    b->source().Advance(p, last[p]);
    ASSERT_TRUE(b->WaitRead(p, last[p]));
  }

  for (size_t seen : {1, 5, 9}) {
    SCOPED_TRACE(seen);
    uint64_t after = 0;
    std::vector<ExpiryEvent> first = ReadAll(a_->source(), &after, 2, seen);
    ASSERT_EQ(first.size(), seen);
    const std::string token = a_->source().ResumeTokenAfter(after);

    absl::StatusOr<uint64_t> resumed = b->source().PositionOfToken(token);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    uint64_t position = *resumed;
    std::vector<ExpiryEvent> rest = ReadAll(b->source(), &position, 2);
    std::map<std::pair<std::string, std::string>, int> count;
    for (const ExpiryEvent& e : first) ++count[{e.collection, e.key}];
    for (const ExpiryEvent& e : rest) ++count[{e.collection, e.key}];
    // Partition 0 is not read by B yet: none of its events is lost, they
    // come once B reads them (below, after the loop).
    size_t unread = 0;
    for (const ExpiryEvent& e : first) unread += e.collection == collections_[0];
    EXPECT_EQ(count.size(), first.size() + rest.size()) << "a duplicate";
    EXPECT_EQ(first.size() + rest.size(), 4u * (kPartitions - 1) + unread);
  }

  uint64_t after = 0;
  std::vector<ExpiryEvent> first = ReadAll(a_->source(), &after, 2, 6);
  absl::StatusOr<uint64_t> resumed =
      b->source().PositionOfToken(a_->source().ResumeTokenAfter(after));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  uint64_t position = *resumed;
  std::vector<ExpiryEvent> rest = ReadAll(b->source(), &position);
  b->source().Advance(0, last[0]);
  ASSERT_TRUE(b->WaitRead(0, last[0]));
  for (ExpiryEvent& e : ReadAll(b->source(), &position)) rest.push_back(std::move(e));
  std::map<std::pair<std::string, std::string>, int> count;
  for (const ExpiryEvent& e : first) ++count[{e.collection, e.key}];
  for (const ExpiryEvent& e : rest) ++count[{e.collection, e.key}];
  EXPECT_EQ(count.size(), 4u * kPartitions);
  EXPECT_EQ(first.size() + rest.size(), 4u * kPartitions);
  // Once past every position of the token, B's cursor is one of its own.
  EXPECT_EQ(position, b->source().last_sequence());
  // B's token now says what A's would at its end.
  uint64_t a_end = after;
  ReadAll(a_->source(), &a_end);
  EXPECT_EQ(b->source().ResumeTokenAfter(position), a_->source().ResumeTokenAfter(a_end));
}

TEST_F(RedisEventSourceTest, ATokenOfTheSameReplicaResumesAtItsPosition) {
  for (int p = 0; p < kPartitions; ++p) Deliver(*a_, p, ExpireIn(p, 3));
  uint64_t after = 0;
  ReadAll(a_->source(), &after, 2, 7);
  absl::StatusOr<uint64_t> resumed =
      a_->source().PositionOfToken(a_->source().ResumeTokenAfter(after));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, after);
}

TEST_F(RedisEventSourceTest, ATokenOfAnotherStoreIsOutOfRange) {
  ResumePosition position{.store = StoreId::Random()};
  for (uint32_t p = 0; p < kPartitions; ++p) position.partitions.push_back({p, 0});
  absl::StatusOr<uint64_t> resumed = a_->source().PositionOfToken(EncodeResumeToken(position));
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kOutOfRange) << resumed.status();
  EXPECT_TRUE(absl::StrContains(resumed.status().message(), position.store.ToString()));
  EXPECT_TRUE(absl::StrContains(resumed.status().message(), a_->source().store_id().ToString()));

  position.store = a_->source().store_id();
  position.partitions.pop_back();
  EXPECT_EQ(a_->source().PositionOfToken(EncodeResumeToken(position)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A bare after_sequence between two events' sequences that no resumed cursor
// holds: another store's, or another replica's (as the embedded store says of
// a sequence older than its first).
TEST_F(RedisEventSourceTest, APositionNoCursorHoldsBelongsToAnotherStoreOrReplica) {
  Deliver(*a_, 0, ExpireIn(0, 2));
  const uint64_t last = a_->source().last_sequence();
  for (const uint64_t position : {uint64_t{41}, last - RedisEventSource::kPositionSpacing / 2}) {
    const absl::Status status = a_->source().CheckPosition(position);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  absl::StrCat("sequence ", position, " belongs to another store")))
        << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "each replica's own")) << status;
    EXPECT_FALSE(absl::StrContains(status.message(), "--")) << "names no flag of lapsed's";
  }
  // 0, an event's sequence, and right before one are positions.
  for (const uint64_t position : {uint64_t{0}, last, last - 1}) {
    EXPECT_TRUE(a_->source().CheckPosition(position).ok()) << position;
  }
}

// As on the embedded store: the newest event's sequence + 1 is beyond it,
// on a store with no event yet and on one with events.
TEST_F(RedisEventSourceTest, APositionPastTheNewestEventIsBeyondIt) {
  for (int round = 0; round < 2; ++round) {
    const uint64_t last = a_->source().last_sequence();
    const absl::Status status = a_->source().CheckPosition(last + 1);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "beyond the newest event")) << status;
    EXPECT_FALSE(absl::StrContains(status.message(), "--")) << "names no flag of lapsed's";
    Deliver(*a_, 1, ExpireIn(1, 1));
  }
}

TEST_F(RedisEventSourceTest, APositionTrimmedFromTheStreamIsOutOfRangeNamingIt) {
  Deliver(*a_, 2, ExpireIn(2, 5));
  const std::string token = a_->source().ResumeTokenAfter(0);
  const std::string events = PartitionKeys(a_->store->TagOf(2)).events;
  ASSERT_TRUE(cluster_->CommandOnOwner(events, {"XTRIM", events, "MINID", "4-0"}).ok());
  // A replica opened now finds the stream starting at sequence 4.
  std::unique_ptr<Replica> b = OpenReplica();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->WaitRead(2, 5));
  absl::StatusOr<uint64_t> resumed = b->source().PositionOfToken(token);
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kOutOfRange) << resumed.status();
  EXPECT_TRUE(absl::StrContains(resumed.status().message(), "partition 2's events 1 to 3"))
      << resumed.status();
}

TEST_F(RedisEventSourceTest, EntriesTrimmedBeforeThisReplicaReadThemAreReportedNotSkipped) {
  const uint64_t last = ExpireIn(3, 5);
  const std::string events = PartitionKeys(a_->store->TagOf(3)).events;
  ASSERT_TRUE(cluster_->CommandOnOwner(events, {"XTRIM", events, "MINID", "4-0"}).ok());
  Deliver(*a_, 3, last);
  uint64_t after = 0;
  absl::StatusOr<EventBatch> read = a_->source().Read(after, EventFilter{}, ReadLimits{});
  EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "partition 3's sequences 1 to 3"))
      << read.status();
  // A reader that starts after the loss reads on.
  after = a_->source().last_sequence();
  Deliver(*a_, 3, ExpireIn(3, 1));
  EXPECT_EQ(ReadAll(a_->source(), &after).size(), 1u);
}

TEST_F(RedisEventSourceTest, TheLocalBufferStaysWithinItsRetentionUnderABurst) {
  std::unique_ptr<Replica> small = OpenReplica(/*buffer_events=*/10);
  ASSERT_NE(small, nullptr);
  const uint64_t old_position = small->source().last_sequence();
  Deliver(*small, 0, ExpireIn(0, 200));
  EXPECT_LE(small->source().retained().events, 10u);
  absl::StatusOr<EventBatch> read = small->source().Read(old_position, EventFilter{}, {});
  EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "190 of them were discarded"))
      << read.status();
  uint64_t after = small->source().oldest_retained_sequence() - 1;
  EXPECT_EQ(ReadAll(small->source(), &after).size(), 10u);
}

}  // namespace
}  // namespace lapse::redis

#include "server/engine/event_feed.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ExpiryEvent Event(absl::string_view collection, absl::string_view key,
                  absl::string_view value = "value") {
  ExpiryEvent e;
  e.collection = std::string(collection);
  e.key = std::string(key);
  e.value = std::string(value);
  return e;
}

std::vector<std::string> KeysOf(const EventBatch& batch) {
  std::vector<std::string> keys;
  for (const ExpiryEvent& e : batch.events) keys.push_back(e.key);
  return keys;
}

TEST(EventFeedTest, AssignsConsecutiveSequencesFromTheFirstSequence) {
  EventFeed log({.first_sequence = 100});
  EXPECT_EQ(log.last_sequence(), 99u);
  EXPECT_EQ(log.Append({Event("c", "a"), Event("c", "b")}), 101u);
  EXPECT_EQ(log.Append({Event("c", "c")}), 102u);
  absl::StatusOr<EventBatch> batch = log.Read(99, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->events.size(), 3u);
  EXPECT_EQ(batch->events[0].sequence, 100u);
  EXPECT_EQ(batch->events[2].sequence, 102u);
  EXPECT_EQ(batch->examined_sequence, 102u);
}

TEST(EventFeedTest, AppendWithNotifyLaterTellsReadersOnlyAtNotifyReadable) {
  std::vector<uint64_t> told;
  EventFeed log({.on_readable = [&told](uint64_t last) { told.push_back(last); }});
  auto nothing = [](uint64_t, uint64_t) {};
  log.Append({Event("c", "a"), Event("c", "b")}, nothing, EventFeed::Notify::kLater);
  const uint64_t last = log.Append({Event("c", "c")}, nothing, EventFeed::Notify::kLater);
  EXPECT_TRUE(told.empty());
  log.NotifyReadable();
  EXPECT_THAT(told, ElementsAre(last));
  log.Append({Event("c", "d")});
  EXPECT_THAT(told, ElementsAre(last, last + 1));
}

TEST(EventFeedTest, ReadAfterAPositionReturnsOnlyLaterEvents) {
  EventFeed log({});
  log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c")});
  absl::StatusOr<EventBatch> batch = log.Read(2, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  EXPECT_THAT(KeysOf(*batch), ::testing::ElementsAre("c"));
}

TEST(EventFeedTest, CaughtUpReadIsEmptyAndKeepsThePosition) {
  EventFeed log({});
  log.Append({Event("c", "a")});
  absl::StatusOr<EventBatch> batch = log.Read(1, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->events.empty());
  EXPECT_EQ(batch->examined_sequence, 1u);
}

TEST(EventFeedTest, ValuesAreCopiedOnlyWhenAskedFor) {
  EventFeed log({});
  log.Append({Event("c", "a", "payload")});
  EventFilter filter;
  EXPECT_EQ(log.Read(0, filter, ReadLimits{})->events[0].value, "");
  filter.include_values = true;
  EXPECT_EQ(log.Read(0, filter, ReadLimits{})->events[0].value, "payload");
}

TEST(EventFeedTest, FiltersByCollectionNamesAndByPrefixButExaminesEverything) {
  EventFeed log({});
  log.Append({Event("orders:1", "a"), Event("sessions:1", "b"), Event("orders:2", "c"),
              Event("other", "d")});
  EventFilter names;
  names.collections = {"orders:2", "other"};
  absl::StatusOr<EventBatch> by_name = log.Read(0, names, ReadLimits{});
  EXPECT_THAT(KeysOf(*by_name), ::testing::ElementsAre("c", "d"));
  EventFilter prefix;
  prefix.prefix = "orders:";
  absl::StatusOr<EventBatch> by_prefix = log.Read(0, prefix, ReadLimits{});
  EXPECT_THAT(KeysOf(*by_prefix), ::testing::ElementsAre("a", "c"));
  EXPECT_EQ(by_prefix->examined_sequence, 4u);
}

TEST(EventFeedTest, ReadStopsAtTheEventAndByteAndExaminedBounds) {
  EventFeed log({});
  for (int i = 0; i < 10; ++i) log.Append({Event("c", absl::StrCat("k", i), "0123456789")});
  EventFilter filter;
  filter.include_values = true;
  absl::StatusOr<EventBatch> by_count = log.Read(0, filter, ReadLimits{.max_events = 3});
  EXPECT_EQ(by_count->events.size(), 3u);
  EXPECT_EQ(by_count->examined_sequence, 3u);
  // Each event counts 1 + 2 + 10 bytes here.
  absl::StatusOr<EventBatch> by_bytes = log.Read(0, filter, ReadLimits{.max_bytes = 30});
  EXPECT_EQ(by_bytes->events.size(), 2u);
  EXPECT_EQ(by_bytes->examined_sequence, 2u);
  EventFilter none;
  none.collections = {"nothing"};
  absl::StatusOr<EventBatch> by_examined = log.Read(0, none, ReadLimits{.max_examined = 4});
  EXPECT_TRUE(by_examined->events.empty());
  EXPECT_EQ(by_examined->examined_sequence, 4u);
}

TEST(EventFeedTest, OneEventLargerThanTheByteBoundStillMakesProgress) {
  EventFeed log({});
  log.Append({Event("c", "big", std::string(1000, 'x'))});
  EventFilter filter;
  filter.include_values = true;
  absl::StatusOr<EventBatch> batch = log.Read(0, filter, ReadLimits{.max_bytes = 10});
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->examined_sequence, 1u);
}

TEST(EventFeedTest, RetentionByCountDropsTheOldestAndReportsOutOfRange) {
  EventFeed log({.max_events = 3});
  for (int i = 1; i <= 5; ++i) log.Append({Event("c", absl::StrCat("k", i))});
  EXPECT_EQ(log.oldest_retained_sequence(), 3u);
  EXPECT_EQ(log.last_sequence(), 5u);
  EXPECT_TRUE(log.CheckPosition(2).ok()) << "events 3.. are all retained";
  absl::StatusOr<EventBatch> gone = log.Read(1, EventFilter{}, ReadLimits{});
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(gone.status().message(), HasSubstr("oldest retained sequence is 3"));
}

TEST(EventFeedTest, RetentionByBytesDropsTheOldest) {
  const size_t one = sizeof(ExpiryEvent) + 1 + 2 + 100;
  EventFeed log({.max_bytes = 3 * one});
  for (int i = 1; i <= 5; ++i)
    log.Append({Event("c", absl::StrCat("k", i), std::string(100, 'v'))});
  EXPECT_EQ(log.oldest_retained_sequence(), 3u);
}

TEST(EventFeedTest, APositionBeyondTheNewestIsOutOfRange) {
  EventFeed log({});
  log.Append({Event("c", "a")});
  absl::Status s = log.CheckPosition(7);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("beyond the newest event 1"));
}

TEST(EventFeedTest, EmptyLogAcceptsTheStartPosition) {
  EventFeed log({.first_sequence = 50});
  EXPECT_TRUE(log.CheckPosition(49).ok());
  EXPECT_EQ(log.oldest_retained_sequence(), 50u);
  EXPECT_EQ(log.CheckPosition(10).code(), absl::StatusCode::kOutOfRange);
}

// The defect of issue #10: sequences of a fresh store start at the wall clock
// in nanoseconds, and "after 0" was refused as if events had been discarded.
TEST(EventFeedTest, AfterZeroReadsFromTheFirstEventWhileNothingWasDiscarded) {
  EventFeed log({.first_sequence = 1795000000000000748});
  log.Append({Event("c", "a"), Event("c", "b")});
  EXPECT_TRUE(log.CheckPosition(0).ok()) << log.CheckPosition(0);
  absl::StatusOr<EventBatch> batch = log.Read(0, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(KeysOf(*batch), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(batch->examined_sequence, 1795000000000000749u);
}

TEST(EventFeedTest, AfterZeroOnAnEmptyFreshStoreWaitsForTheFirstEvent) {
  EventFeed log({.first_sequence = 5000});
  absl::StatusOr<EventBatch> batch = log.Read(0, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->events.empty());
  EXPECT_EQ(batch->examined_sequence, 4999u);
}

TEST(EventFeedTest, AfterZeroIsOutOfRangeOnceEventsWereDiscarded) {
  EventFeed log({.first_sequence = 1000, .max_events = 2});
  for (int i = 1; i <= 5; ++i) log.Append({Event("c", absl::StrCat("k", i))});
  absl::Status s = log.CheckPosition(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("no longer retained: 3 of them were discarded"));
  EXPECT_THAT(s.message(), HasSubstr("oldest retained sequence is 1003"));
}

TEST(EventFeedTest, APositionBeforeTheFirstSequenceBelongsToAnotherStore) {
  const StoreId id{.high = 1, .low = 2};
  EventFeed log({.store_id = id, .first_sequence = 1000});
  log.Append({Event("c", "a")});
  absl::Status s = log.CheckPosition(500);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("sequence 500 belongs to another store"));
  EXPECT_THAT(s.message(), HasSubstr(id.ToString()));
  EXPECT_TRUE(log.CheckPosition(999).ok()) << "right before the first event";
}

TEST(EventFeedTest, RestoreKeepsTheFirstSequenceOfTheStore) {
  EventFeed log({.first_sequence = 1000});
  std::vector<ExpiryEvent> events;
  for (uint64_t seq : {1000u, 1001u}) {
    events.push_back(Event("c", absl::StrCat("k", seq)));
    events.back().sequence = seq;
  }
  log.Restore(std::move(events), 1002);
  EXPECT_THAT(KeysOf(*log.Read(0, EventFilter{}, ReadLimits{})),
              ::testing::ElementsAre("k1000", "k1001"));
  EXPECT_EQ(log.CheckPosition(10).code(), absl::StatusCode::kOutOfRange);
}

TEST(EventFeedTest, ResumeTokenStandsForTheCursorOfThisStore) {
  const StoreId id{.high = 7, .low = 8};
  EventFeed log({.store_id = id, .first_sequence = 100});
  log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c")});
  EXPECT_EQ(log.store_id(), id);
  absl::StatusOr<uint64_t> cursor = log.PositionOfToken(log.ResumeTokenAfter(101));
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(*cursor, 101u);
  EXPECT_THAT(KeysOf(*log.Read(*cursor, EventFilter{}, ReadLimits{})), ::testing::ElementsAre("c"));
}

TEST(EventFeedTest, ResumeTokenOfAnotherStoreIsOutOfRangeNamingBothStores) {
  const StoreId mine{.high = 7, .low = 8};
  const StoreId theirs{.high = 9, .low = 10};
  EventFeed log({.store_id = mine, .first_sequence = 100});
  EventFeed other({.store_id = theirs, .first_sequence = 100});
  log.Append({Event("c", "a")});
  absl::StatusOr<uint64_t> cursor = log.PositionOfToken(other.ResumeTokenAfter(100));
  EXPECT_EQ(cursor.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(cursor.status().message(),
              HasSubstr(absl::StrCat("belongs to store ", theirs.ToString(),
                                     ", not to this server's store ", mine.ToString())));
}

TEST(EventFeedTest, ResumeTokenStillChecksRetention) {
  const StoreId id{.high = 7, .low = 8};
  EventFeed log({.store_id = id, .first_sequence = 100, .max_events = 1});
  log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c")});
  absl::StatusOr<uint64_t> cursor = log.PositionOfToken(log.ResumeTokenAfter(100));
  EXPECT_EQ(cursor.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(cursor.status().message(), HasSubstr("no longer retained"));
}

TEST(EventFeedTest, ATokenForSeveralPartitionsOrMalformedIsInvalid) {
  const StoreId id{.high = 7, .low = 8};
  EventFeed log({.store_id = id});
  absl::StatusOr<uint64_t> partitions =
      log.PositionOfToken(EncodeResumeToken({.store = id, .partitions = {{0, 0}, {1, 0}}}));
  EXPECT_EQ(partitions.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(partitions.status().message(), HasSubstr("names 2 partitions"));
  EXPECT_EQ(log.PositionOfToken("garbage").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventFeedTest, AppendListenerSeesTheNewLastSequence) {
  std::vector<uint64_t> seen;
  EventFeed log({.on_readable = [&](uint64_t last) { seen.push_back(last); }});
  log.Append({Event("c", "a"), Event("c", "b")});
  log.Append({});
  log.Append({Event("c", "c")});
  EXPECT_THAT(seen, ::testing::ElementsAre(2u, 3u));
}

TEST(EventFeedTest, InvisibleEventsAreNotReadUntilMadeVisible) {
  std::vector<uint64_t> notified;
  EventFeed log({.first_sequence = 1,
                 .visible_on_append = false,
                 .on_readable = [&](uint64_t last) { notified.push_back(last); }});
  EXPECT_EQ(log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c")}), 3u);
  EXPECT_EQ(log.last_sequence(), 0u);
  EXPECT_TRUE(log.Read(0, EventFilter{}, ReadLimits{})->events.empty());
  EXPECT_EQ(log.CheckPosition(2).code(), absl::StatusCode::kOutOfRange);
  log.MakeVisibleThrough(2);
  EXPECT_EQ(log.last_sequence(), 2u);
  EXPECT_THAT(KeysOf(*log.Read(0, EventFilter{}, ReadLimits{})), ::testing::ElementsAre("a", "b"));
  log.MakeVisibleThrough(1);
  log.MakeVisibleThrough(99);
  EXPECT_EQ(log.last_sequence(), 3u);
  EXPECT_THAT(notified, ::testing::ElementsAre(2u, 3u));
}

TEST(EventFeedTest, RetentionNeverDropsEventsThatAreNotVisibleYet) {
  EventFeed log({.first_sequence = 1, .max_events = 2, .visible_on_append = false});
  log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c")});
  log.Append({Event("c", "d")});
  EXPECT_EQ(log.oldest_retained_sequence(), 1u);
  EXPECT_EQ(log.last_sequence(), 0u);
}

TEST(EventFeedTest, RetentionAppliesOnceEventsBecomeVisible) {
  EventFeed log({.first_sequence = 1, .max_events = 2, .visible_on_append = false});
  log.Append({Event("c", "a"), Event("c", "b"), Event("c", "c"), Event("c", "d")});
  EXPECT_EQ(log.oldest_retained_sequence(), 1u);
  log.MakeVisibleThrough(4);
  EXPECT_EQ(log.oldest_retained_sequence(), 3u);
}

TEST(EventFeedTest, RestoreKeepsTheRunContiguousWithTheNextSequence) {
  std::vector<ExpiryEvent> events;
  for (uint64_t seq : {3u, 5u, 6u, 7u}) {
    events.push_back(Event("c", absl::StrCat("k", seq)));
    events.back().sequence = seq;
  }
  EventFeed log({});
  log.Restore(std::move(events), 8);
  EXPECT_EQ(log.oldest_retained_sequence(), 5u);
  EXPECT_EQ(log.last_sequence(), 7u);
  EXPECT_THAT(KeysOf(*log.Read(4, EventFilter{}, ReadLimits{})),
              ::testing::ElementsAre("k5", "k6", "k7"));
  EXPECT_EQ(log.Append({Event("c", "new")}), 8u);
}

TEST(EventFeedTest, RestoreWithNoEventsStartsAtTheNextSequence) {
  EventFeed log({.first_sequence = 1});
  log.Restore({}, 1000);
  EXPECT_EQ(log.last_sequence(), 999u);
  EXPECT_EQ(log.Append({Event("c", "a")}), 1000u);
}

// More events than one EventBlock holds: the feed keeps them in several.
std::vector<ExpiryEvent> ManyEvents(size_t n) {
  std::vector<ExpiryEvent> events;
  for (size_t i = 0; i < n; ++i) events.push_back(Event(i % 3 == 0 ? "a" : "b", absl::StrCat(i)));
  return events;
}

TEST(EventFeedTest, ReadsFromAnyPositionAcrossBlockBoundaries) {
  const size_t n = 3 * EventBlock::kMaxEvents + 5;
  EventFeed log({.first_sequence = 1});
  log.Append(ManyEvents(n));
  for (uint64_t after :
       {uint64_t{0}, uint64_t{EventBlock::kMaxEvents - 1}, uint64_t{EventBlock::kMaxEvents},
        uint64_t{2 * EventBlock::kMaxEvents + 7}, uint64_t{n - 1}}) {
    absl::StatusOr<EventBatch> batch =
        log.Read(after, EventFilter{}, ReadLimits{.max_events = 3000, .max_examined = 3000});
    ASSERT_TRUE(batch.ok());
    ASSERT_FALSE(batch->events.empty());
    for (size_t i = 0; i < batch->events.size(); ++i) {
      const ExpiryEvent& e = batch->events[i];
      ASSERT_EQ(e.sequence, after + 1 + i);
      ASSERT_EQ(e.key, absl::StrCat(e.sequence - 1));
      ASSERT_EQ(e.collection, (e.sequence - 1) % 3 == 0 ? "a" : "b");
    }
  }
}

TEST(EventFeedTest, ReadEachHandsOverTheEventsReadReturnsFromMidBlock) {
  const size_t n = 3 * EventBlock::kMaxEvents + 5;
  EventFeed log({.first_sequence = 1});
  log.Append(ManyEvents(n));
  const ReadLimits limits{.max_events = 700, .max_bytes = 4000, .max_examined = 2000};
  for (bool include_values : {false, true}) {
    EventFilter filter;
    filter.prefix = "a";
    filter.include_values = include_values;
    for (uint64_t after = EventBlock::kMaxEvents - 3; after < n;) {
      absl::StatusOr<EventBatch> batch = log.Read(after, filter, limits);
      ASSERT_TRUE(batch.ok());
      std::vector<ExpiryEvent> seen;
      absl::StatusOr<uint64_t> examined =
          log.ReadEach(after, filter, limits, [&](uint64_t sequence, const ExpiryEventView& e) {
            ExpiryEvent& out = seen.emplace_back();
            out.sequence = sequence;
            out.collection = std::string(e.collection);
            out.key = std::string(e.key);
            out.value = std::string(e.value);
          });
      ASSERT_TRUE(examined.ok());
      EXPECT_EQ(*examined, batch->examined_sequence);
      ASSERT_EQ(seen.size(), batch->events.size());
      for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].sequence, batch->events[i].sequence);
        EXPECT_EQ(seen[i].collection, "a");
        EXPECT_EQ(seen[i].key, absl::StrCat(seen[i].sequence - 1));
        EXPECT_EQ(seen[i].value, include_values ? "value" : "");
      }
      ASSERT_GT(*examined, after);
      after = *examined;
    }
  }
}

TEST(EventFeedTest, RetentionDropsTheOldestAcrossBlockBoundaries) {
  const size_t n = 3 * EventBlock::kMaxEvents;
  EventFeed log({.first_sequence = 1, .max_events = EventBlock::kMaxEvents + 10});
  log.Append(ManyEvents(n));
  EXPECT_EQ(log.retained().events, EventBlock::kMaxEvents + 10);
  const uint64_t oldest = n - EventBlock::kMaxEvents - 9;
  EXPECT_EQ(log.oldest_retained_sequence(), oldest);
  absl::StatusOr<EventBatch> batch = log.Read(oldest - 1, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->events.front().key, absl::StrCat(oldest - 1));
  log.Append({Event("c", "new")});
  EXPECT_EQ(log.oldest_retained_sequence(), oldest + 1);
  EXPECT_EQ(log.retained().events, EventBlock::kMaxEvents + 10);
}

TEST(EventFeedTest, DropInvisibleAcrossBlocksKeepsTheVisibleEventsAndReusesSequences) {
  EventFeed log({.first_sequence = 1, .visible_on_append = false});
  log.Append(ManyEvents(2 * EventBlock::kMaxEvents + 3));
  log.MakeVisibleThrough(5);
  log.DropInvisible();
  EXPECT_EQ(log.retained().events, 5u);
  EXPECT_EQ(log.Append({Event("c", "again")}), 6u);
  log.MakeVisibleThrough(6);
  EXPECT_THAT(KeysOf(*log.Read(0, EventFilter{}, ReadLimits{})),
              ElementsAre("0", "1", "2", "3", "4", "again"));
}

TEST(EventFeedTest, DropInvisibleOfEverythingEmptiesTheFeed) {
  EventFeed log({.first_sequence = 1, .visible_on_append = false});
  log.Append(ManyEvents(EventBlock::kMaxEvents + 1));
  log.DropInvisible();
  EXPECT_EQ(log.retained().events, 0u);
  EXPECT_EQ(log.retained().bytes, 0u);
  EXPECT_EQ(log.Append({Event("c", "first")}), 1u);
  log.MakeVisibleThrough(1);
  EXPECT_THAT(KeysOf(*log.Read(0, EventFilter{}, ReadLimits{})), ElementsAre("first"));
}

// The expirer appends while watch streams read: an append must not wait for
// a reader that is handing out events (perftail3: a reader kept off the CPU
// held the expirer back).
TEST(EventFeedTest, AppendDoesNotWaitForAReaderVisitingEvents) {
  EventFeed log({.first_sequence = 1});
  log.Append({Event("c", "a"), Event("c", "b")});
  struct {
    Mutex mu;
    CondVar cv;
    bool appended ABSL_GUARDED_BY(mu) = false;
  } state;
  bool appended_while_visiting = false;
  std::thread appender;
  absl::StatusOr<uint64_t> examined =
      log.ReadEach(0, EventFilter{}, ReadLimits{}, [&](uint64_t sequence, const ExpiryEventView&) {
        if (sequence != 1) return;
        appender = std::thread([&] {
          log.Append({Event("c", "c")});
          MutexLock lock(&state.mu);
          state.appended = true;
          state.cv.SignalAll();
        });
        MutexLock lock(&state.mu);
        appended_while_visiting = testing::WaitWithPatience(
            state.mu, state.cv,
            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) { return state.appended; });
      });
  appender.join();
  EXPECT_TRUE(appended_while_visiting);
  ASSERT_TRUE(examined.ok());
  // The read saw what was visible when it started.
  EXPECT_EQ(*examined, 2u);
  EXPECT_EQ(log.last_sequence(), 3u);
}

TEST(EventFeedTest, AReadThatRetentionOvertookStopsAndTheNextReadIsOutOfRange) {
  const size_t block = EventBlock::kMaxEvents;
  EventFeed log({.first_sequence = 1, .max_events = 2 * block});
  auto events = [](size_t n, absl::string_view key) {
    std::vector<ExpiryEvent> out(n, Event("c", key));
    return out;
  };
  log.Append(events(2 * block, "old"));
  size_t visited = 0;
  absl::StatusOr<uint64_t> examined =
      log.ReadEach(0, EventFilter{}, ReadLimits{.max_events = 3 * block, .max_examined = 3 * block},
                   [&](uint64_t, const ExpiryEventView& e) {
                     EXPECT_EQ(e.key, "old");
                     // Drops both blocks of old events while the read is in the first.
                     if (visited++ == 0) log.Append(events(2 * block, "new"));
                   });
  ASSERT_TRUE(examined.ok());
  EXPECT_EQ(*examined, block);
  EXPECT_EQ(visited, block);
  absl::StatusOr<EventBatch> next = log.Read(*examined, EventFilter{}, ReadLimits{});
  EXPECT_EQ(next.status().code(), absl::StatusCode::kOutOfRange);
}

// Readers race one writer that appends, trims and drops invisible events
// (some sharing a block with visible ones). Whatever the interleaving, every
// read hands out consecutive sequences, each with the key the writer gave
// it, or is OUT_OF_RANGE; no read sees a dropped event; every reader ends at
// the writer's last sequence.
TEST(EventFeedTest, ReadersRacingAppendsTrimsAndDropsSeeEveryEventTheyReadIntact) {
  EventFeed log({.first_sequence = 1, .max_events = 3000, .visible_on_append = false});
  constexpr int kRounds = 300;
  std::atomic<uint64_t> final_sequence{0};
  std::thread writer([&] {
    uint64_t next = 1;
    for (int round = 0; round < kRounds; ++round) {
      const size_t good = 1 + (round * 7919) % 1500;
      const size_t doomed = round % 3 == 0 ? 1 + round % 50 : 0;
      std::vector<ExpiryEvent> events;
      for (size_t i = 0; i < good; ++i) events.push_back(Event("c", absl::StrCat(next + i)));
      for (size_t i = 0; i < doomed; ++i) events.push_back(Event("c", "doomed"));
      const uint64_t last = log.Append(std::move(events)) - doomed;
      log.MakeVisibleThrough(last);
      log.DropInvisible();
      next = last + 1;
    }
    final_sequence.store(next - 1);
  });
  constexpr int kReaders = 3;
  std::vector<size_t> wrong(kReaders, 0);
  std::vector<size_t> read(kReaders, 0);
  std::vector<uint64_t> ended(kReaders, 0);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      uint64_t cursor = 0;
      while (final_sequence.load() == 0 || cursor < final_sequence.load()) {
        uint64_t expected = cursor + 1;
        absl::StatusOr<uint64_t> examined =
            log.ReadEach(cursor, EventFilter{}, ReadLimits{.max_events = 500, .max_examined = 700},
                         [&](uint64_t sequence, const ExpiryEventView& e) {
                           if (sequence != expected++ || e.key != absl::StrCat(sequence))
                             ++wrong[r];
                           ++read[r];
                         });
        if (examined.ok()) {
          if (*examined != expected - 1) ++wrong[r];
          cursor = *examined;
        } else if (examined.status().code() == absl::StatusCode::kOutOfRange) {
          cursor = log.oldest_retained_sequence() - 1;
        } else {
          ++wrong[r];
          return;
        }
      }
      ended[r] = cursor;
    });
  }
  writer.join();
  for (std::thread& t : readers) t.join();
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(wrong[r], 0u) << "reader " << r;
    EXPECT_GT(read[r], 0u) << "reader " << r;
    EXPECT_EQ(ended[r], final_sequence.load()) << "reader " << r;
  }
}

}  // namespace
}  // namespace lapse

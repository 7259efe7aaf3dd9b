#include "server/engine/deadline_queue.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/base/deadline.h"

namespace lapse {
namespace {

using Queue = DeadlineQueue<int>;

// The queue's front against the model's: the same earliest deadline, and an
// item the model holds under it.
void ExpectFrontAgrees(const Queue& queue, const std::set<std::pair<int64_t, int*>>& model) {
  ASSERT_EQ(queue.empty(), model.empty());
  if (model.empty()) {
    EXPECT_EQ(queue.NextDeadline(), kNoDeadlineMs);
    EXPECT_EQ(queue.Front(), nullptr);
    return;
  }
  ASSERT_EQ(queue.NextDeadline(), model.begin()->first);
  EXPECT_EQ(model.count({queue.NextDeadline(), queue.Front()}), 1u);
}

// Random adds, removes, moves and pops, each followed by a comparison with a
// std::set: deadlines close together (buckets filled past their capacity),
// spread over hours (past the ring's span), earlier than everything queued
// (the ring moving back), negative, and at the limits; the front popped as
// the drain pops it, while "now" moves on.
void AgreesWithAnOrderedSet(uint32_t seed, int items_count, int steps) {
  std::vector<int> items(items_count);
  std::vector<int64_t> queued(items_count, kNoDeadlineMs);
  std::set<std::pair<int64_t, int*>> model;
  Queue queue;
  std::mt19937 random(seed);
  const auto pick = [&](int64_t n) { return static_cast<int64_t>(random() % n); };
  int64_t now = 1'700'000'000'000;
  const int64_t span = int64_t{1} << Queue::kSpanBits;
  // The narrowest buckets' width.
  const int64_t bucket_ms = span >> Queue::kMaxSlotBits;
  const auto deadline = [&]() -> int64_t {
    switch (pick(9)) {
      case 0:
        return now + pick(4);  // a crowd in one bucket
      case 1:
        return now + pick(10'000);
      case 2:
        return now + pick(span);
      case 3:
        return now + pick(4 * span);
      case 4:
        return now - pick(span);  // earlier than the ring
      case 5:
        return now + span - 1 + pick(3);  // the ring's edge
      case 6:
        return -pick(2 * bucket_ms);  // negative: floor division
      case 7:
        return pick(2) == 0 ? kEarliestDeadlineMs : kLatestDeadlineMs;
      default:
        return now + bucket_ms * pick(8);
    }
  };
  // Two rounds: the second starts from a queue emptied by the first.
  for (int round = 0; round < 2; ++round) {
    for (int step = 0; step < steps; ++step) {
      const int i = static_cast<int>(pick(items_count));
      int* item = &items[i];
      const int op = static_cast<int>(pick(10));
      if (op < 2 && !model.empty()) {
        // Pop the front, as the drain does.
        const int64_t d = queue.NextDeadline();
        int* front = queue.Front();
        ASSERT_EQ(model.begin()->first, d);
        ASSERT_EQ(model.erase({d, front}), 1u);
        queue.Remove(d, front);
        queued[front - items.data()] = kNoDeadlineMs;
      } else if (queued[i] == kNoDeadlineMs) {
        const int64_t d = deadline();
        queue.Add(d, item);
        model.emplace(d, item);
        queued[i] = d;
      } else if (op < 5) {
        queue.Remove(queued[i], item);
        model.erase({queued[i], item});
        queued[i] = kNoDeadlineMs;
      } else {
        // A collection's earliest deadline moving.
        const int64_t d = deadline();
        queue.Remove(queued[i], item);
        model.erase({queued[i], item});
        queue.Add(d, item);
        model.emplace(d, item);
        queued[i] = d;
      }
      ASSERT_NO_FATAL_FAILURE(ExpectFrontAgrees(queue, model)) << "step " << step;
      if (pick(50) == 0) now += pick(2 * bucket_ms);
    }
    // Drained whole, in deadline order.
    while (!model.empty()) {
      const int64_t d = queue.NextDeadline();
      int* front = queue.Front();
      ASSERT_EQ(model.begin()->first, d);
      ASSERT_EQ(model.erase({d, front}), 1u);
      queue.Remove(d, front);
      queued[front - items.data()] = kNoDeadlineMs;
      ASSERT_NO_FATAL_FAILURE(ExpectFrontAgrees(queue, model));
    }
  }
}

TEST(DeadlineQueueTest, AgreesWithAnOrderedSetThroughRandomChanges) {
  for (uint32_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE(seed);
    AgreesWithAnOrderedSet(seed, /*items_count=*/400, /*steps=*/60'000);
  }
}

TEST(DeadlineQueueTest, KeepsEveryItemThroughTheRingsGrowth) {
  // 20000 deadlines 200 ms apart, inside the ring's span, added in random
  // order: the ring grows from its fewest buckets to its most on the way.
  constexpr int kItems = 20'000;
  const int64_t t = 1'700'000'000'000;
  std::vector<int> items(kItems);
  std::vector<int> order(kItems);
  for (int i = 0; i < kItems; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  Queue queue;
  for (int i : order) queue.Add(t + 200 * int64_t{i}, &items[i]);
  for (int i = 0; i < kItems; ++i) {
    ASSERT_EQ(queue.NextDeadline(), t + 200 * int64_t{i});
    ASSERT_EQ(queue.Front(), &items[i]);
    queue.Remove(t + 200 * int64_t{i}, &items[i]);
  }
  EXPECT_TRUE(queue.empty());
}

TEST(DeadlineQueueTest, AnEarlierDeadlineThanTheRingsFirstComesFirst) {
  Queue queue;
  int late = 0;
  int early = 0;
  const int64_t t = 1'700'000'000'000;
  queue.Add(t + 3'600'000, &late);
  queue.Add(t, &early);
  EXPECT_EQ(queue.NextDeadline(), t);
  EXPECT_EQ(queue.Front(), &early);
  queue.Remove(t, &early);
  EXPECT_EQ(queue.NextDeadline(), t + 3'600'000);
  EXPECT_EQ(queue.Front(), &late);
  queue.Remove(t + 3'600'000, &late);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.NextDeadline(), kNoDeadlineMs);
}

TEST(DeadlineQueueTest, AFullBucketsOverflowKeepsDeadlineOrder) {
  Queue queue;
  const int64_t t = 1'700'000'000'000;
  std::vector<int> items(3 * Queue::kSlotCapacity);
  // Latest first: the bucket fills with the later deadlines, the earlier
  // ones overflow.
  for (size_t i = items.size(); i-- > 0;) queue.Add(t + static_cast<int64_t>(i), &items[i]);
  for (size_t i = 0; i < items.size(); ++i) {
    ASSERT_EQ(queue.NextDeadline(), t + static_cast<int64_t>(i));
    ASSERT_EQ(queue.Front(), &items[i]);
    queue.Remove(t + static_cast<int64_t>(i), &items[i]);
  }
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace lapse

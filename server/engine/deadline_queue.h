// DeadlineQueue: items ordered by deadline, earliest first.
//
// Each engine shard keeps one, holding every collection that has a member
// with a deadline, keyed by that collection's earliest deadline. The Expirer
// asks for the front instead of polling: it sleeps exactly until
// NextDeadline(). Deadlines are Unix milliseconds.
//
// Most entries sit in a ring of buckets covering 2^kSpanBits ms (some 70
// minutes) from the earliest queued bucket: adding one appends it to its
// bucket, removing one finds it among its bucket's few entries, a touch of
// one or two cache lines where a b-tree insert or erase at a random place
// searches from the root. A bucket is unordered: the front is the least
// entry of the ring's first bucket or of the overflow, an ordered set that
// takes the entries beyond the ring's span or in a bucket already holding
// kSlotCapacity, so no bucket is searched past kSlotCapacity entries,
// whatever the deadlines' spread.
//
// Not thread-safe: the owning shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_
#define LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "server/base/deadline.h"

namespace lapse {

template <typename Item>
class DeadlineQueue {
 public:
  // The ring's span, 2^kSpanBits ms, is cut into 2^slot_bits_ buckets: from
  // 2^kMinSlotBits while the ring holds few entries, up to 2^kMaxSlotBits
  // (1-second buckets). It doubles when the ring holds more than
  // kGrowthLoad entries a bucket, so that its bucket pointers cost a few
  // bytes an entry at most. At most kSlotCapacity entries in a bucket.
  static constexpr int kSpanBits = 22;
  static constexpr int kMinSlotBits = 6;
  static constexpr int kMaxSlotBits = 12;
  static constexpr size_t kGrowthLoad = 2;
  static constexpr size_t kSlotCapacity = 32;

  // REQUIRES: `item` is not queued under `deadline_ms`.
  void Add(int64_t deadline_ms, Item* item) {
    assert(!Contains(deadline_ms, item) && "item already queued under this deadline");
    Place(Entry(deadline_ms, item));
    if (slot_bits_ < kMaxSlotBits && ring_size_ > (kGrowthLoad << slot_bits_)) Grow();
  }

  // REQUIRES: `item` is queued under `deadline_ms`.
  void Remove(int64_t deadline_ms, Item* item) {
    const int64_t bucket = BucketOf(deadline_ms);
    if (ring_size_ > 0 && bucket >= first_ && bucket <= last_) {
      Slot& slot = SlotOf(bucket);
      const size_t size = SizeOf(slot);
      for (size_t i = 1; i <= size; ++i) {
        if (slot[i].second != item || slot[i].first != deadline_ms) continue;
        slot[i] = slot[size];
        slot[0].first = static_cast<int64_t>(size - 1);
        --ring_size_;
        if (size - 1 >= 2 && ((size - 1) & (size - 2)) == 0) {
          // Down to a power of two: half the room, as a bucket's room is
          // CapacityFor(its size) (entries move out of a bucket as their
          // collections' earliest deadlines move, so rooms would stay large).
          Resize(slot, size - 1);
        }
        if (size == 1) {
          // An empty bucket keeps no memory: the ring's buckets are mostly
          // empty once their deadlines have passed.
          slot.reset();
          if (ring_size_ == 0 && slot_bits_ > kMinSlotBits) {
            slots_.reset();
            slot_bits_ = kMinSlotBits;
          } else if (bucket == first_ && ring_size_ > 0) {
            do {
              ++first_;
            } while (SlotOf(first_) == nullptr);
          }
        }
        return;
      }
    }
    [[maybe_unused]] const size_t removed = overflow_.erase({deadline_ms, item});
    assert(removed == 1 && "item not queued under this deadline");
  }

  // The earliest deadline, or kNoDeadlineMs when empty.
  int64_t NextDeadline() const {
    const Entry* front = FrontEntry();
    return front == nullptr ? kNoDeadlineMs : front->first;
  }
  // An item with the earliest deadline, or nullptr when empty.
  Item* Front() const {
    const Entry* front = FrontEntry();
    return front == nullptr ? nullptr : front->second;
  }
  bool empty() const { return ring_size_ == 0 && overflow_.empty(); }

 private:
  using Entry = std::pair<int64_t, Item*>;

  // A bucket: nullptr when empty, else its size in [0].first and its
  // entries in [1..size], with room for CapacityFor(size) of them: one
  // 8-byte pointer for each of the ring's buckets, one allocation for each
  // bucket in use.
  using Slot = std::unique_ptr<Entry[]>;

  int64_t slots() const { return int64_t{1} << slot_bits_; }
  // Floor division: deadlines before 1970 are negative.
  int64_t BucketOf(int64_t deadline_ms) const { return deadline_ms >> (kSpanBits - slot_bits_); }
  Slot& SlotOf(int64_t bucket) const { return slots_[bucket & (slots() - 1)]; }

  // Puts `e` in its bucket if the ring can take it there, else in the
  // overflow.
  void Place(const Entry& e) {
    const int64_t bucket = BucketOf(e.first);
    if (ring_size_ == 0) {
      first_ = bucket;
      last_ = bucket;
    } else if (bucket < first_ && last_ < bucket + slots()) {
      // Earlier than every bucket in the ring, and the ring's span can move
      // back to it without losing its latest bucket.
      first_ = bucket;
    }
    if (bucket >= first_ && bucket < first_ + slots()) {
      if (slots_ == nullptr) slots_ = std::make_unique<Slot[]>(slots());
      Slot& slot = SlotOf(bucket);
      const size_t size = SizeOf(slot);
      if (size < kSlotCapacity) {
        // Full at a power of two (2 at least): twice the room.
        if (size == 0 || (size >= 2 && (size & (size - 1)) == 0)) Resize(slot, size + 1);
        slot[1 + size] = e;
        slot[0].first = static_cast<int64_t>(size + 1);
        ++ring_size_;
        last_ = std::max(last_, bucket);
        return;
      }
    }
    overflow_.insert(e);
  }

  // Gives `slot` the room for `size` entries, CapacityFor(size), keeping
  // its entries (as many as fit).
  static void Resize(Slot& slot, size_t size) {
    Slot resized(new Entry[CapacityFor(size) + 1]);
    const size_t kept = std::min(SizeOf(slot), CapacityFor(size));
    if (kept > 0) std::copy(&slot[1], &slot[1] + kept, &resized[1]);
    resized[0].first = static_cast<int64_t>(kept);
    slot = std::move(resized);
  }

  // Doubles the ring's buckets, each half as wide, and places its entries
  // again: they fit, as the span is the same.
  void Grow() {
    std::vector<Entry> entries;
    entries.reserve(ring_size_);
    for (int64_t b = first_; b <= last_; ++b) {
      const Slot& slot = SlotOf(b);
      if (slot != nullptr) entries.insert(entries.end(), &slot[1], &slot[1] + SizeOf(slot));
    }
    ++slot_bits_;
    slots_ = std::make_unique<Slot[]>(slots());
    ring_size_ = 0;
    for (const Entry& e : entries) Place(e);
  }
  static size_t SizeOf(const Slot& slot) {
    return slot == nullptr ? 0 : static_cast<size_t>(slot[0].first);
  }
  // The room a bucket of `size` entries has: the power of two, 2 at least,
  // not below it.
  static size_t CapacityFor(size_t size) {
    size_t capacity = 2;
    while (capacity < size) capacity *= 2;
    return capacity;
  }

  const Entry* FrontEntry() const {
    const Entry* front = overflow_.empty() ? nullptr : &*overflow_.begin();
    if (ring_size_ > 0) {
      // The ring's first bucket is never empty while the ring holds entries.
      const Slot& slot = SlotOf(first_);
      for (size_t i = 1, size = SizeOf(slot); i <= size; ++i) {
        if (front == nullptr || slot[i].first < front->first) front = &slot[i];
      }
    }
    return front;
  }

  bool Contains(int64_t deadline_ms, Item* item) const {
    const int64_t bucket = BucketOf(deadline_ms);
    if (ring_size_ > 0 && bucket >= first_ && bucket <= last_) {
      const Slot& slot = SlotOf(bucket);
      for (size_t i = 1, size = SizeOf(slot); i <= size; ++i) {
        if (slot[i] == Entry(deadline_ms, item)) return true;
      }
    }
    return overflow_.contains({deadline_ms, item});
  }

  // The ring: bucket b's entries are in slots_[b % slots()]. While the ring
  // holds entries, they lie in buckets first_..last_, first_'s is not empty
  // and last_ < first_ + slots() (last_ may be later than the latest entry).
  std::unique_ptr<Slot[]> slots_;
  int slot_bits_ = kMinSlotBits;
  size_t ring_size_ = 0;
  int64_t first_ = 0;
  int64_t last_ = 0;
  // Entries outside the ring: beyond its span, or in a full bucket.
  absl::btree_set<Entry> overflow_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_

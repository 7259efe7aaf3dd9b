// DeadlineQueue: items ordered by deadline, earliest first.
//
// Each engine shard keeps one, holding every collection that has a member
// with a deadline, keyed by that collection's earliest deadline. The Expirer
// asks for the front instead of polling: it sleeps exactly until
// NextDeadline(). Deadlines are Unix milliseconds.
//
// Not thread-safe: the owning shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_
#define LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/container/btree_set.h"
#include "server/base/deadline.h"

namespace lapse {

template <typename Item>
class DeadlineQueue {
 public:
  // REQUIRES: `item` is not queued under `deadline_ms`.
  void Add(int64_t deadline_ms, Item* item) {
    [[maybe_unused]] const bool added = entries_.emplace(deadline_ms, item).second;
    assert(added && "item already queued under this deadline");
  }
  // REQUIRES: `item` is queued under `deadline_ms`.
  void Remove(int64_t deadline_ms, Item* item) {
    [[maybe_unused]] const size_t removed = entries_.erase({deadline_ms, item});
    assert(removed == 1 && "item not queued under this deadline");
  }

  // The earliest deadline, or kNoDeadlineMs when empty.
  int64_t NextDeadline() const {
    return entries_.empty() ? kNoDeadlineMs : entries_.begin()->first;
  }
  // The item with the earliest deadline, or nullptr when empty.
  Item* Front() const { return entries_.empty() ? nullptr : entries_.begin()->second; }
  bool empty() const { return entries_.empty(); }

 private:
  absl::btree_set<std::pair<int64_t, Item*>> entries_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_DEADLINE_QUEUE_H_

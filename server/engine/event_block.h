// EventBlock: expiry events stored compactly, for the path from the engine's
// drain to the EventFeed: one byte buffer holds every event's collection, key
// and value, and consecutive events of one collection share its name. A drain
// makes one block per ~1000 events instead of three heap strings per event,
// and the feed keeps the blocks as they are.
//
//   std::vector<lapse::EventBlock> blocks;
//   lapse::AddEvent(blocks, {.collection = "c", .key = "k", .value = "v",
//                            .expire_time = t, .expired_at = now});
//   feed.Append(std::move(blocks), ...);
//
// Not thread-safe.
#ifndef LAPSE_SERVER_ENGINE_EVENT_BLOCK_H_
#define LAPSE_SERVER_ENGINE_EVENT_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/expiry_event.h"

namespace lapse {

class EventBlock {
 public:
  // A block is full once it holds this many events or bytes (its last event
  // may pass the byte bound): what a block keeps alive after the feed's
  // retention dropped part of it stays small.
  static constexpr size_t kMaxEvents = 1024;
  static constexpr size_t kMaxBytes = size_t{64} << 10;

  EventBlock() = default;
  EventBlock(EventBlock&&) = default;
  EventBlock& operator=(EventBlock&&) = default;

  // Appends a copy of `e` (its sequence is the feed's to assign).
  void Add(const ExpiryEventView& e);
  // Reserves room for `events` events holding `bytes` bytes in all.
  void Reserve(size_t events, size_t bytes);
  // Gives back most of what a Reserve larger than the events needed took.
  void ShrinkToFit();
  // A copy of the first `n` events (n <= size()).
  EventBlock Prefix(size_t n) const;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  bool full() const { return entries_.size() >= kMaxEvents || bytes_.size() >= kMaxBytes; }
  // The i-th event; its views point into the block.
  ExpiryEventView operator[](size_t i) const;

 private:
  struct Entry {
    uint32_t collection_offset;
    uint32_t collection_size;
    // The value follows the key.
    uint32_t key_offset;
    uint32_t key_size;
    uint32_t value_size;
    absl::Time expire_time;
    absl::Time expired_at;
  };

  std::string bytes_;
  std::vector<Entry> entries_;
};

// Appends `e` to the last of `blocks`, or to a new one when that is full,
// sized for `expected` events like `e` (this one included; a hint).
void AddEvent(std::vector<EventBlock>& blocks, const ExpiryEventView& e, size_t expected = 1);

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EVENT_BLOCK_H_

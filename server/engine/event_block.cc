#include "server/engine/event_block.h"

#include <cassert>

namespace lapse {

void EventBlock::Add(const ExpiryEventView& e) {
  Entry entry;
  if (!entries_.empty()) {
    const Entry& last = entries_.back();
    if (absl::string_view(bytes_.data() + last.collection_offset, last.collection_size) ==
        e.collection) {
      entry.collection_offset = last.collection_offset;
    } else {
      entry.collection_offset = static_cast<uint32_t>(bytes_.size());
      bytes_.append(e.collection.data(), e.collection.size());
    }
  } else {
    if (bytes_.capacity() == 0) bytes_.reserve(256);
    entry.collection_offset = static_cast<uint32_t>(bytes_.size());
    bytes_.append(e.collection.data(), e.collection.size());
  }
  entry.collection_size = static_cast<uint32_t>(e.collection.size());
  entry.key_offset = static_cast<uint32_t>(bytes_.size());
  entry.key_size = static_cast<uint32_t>(e.key.size());
  entry.value_size = static_cast<uint32_t>(e.value.size());
  bytes_.append(e.key.data(), e.key.size());
  bytes_.append(e.value.data(), e.value.size());
  entry.expire_time = e.expire_time;
  entry.expired_at = e.expired_at;
  entries_.push_back(entry);
}

void EventBlock::PopBack() {
  assert(!entries_.empty());
  const Entry& last = entries_.back();
  // Its collection's name goes too unless the event before shares it.
  const bool shared = entries_.size() > 1 &&
                      entries_[entries_.size() - 2].collection_offset == last.collection_offset;
  bytes_.resize(shared ? last.key_offset : last.collection_offset);
  entries_.pop_back();
}

ExpiryEventView EventBlock::operator[](size_t i) const {
  const Entry& entry = entries_[i];
  const char* data = bytes_.data();
  return {.collection = absl::string_view(data + entry.collection_offset, entry.collection_size),
          .key = absl::string_view(data + entry.key_offset, entry.key_size),
          .value = absl::string_view(data + entry.key_offset + entry.key_size, entry.value_size),
          .expire_time = entry.expire_time,
          .expired_at = entry.expired_at};
}

void EventBlock::ReserveLike(const EventBlock& full) {
  entries_.reserve(full.entries_.size());
  bytes_.reserve(full.bytes_.size());
}

void AddEvent(std::vector<EventBlock>& blocks, const ExpiryEventView& e) {
  if (blocks.empty()) {
    blocks.emplace_back();
  } else if (blocks.back().full()) {
    // A drain: the next block will most likely fill up as the last did, so
    // it is allocated at that size once instead of grown (a glibc malloc of
    // a large size after many small frees consolidates the free lists).
    EventBlock next;
    next.ReserveLike(blocks.back());
    blocks.push_back(std::move(next));
  }
  blocks.back().Add(e);
}

}  // namespace lapse

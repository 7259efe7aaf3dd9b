#include "server/engine/event_block.h"

#include <algorithm>
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

EventBlock EventBlock::Prefix(size_t n) const {
  assert(n <= entries_.size());
  EventBlock prefix;
  const Entry* last = n == 0 ? nullptr : &entries_[n - 1];
  prefix.Reserve(n, last == nullptr ? 0 : last->key_offset + last->key_size + last->value_size);
  for (size_t i = 0; i < n; ++i) prefix.Add((*this)[i]);
  return prefix;
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

void EventBlock::Reserve(size_t events, size_t bytes) {
  entries_.reserve(events);
  bytes_.reserve(bytes);
}

void EventBlock::ShrinkToFit() {
  if (entries_.capacity() > 2 * entries_.size()) entries_.shrink_to_fit();
  if (bytes_.capacity() > 2 * bytes_.size()) bytes_.shrink_to_fit();
}

void AddEvent(std::vector<EventBlock>& blocks, const ExpiryEventView& e, size_t expected) {
  if (blocks.empty() || blocks.back().full()) {
    // Allocated once at the size expected instead of grown: growing a block
    // of 1000 events costs ~20 reallocations, and a glibc malloc of a large
    // size after many small frees (the expired members) consolidates its
    // free lists.
    const size_t events = std::min(std::max<size_t>(expected, 1), EventBlock::kMaxEvents);
    const size_t bytes = e.collection.size() + e.key.size() + e.value.size();
    blocks.emplace_back().Reserve(events, std::min(events * bytes, EventBlock::kMaxBytes));
  }
  blocks.back().Add(e);
}

}  // namespace lapse

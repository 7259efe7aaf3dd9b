// ExpiryEvent: what the engine records when a member's deadline passes.
#ifndef LAPSE_SERVER_ENGINE_EXPIRY_EVENT_H_
#define LAPSE_SERVER_ENGINE_EXPIRY_EVENT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse {

struct ExpiryEvent {
  // Assigned by EventFeed::Append; strictly increasing, never reused.
  uint64_t sequence = 0;
  std::string collection;
  std::string key;
  std::string value;
  // The deadline the member had.
  absl::Time expire_time;
  // When the engine expired it (>= expire_time).
  absl::Time expired_at;
};

// An expiry event whose strings live elsewhere (an EventBlock), without its
// sequence.
struct ExpiryEventView {
  absl::string_view collection;
  absl::string_view key;
  absl::string_view value;
  absl::Time expire_time;
  absl::Time expired_at;
};

inline ExpiryEventView ViewOf(const ExpiryEvent& e) {
  return {.collection = e.collection,
          .key = e.key,
          .value = e.value,
          .expire_time = e.expire_time,
          .expired_at = e.expired_at};
}

// What keeping `e` in memory costs: its strings plus the fixed part. The
// event feed counts its events so too, though an EventBlock holds one in less.
inline size_t MemoryFootprint(const ExpiryEvent& e) {
  return sizeof(ExpiryEvent) + e.collection.size() + e.key.size() + e.value.size();
}
inline size_t MemoryFootprint(const ExpiryEventView& e) {
  return sizeof(ExpiryEvent) + e.collection.size() + e.key.size() + e.value.size();
}

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EXPIRY_EVENT_H_

// EventSource: where watchers read expiry events from, by sequence.
//
// A reader owns nothing but its cursor, the sequence of the last event it
// examined; each Read continues right after it. Sequences are strictly
// increasing and never reused. OUT_OF_RANGE means exactly one of: an event
// after the position was discarded (naming the oldest retained sequence), the
// position belongs to another store, or it is beyond the newest event: never
// a silent gap. Reads never block: a store whose events live elsewhere serves
// them from a local buffer that it fills in the background.
//
// Positions leave the server as resume tokens (resume_token.h): the source
// turns its cursor into one and back, so that a store with several partitions
// can keep one sequence per partition in the token while its readers keep one
// local cursor.
//
//   absl::StatusOr<uint64_t> cursor = source.PositionOfToken(token);
//   absl::StatusOr<lapse::EventBatch> batch = source.Read(*cursor, filter, limits);
//   if (batch.ok()) send(batch->events, source.ResumeTokenAfter(batch->examined_sequence));
//   // Or without copying each event:
//   absl::StatusOr<uint64_t> examined = source.ReadEach(
//       *cursor, filter, limits, [&](uint64_t sequence, const ExpiryEventView& e) { ... });
//
// Implementations are thread-safe.
#ifndef LAPSE_SERVER_ENGINE_EVENT_SOURCE_H_
#define LAPSE_SERVER_ENGINE_EVENT_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/expiry_event.h"
#include "server/engine/resume_token.h"

namespace lapse {

// Which events a reader wants. With neither `collections` nor `prefix` set it
// matches every collection.
struct EventFilter {
  absl::flat_hash_set<std::string> collections;
  std::string prefix;
  bool include_values = false;

  bool Matches(absl::string_view collection) const;
};

// Bounds on one Read: how much it returns and how long it holds the lock.
struct ReadLimits {
  size_t max_events = 1000;
  size_t max_bytes = 1 << 20;
  // Events looked at (matching or not) before returning.
  size_t max_examined = 16384;
};

struct EventBatch {
  // Matching events, in sequence order.
  std::vector<ExpiryEvent> events;
  // Every event with a sequence <= this has been examined; the next Read
  // continues after it.
  uint64_t examined_sequence = 0;
};

// Given each event ReadEach would have Read returned, in sequence order: its
// views are valid only during the call, and its value is empty unless the
// filter includes values.
using EventVisitor = absl::FunctionRef<void(uint64_t sequence, const ExpiryEventView& event)>;

// Called with the newest readable sequence whenever new events become
// readable. Runs on the thread that made them readable (an expirer, a writer,
// the WAL's flusher): must be cheap and must not block.
using EventsReadableListener = std::function<void(uint64_t last_sequence)>;

class EventSource {
 public:
  virtual ~EventSource() = default;

  // The newest readable sequence.
  virtual uint64_t last_sequence() const = 0;
  // The oldest sequence still retained; last_sequence() + 1 when empty.
  virtual uint64_t oldest_retained_sequence() const = 0;

  // The identity of the store whose history this is; constant.
  virtual StoreId store_id() const = 0;

  // Checks that reading can start right after `after`. Sequence 0 means
  // "before this store's first event". Otherwise OUT_OF_RANGE, saying which:
  // an event after `after` is no longer retained (naming the oldest retained
  // sequence); `after` precedes this store's first sequence, so it is
  // another store's; or it is beyond the newest event.
  virtual absl::Status CheckPosition(uint64_t after) const = 0;

  // The token a reader resumes from once every event up to and including
  // `examined` has been examined.
  virtual std::string ResumeTokenAfter(uint64_t examined) const = 0;
  // The cursor that `token` stands for, checked as by CheckPosition.
  // INVALID_ARGUMENT when it is malformed or not of this kind of store;
  // OUT_OF_RANGE when it belongs to another store (naming both ids) or as in
  // CheckPosition.
  virtual absl::StatusOr<uint64_t> PositionOfToken(absl::string_view token) const = 0;

  // Events after `after` that match `filter`, within `limits`. OUT_OF_RANGE
  // as in CheckPosition.
  virtual absl::StatusOr<EventBatch> Read(uint64_t after, const EventFilter& filter,
                                          const ReadLimits& limits) const = 0;
  // The same events as Read, handed to `visit` one by one instead of copied
  // into a batch (a watch stream encodes them straight into its message);
  // returns the batch's examined_sequence. `visit` may run under the
  // source's lock: it must be quick and must not call into the source. This
  // default goes through Read; EventFeed hands out views of the events it
  // retains, without its lock.
  virtual absl::StatusOr<uint64_t> ReadEach(uint64_t after, const EventFilter& filter,
                                            const ReadLimits& limits, EventVisitor visit) const;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EVENT_SOURCE_H_

// EventFeed: the one bounded, shared, in-memory log of expiry events that every
// watcher reads through its own cursor (a sequence number).
//
// Events get consecutive sequences at Append. Retention is bounded by count
// and by bytes; the oldest events are dropped first. A reader owns nothing but
// its cursor, so a slow reader costs no memory and never slows Append. A
// cursor that has fallen out of retention is reported as OUT_OF_RANGE, naming
// the oldest retained sequence: never a silent gap.
//
//   lapse::EventFeed log({.first_sequence = 1, .max_events = 1000});
//   log.Append(std::move(events));
//   absl::StatusOr<lapse::EventBatch> batch = log.Read(cursor, filter, limits);
//
// All methods are thread-safe. Readers share the lock; Append takes it
// exclusively for a bounded time.
#ifndef LAPSE_SERVER_ENGINE_EVENT_FEED_H_
#define LAPSE_SERVER_ENGINE_EVENT_FEED_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/base/mutex.h"
#include "server/engine/event_source.h"
#include "server/engine/expiry_event.h"

namespace lapse {

class EventFeed final : public EventSource {
 public:
  struct Options {
    // Sequence of the first event ever appended. lapsed seeds it from the
    // wall clock (ns) so a restarted memory-only server never reuses one.
    uint64_t first_sequence = 1;
    size_t max_events = 1'000'000;
    size_t max_bytes = size_t{256} << 20;
    // When false, appended events stay invisible to readers until
    // MakeVisibleThrough: a durable store shows an event only once it is on
    // disk, so no reader ever sees an event a crash could take back.
    bool visible_on_append = true;
    // Told whenever new events become visible, outside the log's lock; may be
    // empty.
    EventsReadableListener on_readable;
    // Told of each event Append is given, before it is appended (its
    // sequence not yet assigned), on the appending thread, outside the log's
    // lock; must be cheap and must not call into the log. May be empty.
    std::function<void(const ExpiryEvent&)> on_append = nullptr;
  };

  // What the log holds now, visible or not.
  struct Retained {
    size_t events = 0;
    size_t bytes = 0;
  };

  explicit EventFeed(const Options& options);
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // Appends `events` in order, assigning consecutive sequences. Returns the
  // sequence of the last one.
  uint64_t Append(std::vector<ExpiryEvent> events);
  // The same, then, when there are events, runs `then(first, last)` with the
  // sequences assigned while the feed is still locked, so that whatever `then` records (the engine
  // commits the events' batch to its journal) is recorded in sequence order:
  // once the batch holding sequence S is durable, so is every event before S
  // (Wal::Options::on_durable relies on it). `then` must not call into the
  // feed.
  uint64_t Append(std::vector<ExpiryEvent> events,
                  absl::FunctionRef<void(uint64_t first, uint64_t last)> then);

  // Makes events up to `sequence` visible to readers (see
  // Options::visible_on_append).
  void MakeVisibleThrough(uint64_t sequence);

  // Drops the events not yet visible: they belong to changes that were
  // undone (Engine::RollBack). No reader has seen them and nothing durable
  // holds them, so the next events appended take their sequences again.
  void DropInvisible();

  // Replaces the contents of an empty, unused log with recovered events;
  // the next event appended gets `next_sequence`. Only the run of events
  // contiguous with next_sequence is kept.
  // REQUIRES: nothing appended yet; `events` sorted by sequence, without
  // duplicates.
  void Restore(std::vector<ExpiryEvent> events, uint64_t next_sequence);

  // EventSource. The newest visible sequence is first_sequence - 1 before any
  // event.
  uint64_t last_sequence() const override;
  uint64_t oldest_retained_sequence() const override;
  Retained retained() const;

  absl::Status CheckPosition(uint64_t after) const override;
  absl::StatusOr<EventBatch> Read(uint64_t after, const EventFilter& filter,
                                  const ReadLimits& limits) const override;

 private:
  absl::Status CheckPositionLocked(uint64_t after) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // State below is protected by mu_.
  mutable Mutex mu_;
  std::deque<ExpiryEvent> events_ ABSL_GUARDED_BY(mu_);
  // Sequence of events_.front() (or of the next event when empty).
  uint64_t front_sequence_ ABSL_GUARDED_BY(mu_);
  // Readers see events up to this sequence.
  uint64_t visible_sequence_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EVENT_FEED_H_

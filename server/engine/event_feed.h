// EventFeed: the one bounded, shared, in-memory log of expiry events that every
// watcher reads through its own cursor (a sequence number).
//
// Events get consecutive sequences at Append. Retention is bounded by count
// and by bytes; the oldest events are dropped first. A reader owns nothing but
// its cursor, so a slow reader costs no memory and never slows Append. A
// cursor that has fallen out of retention is reported as OUT_OF_RANGE, naming
// the oldest retained sequence: never a silent gap. The feed knows the first
// sequence of its store's history (Options::first_sequence), so a position
// before it is told apart from one whose events were discarded. It has one
// partition (0): resume tokens carry its store id and one sequence.
//
//   lapse::EventFeed log({.store_id = id, .first_sequence = 1, .max_events = 1000});
//   log.Append(std::move(events));
//   absl::StatusOr<lapse::EventBatch> batch = log.Read(cursor, filter, limits);
//
// All methods are thread-safe. Appending never waits for a reader's visit:
// a block is immutable once appended and shared (std::shared_ptr) between the
// feed and the readers holding it, so a reader takes the feed's lock only to
// find the next block (a binary search and a reference count), and reads and
// hands out its events without the lock. A block that retention dropped
// lives on until its last reader lets go of it.
#ifndef LAPSE_SERVER_ENGINE_EVENT_FEED_H_
#define LAPSE_SERVER_ENGINE_EVENT_FEED_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/base/mutex.h"
#include "server/engine/event_block.h"
#include "server/engine/event_source.h"
#include "server/engine/expiry_event.h"

namespace lapse {

class EventFeed final : public EventSource {
 public:
  struct Options {
    // The identity of the store whose history this is.
    StoreId store_id;
    // Sequence of the store's first event ever, kept across Restore: positions
    // from 1 to first_sequence - 2 are another store's, and "after 0" reads
    // from here while nothing has been discarded. lapsed seeds it from the
    // wall clock (ns) so a restarted memory-only server never reuses one, and
    // a data directory records it when it is initialised.
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
    std::function<void(const ExpiryEventView&)> on_append = nullptr;
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

  // When Append tells Options::on_readable of the events it made visible.
  enum class Notify {
    kNow,
    // Not at all: the caller calls NotifyReadable() once it has appended
    // what it has to, so that a burst of appends wakes readers once and the
    // appending thread is not preempted by them half-way (the Expirer's pass).
    kLater,
  };
  uint64_t Append(std::vector<ExpiryEvent> events,
                  absl::FunctionRef<void(uint64_t first, uint64_t last)> then, Notify notify);
  // The same for events in blocks (the engine's drain), which the feed keeps
  // as they are.
  uint64_t Append(std::vector<EventBlock> blocks,
                  absl::FunctionRef<void(uint64_t first, uint64_t last)> then, Notify notify);
  // Tells Options::on_readable of the newest visible sequence, for appends
  // made with Notify::kLater. Does nothing when events become visible only
  // through MakeVisibleThrough (which tells it itself).
  void NotifyReadable();

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

  StoreId store_id() const override;
  absl::Status CheckPosition(uint64_t after) const override;
  std::string ResumeTokenAfter(uint64_t examined) const override;
  absl::StatusOr<uint64_t> PositionOfToken(absl::string_view token) const override;
  absl::StatusOr<EventBatch> Read(uint64_t after, const EventFilter& filter,
                                  const ReadLimits& limits) const override;
  // Hands `visit` views into the retained blocks, without the feed's lock:
  // `visit` may call into the feed. A read that retention overtook (the
  // next block it needs was dropped while it visited) stops there; the next
  // read from its examined sequence is OUT_OF_RANGE.
  absl::StatusOr<uint64_t> ReadEach(uint64_t after, const EventFilter& filter,
                                    const ReadLimits& limits, EventVisitor visit) const override;

 private:
  // Options::first_sequence, 0 read as 1: "after the sequence before the
  // first" must stay representable.
  uint64_t first_sequence() const {
    return options_.first_sequence == 0 ? 1 : options_.first_sequence;
  }
  // OK, or OUT_OF_RANGE as CheckPosition says; on OK `*from` is where a
  // read continues after (`after`, or the sequence before the first for 0).
  absl::Status CheckPositionLocked(uint64_t after, uint64_t* from) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  struct StoredBlock {
    // The sequence of events[0]; set by PushLocked, before any reader can
    // see the block.
    uint64_t first_sequence = 0;
    EventBlock events;
  };
  using BlockPtr = std::shared_ptr<const StoredBlock>;
  // Blocks made ready to append outside the lock: non-empty, shrunk,
  // allocated, their footprint summed.
  struct Prepared {
    std::vector<std::shared_ptr<StoredBlock>> blocks;
    size_t events = 0;
    size_t bytes = 0;
  };
  Prepared Prepare(std::vector<EventBlock> blocks) const;

  // Drops the oldest visible events while retention is exceeded; blocks
  // dropped whole go to `dropped`, for the caller to release outside the
  // lock.
  void TrimLocked(std::vector<BlockPtr>* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `prepared` to the end of blocks_, numbering its events from the
  // next sequence.
  void PushLocked(Prepared prepared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets visible_sequence_ and publishes it for NotifyReadable.
  void SetVisibleLocked(uint64_t sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The retained block holding `sequence`.
  // REQUIRES: front_sequence_ <= sequence < front_sequence_ + count_.
  BlockPtr BlockHoldingLocked(uint64_t sequence) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // State below is protected by mu_.
  mutable Mutex mu_;
  // The retained events: those of blocks_ from the front block's
  // front_index_ on. Each block is dropped once retention dropped all its
  // events, so what retention dropped and memory still holds is less than
  // one block (EventBlock's bounds), plus the blocks readers still hold.
  std::deque<BlockPtr> blocks_ ABSL_GUARDED_BY(mu_);
  size_t front_index_ ABSL_GUARDED_BY(mu_) = 0;
  // How many events are retained.
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  // Sequence of the oldest retained event (or of the next event when empty).
  uint64_t front_sequence_ ABSL_GUARDED_BY(mu_);
  // Readers see events up to this sequence.
  uint64_t visible_sequence_ ABSL_GUARDED_BY(mu_);
  // visible_sequence_, for NotifyReadable to read without mu_.
  std::atomic<uint64_t> published_visible_;
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EVENT_FEED_H_

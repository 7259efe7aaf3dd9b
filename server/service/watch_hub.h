// WatchHub: delivers expiry events to the live WatchExpirations streams, and
// bounds what they cost.
//
// The hub keeps the set of live WatchReactors and one dispatcher thread; there
// is no thread per stream. The store tells it when events become readable
// (OnReadable, the listener the wiring gives the store), which only publishes
// the new last sequence in an atomic and wakes the dispatcher through a
// Wakeup, taking no lock (it runs on the expirer's, a writer's or the WAL's
// thread and must never wait for a gRPC thread holding the hub's lock). The dispatcher then wakes
// every reactor, each of which reads from the log through its own cursor, and it sends heartbeats:
// a stream idle for the heartbeat interval gets an empty batch carrying its examined_sequence.
// Heartbeats follow the wall clock, not the injected Clock: they keep connections alive, they do
// not decide deadlines.
//
// Bounds (Options): at most `max_streams` live streams (more are refused with
// RESOURCE_EXHAUSTED); at most `max_pinned_bytes` of batches written and not
// yet completed across all streams: a stream whose next batch does not fit
// gives it back unsent (its cursor stays put) and waits, first come first
// served, until completed writes make room; and a stream whose write has not
// completed for `stall_timeout` (its client stopped reading) is cancelled,
// giving back its bytes and its slot. Heartbeats are not counted against the
// bytes: they carry no events.
//
// Memory: glibc keeps what batches and closed streams freed for reuse rather
// than returning it to the system (3000 streams sent one 1000-event batch each
// left lapsed 70 MiB larger after they closed). Once 32 MiB of batches and
// streams (counted at 16 KiB each) have been freed and no batch is in flight,
// the dispatcher returns free memory with malloc_trim, at most once every 5
// seconds.
//
//   lapse::WatchHub hub({.heartbeat_interval = absl::Seconds(30)});
//   ... open the store with [&hub](uint64_t last) { hub.OnReadable(last); }
//   new lapse::WatchReactor(&hub, context, &store->events(), std::move(filter), after);
//   ...
//   hub.Shutdown();  // ends every stream with UNAVAILABLE
//
// Reactors are reference-counted (see WatchReactor): the hub takes a
// reference under its lock before calling a reactor outside it, so a reactor
// is never deleted while the hub is using it. Lock order: a reactor's mutex,
// then the hub's; the hub never calls a reactor with its own mutex held.
//
// Thread-safe. The hub must outlive every reactor registered with it
// (grpc::Server::Shutdown waits for them), and the store must stop calling
// OnReadable before the hub is destroyed.
#ifndef LAPSE_SERVER_SERVICE_WATCH_HUB_H_
#define LAPSE_SERVER_SERVICE_WATCH_HUB_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"
#include "server/base/thread_priority.h"
#include "server/base/wakeup.h"
#include "server/engine/event_source.h"

namespace lapse {

class WatchReactor;

class WatchHub {
 public:
  struct Options {
    // A stream that has sent nothing for this long gets a heartbeat.
    absl::Duration heartbeat_interval = absl::Seconds(30);
    // Bounds on each batch a stream sends.
    ReadLimits read_limits;
    // Live streams across the server.
    size_t max_streams = 10000;
    // Serialized bytes of the batches whose writes have not completed, across
    // all streams. A batch is let through when nothing else is pinned, however
    // large it is, so every stream can make progress.
    size_t max_pinned_bytes = size_t{64} << 20;
    // A stream whose write has not completed for this long is cancelled.
    absl::Duration stall_timeout = absl::Seconds(60);
    // Asked for by the dispatcher thread: events reach the streams no sooner
    // than it runs once told of them (server/base/thread_priority.h).
    ThreadPriority dispatcher_priority = ThreadPriority::kNormal;
  };

  // What the hub holds right now.
  struct Stats {
    size_t streams = 0;
    size_t pinned_bytes = 0;
    // Streams waiting for pinned bytes to be given back.
    size_t waiting_streams = 0;
    // Streams cancelled so far because a write of theirs stalled.
    size_t stalls = 0;
    // Times free memory was returned to the system.
    size_t trims = 0;
  };

  // Starts the dispatcher thread; returns once it has asked for
  // Options::dispatcher_priority.
  explicit WatchHub(const Options& options);
  // Shuts down if Shutdown() was not called.
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  const Options& options() const { return options_; }
  // What the dispatcher thread got of Options::dispatcher_priority.
  const AppliedPriority& dispatcher_priority() const { return dispatcher_priority_; }

  // Adds a live stream. UNAVAILABLE once shutdown has begun, RESOURCE_EXHAUSTED
  // when max_streams are live: the reactor must then finish itself with that
  // status, since the hub will never call it.
  absl::Status Register(WatchReactor* reactor);
  // Removes a stream (and any wait of its); called from the reactor's OnDone.
  void Unregister(WatchReactor* reactor);

  // Pins `bytes` for `reactor`'s next write. False when they do not fit (or
  // streams that asked earlier still wait): `reactor` then waits in line and
  // the dispatcher polls it again once completed writes have made room.
  bool Pin(WatchReactor* reactor, size_t bytes);
  // Gives back bytes pinned by Pin.
  void Unpin(size_t bytes);
  // Takes `reactor` out of the line of those waiting to Pin.
  void StopWaiting(WatchReactor* reactor);
  // A stream is being cancelled because its write stalled.
  void CountStall();

  // New events up to `last_sequence` are readable. Cheap, never blocks.
  void OnReadable(uint64_t last_sequence);

  // Ends every registered stream with UNAVAILABLE ("server shutting down;
  // last delivered sequence N"), refuses new ones and stops the dispatcher.
  // Idempotent.
  void Shutdown();

  Stats stats();
  // Waits (at most `timeout`) until `done(stats())`; its last value.
  bool AwaitStatsForTesting(const std::function<bool(const Stats&)>& done, absl::Duration timeout);

 private:
  // The dispatcher thread.
  void Run();
  // Referenced copies of the registered reactors; the caller must Unref each.
  std::vector<WatchReactor*> SnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Referenced copies of the waiting reactors, first in line first.
  std::vector<WatchReactor*> WaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Stats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Enough freed memory to return, and no batch in flight.
  bool TrimDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `bytes` freed by streams, waking the dispatcher if that makes a
  // trim due.
  void FreedLocked(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // State below is protected by mu_. lapse::Mutex, not absl::Mutex, so that
  // ThreadSanitizer sees Shutdown() hand the reactors over.
  Mutex mu_;
  // Wakes the dispatcher; not guarded (OnReadable takes no lock).
  Wakeup wakeup_;
  // Wakes AwaitStatsForTesting.
  CondVar stats_changed_;
  absl::flat_hash_set<WatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  // Streams waiting for pinned bytes, first in line first.
  std::deque<WatchReactor*> waiting_ ABSL_GUARDED_BY(mu_);
  size_t pinned_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t stalls_ ABSL_GUARDED_BY(mu_) = 0;
  // Memory freed by streams since the last trim, and when the next may be.
  size_t freed_since_trim_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_trim_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  size_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes were unpinned while streams wait: the dispatcher should poll them.
  bool room_made_ ABSL_GUARDED_BY(mu_) = false;
  // The newest sequence appended (published by OnReadable without mu_), and
  // the newest the reactors were woken for.
  std::atomic<uint64_t> appended_sequence_{0};
  uint64_t dispatched_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // When the dispatcher next has to look for streams due a heartbeat.
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  // Set by the dispatcher before the constructor returns.
  AppliedPriority dispatcher_priority_;
  std::thread dispatcher_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_WATCH_HUB_H_

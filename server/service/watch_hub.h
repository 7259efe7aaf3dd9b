// WatchHub: delivers expiry events to the live WatchExpirations streams.
//
// The hub keeps the set of live WatchReactors and one dispatcher thread; there
// is no thread per stream. The store tells it when events become readable
// (OnReadable, the listener the wiring gives the store), which only records
// the new last sequence and signals the dispatcher (it runs on the expirer's,
// a writer's or the WAL's thread and must never block). The dispatcher then wakes every reactor,
// each of which reads from the log through its own cursor, and it sends heartbeats: a stream idle
// for the heartbeat interval gets an empty batch carrying its examined_sequence. Heartbeats follow
// the wall clock, not the injected Clock: they keep connections alive, they do not decide
// deadlines.
//
//   lapse::WatchHub hub({.heartbeat_interval = absl::Seconds(30)});
//   ... open the store with [&hub](uint64_t last) { hub.OnReadable(last); }
//   new lapse::WatchReactor(&hub, &store->events(), std::move(filter), after);
//   ...
//   hub.Shutdown();  // ends every stream with UNAVAILABLE
//
// Reactors are reference-counted (see WatchReactor): the hub takes a
// reference under its lock before calling a reactor outside it, so a reactor
// is never deleted while the hub is using it.
//
// Thread-safe. The hub must outlive every reactor registered with it
// (grpc::Server::Shutdown waits for them), and the store must stop calling
// OnReadable before the hub is destroyed.
#ifndef LAPSE_SERVER_SERVICE_WATCH_HUB_H_
#define LAPSE_SERVER_SERVICE_WATCH_HUB_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"
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
  };

  // Starts the dispatcher thread.
  explicit WatchHub(const Options& options);
  // Shuts down if Shutdown() was not called.
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  const Options& options() const { return options_; }

  // Adds a live stream. Returns false once shutdown has begun: the reactor
  // must then finish itself, since the hub will never call it.
  bool Register(WatchReactor* reactor);
  // Removes a stream; called from the reactor's OnDone.
  void Unregister(WatchReactor* reactor);

  // New events up to `last_sequence` are readable. Cheap, never blocks.
  void OnReadable(uint64_t last_sequence);

  // Ends every registered stream with UNAVAILABLE ("server shutting down;
  // last delivered sequence N"), refuses new ones and stops the dispatcher.
  // Idempotent.
  void Shutdown();

 private:
  // The dispatcher thread.
  void Run();
  // Referenced copies of the registered reactors; the caller must Unref each.
  std::vector<WatchReactor*> SnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // State below is protected by mu_. lapse::Mutex, not absl::Mutex, so that
  // ThreadSanitizer sees Shutdown() hand the reactors over.
  Mutex mu_;
  CondVar cv_;
  absl::flat_hash_set<WatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  // The newest sequence appended, and the newest the reactors were woken for.
  uint64_t appended_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dispatched_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // When the dispatcher next has to look for streams due a heartbeat.
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  std::thread dispatcher_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_WATCH_HUB_H_

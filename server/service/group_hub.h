// GroupHub: wakes the long polls (Poll with a `wait`) and the Consume streams
// waiting for a consumer group to become readable, and bounds how many there
// are.
//
// The hub keeps every waiter with the group it waits on and one dispatcher
// thread; there is no thread per waiter. The store tells it when a group may
// deliver something: OnGroupReadable (EmbeddedStore::Options::
// on_group_readable: a lease expired or was released, a dead letter was
// re-driven, a consumer acked, the group was reset or deleted) for one group,
// OnEventsReadable (new events in the feed, which may match any group's
// filter) for all. Both only record what changed and wake the dispatcher:
// they run on store threads (the expirers, the WAL's flusher, a gRPC thread
// inside a store operation) and must never block nor call back into the
// store. OnEventsReadable, called by the expirer on every pass, takes no lock
// at all (an atomic flag and a Wakeup), so it never waits for a gRPC thread
// registering or unregistering a waiter. The dispatcher then calls each waiter of a readable group,
// outside the hub's lock, and each waiter asks the store itself. It also calls every waiter at the
// time the waiter last asked for (the end of a poll's wait, a stream's next heartbeat). Those times
// follow the wall clock, as the WatchHub's heartbeats do; leases follow the store's Clock.
//
// Bounds: at most `max_waiting_polls` long polls and `max_consume_streams`
// Consume streams at once; past them Register is RESOURCE_EXHAUSTED naming
// the flag.
//
//   lapse::GroupHub hub({.max_waiting_polls = 10000});
//   ... store options: on_group_readable = [&hub](absl::string_view g) { hub.OnGroupReadable(g); }
//   absl::Status s = hub.Register(waiter, "billing", GroupHub::Kind::kPoll, deadline);
//   ...
//   hub.Shutdown();  // every waiter's Shutdown(): polls answer, streams end
//
// Waiters are reference-counted (GroupWaiter): the hub takes a reference under
// its lock before calling a waiter outside it, so a waiter is never deleted
// while the hub uses it. Lock order: a waiter's mutex, then the hub's; the hub
// never calls a waiter with its own mutex held.
//
// Thread-safe. The hub must outlive every waiter registered with it
// (grpc::Server::Shutdown waits for them), and the store must stop calling it
// before it is destroyed.
#ifndef LAPSE_SERVER_SERVICE_GROUP_HUB_H_
#define LAPSE_SERVER_SERVICE_GROUP_HUB_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/base/wakeup.h"

namespace lapse {

// What waits on a group: a long poll or a Consume stream. Reference-counted:
// one reference is its creator's (gRPC's, until OnDone), plus one per hub call
// in progress; the last Unref deletes it.
class GroupWaiter {
 public:
  GroupWaiter() = default;
  GroupWaiter(const GroupWaiter&) = delete;
  GroupWaiter& operator=(const GroupWaiter&) = delete;

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Called by the hub's dispatcher, never under the hub's lock: the group may
  // be readable (`readable`), or the time the waiter asked for has come.
  // Returns when it next wants to be called regardless; InfiniteFuture for
  // never.
  virtual absl::Time Wake(bool readable, absl::Time now) = 0;
  // The server is shutting down: a poll answers with what is deliverable, a
  // stream ends UNAVAILABLE once its answers are written.
  virtual void Shutdown() = 0;

 protected:
  virtual ~GroupWaiter() = default;

 private:
  std::atomic<int> refs_{1};
};

class GroupHub {
 public:
  struct Options {
    // Long polls waiting at once (--max_waiting_polls).
    size_t max_waiting_polls = 10000;
    // Consume streams open at once (--max_consume_streams).
    size_t max_consume_streams = 10000;
    // A Consume stream that has sent nothing for this long gets a heartbeat.
    absl::Duration heartbeat_interval = absl::Seconds(30);
    // The store's clock, which lease deadlines follow. Not owned.
    Clock* clock = RealClock();
  };

  enum class Kind { kPoll, kStream };

  struct Stats {
    size_t waiting_polls = 0;
    size_t consume_streams = 0;
  };

  // Starts the dispatcher thread.
  explicit GroupHub(const Options& options);
  // Shuts down if Shutdown() was not called.
  ~GroupHub();
  GroupHub(const GroupHub&) = delete;
  GroupHub& operator=(const GroupHub&) = delete;

  const Options& options() const { return options_; }

  // Adds `waiter` on `group`, to be woken at `due` at the latest.
  // UNAVAILABLE once shutdown has begun, RESOURCE_EXHAUSTED past the bound of
  // its kind: the hub will then never call it.
  absl::Status Register(GroupWaiter* waiter, absl::string_view group, Kind kind, absl::Time due);
  // Removes `waiter`; called before its creator's last Unref.
  void Unregister(GroupWaiter* waiter);

  // `group` may deliver something other than new events. Cheap, never blocks.
  void OnGroupReadable(absl::string_view group);
  // New events are readable: every group may deliver. Cheap, never blocks.
  void OnEventsReadable();

  // Calls every registered waiter's Shutdown(), refuses new ones and stops
  // the dispatcher. Idempotent.
  void Shutdown();

  Stats stats();
  // Waits (at most `timeout`) until `done(stats())`; its last value.
  bool AwaitStatsForTesting(const std::function<bool(const Stats&)>& done, absl::Duration timeout);

 private:
  struct Entry {
    std::string group;
    Kind kind;
    absl::Time due;
  };

  void Run();
  Stats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // State below is protected by mu_.
  Mutex mu_;
  // Wakes the dispatcher; not guarded (OnEventsReadable takes no lock).
  Wakeup wakeup_;
  // Wakes AwaitStatsForTesting.
  CondVar stats_changed_;
  absl::flat_hash_map<GroupWaiter*, Entry> waiters_ ABSL_GUARDED_BY(mu_);
  size_t polls_ ABSL_GUARDED_BY(mu_) = 0;
  size_t streams_ ABSL_GUARDED_BY(mu_) = 0;
  // Groups announced readable since the dispatcher last looked.
  absl::flat_hash_set<std::string> readable_ ABSL_GUARDED_BY(mu_);
  // New events came since the dispatcher last looked: every group is
  // readable. Set by OnEventsReadable without mu_.
  std::atomic<bool> events_readable_{false};
  // How many waiters are registered, for OnEventsReadable to read without
  // mu_: with none it sets events_readable_ without waking the dispatcher,
  // and Register wakes it instead.
  std::atomic<size_t> waiter_count_{0};
  // The earliest due time of a waiter (may be early: the dispatcher then
  // finds nothing due and computes it again).
  absl::Time next_due_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  std::thread dispatcher_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_GROUP_HUB_H_

// Expirer: the deadline-queue thread. It sleeps until the engine's earliest
// deadline (no polling tick), expires what is due, and sleeps again. A write
// that brings the earliest deadline forward wakes it early, through an
// ExpirerWakeup that the engine is built with. The same thread can drive any
// other work due at deadlines (ExpiryWork), e.g. the leases of
// ConsumerGroups. While the engine's journal
// refuses changes (Engine::Writable), nothing can expire and the thread
// sleeps until woken: whoever learns that writes resume calls Wake().
//
//   lapse::ExpirerWakeup wakeup;
//   lapse::Engine engine({.earlier_deadline_listener = wakeup.Listener()},
//                        lapse::RealClock(), &log);
//   lapse::Expirer expirer(&engine, lapse::RealClock(), &wakeup);  // thread runs
//   ...                                                             // until destroyed
//
// The thread can be given a ThreadPriority (server/base/thread_priority.h):
// an expiry is as late as the pass that makes it, and a pass is as late as
// the kernel lets the thread run once its sleep ends.
//
// Thread-safe. With a FakeClock the thread cannot see time move by itself:
// call Wake() after Advance().
#ifndef LAPSE_SERVER_ENGINE_EXPIRER_H_
#define LAPSE_SERVER_ENGINE_EXPIRER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/base/thread_priority.h"
#include "server/engine/engine.h"

namespace lapse {

// Where the Expirer's thread sleeps, and how the engine wakes it. It exists
// before the engine (whose options take its Listener()) and the Expirer, and
// outlives both. Serves one Expirer at a time. Thread-safe.
class ExpirerWakeup {
 public:
  ExpirerWakeup() = default;
  ExpirerWakeup(const ExpirerWakeup&) = delete;
  ExpirerWakeup& operator=(const ExpirerWakeup&) = delete;

  // For Engine::Options::earlier_deadline_listener: wakes the sleeper when a
  // deadline is earlier than the one it sleeps towards. Cheap; the engine
  // calls it under a shard lock.
  std::function<void(absl::Time)> Listener();

  // Makes the sleeper look at the clock and the engine again now.
  void Wake();

 private:
  friend class Expirer;

  // The Expirer's side. REQUIRES: no other Expirer started and not stopped.
  void Start();
  // Begins a pass over the engine: until the next SleepUntil, any deadline
  // notified counts as earlier than the one the sleeper will sleep towards,
  // so none is missed. False once stopped.
  bool BeginPass();
  // Sleeps towards `deadline`, measured on `clock`, unless woken since
  // BeginPass or stopped. May return early.
  void SleepUntil(absl::Time deadline, const Clock& clock);
  // Ends the current and every later sleep.
  void Stop();

  void OnEarlierDeadline(absl::Time deadline);

  Mutex mu_;
  CondVar cv_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // The deadline the sleeper is sleeping towards.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// What an Expirer's thread does on each pass: `expire_due` handles what is
// due at the clock's now, then the thread sleeps towards `next_deadline()`
// (absl::InfiniteFuture() to sleep until woken).
struct ExpiryWork {
  std::function<void()> expire_due;
  std::function<absl::Time()> next_deadline;
};

class Expirer {
 public:
  // Starts the thread, which asks for `priority` before its first pass; returns
  // once it has. `engine` must have been built with `wakeup->Listener()` as
  // its earlier-deadline listener; `engine`, `clock` and `wakeup` must
  // outlive the Expirer.
  Expirer(Engine* engine, Clock* clock, ExpirerWakeup* wakeup,
          ThreadPriority priority = ThreadPriority::kNormal);
  // The same for other work, whose deadlines `wakeup->Listener()` hears of.
  Expirer(ExpiryWork work, Clock* clock, ExpirerWakeup* wakeup,
          ThreadPriority priority = ThreadPriority::kNormal);
  // Stops and joins the thread.
  ~Expirer();
  Expirer(const Expirer&) = delete;
  Expirer& operator=(const Expirer&) = delete;

  // Makes the thread look at the clock and the queue again now.
  void Wake() { wakeup_->Wake(); }

  // What the thread got of the priority it asked for.
  const AppliedPriority& priority() const { return priority_; }

 private:
  void Run();

  // Constant after construction.
  const ExpiryWork work_;
  Clock* const clock_;
  ExpirerWakeup* const wakeup_;
  // Set by the thread before the constructor returns.
  AppliedPriority priority_;
  std::thread thread_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EXPIRER_H_

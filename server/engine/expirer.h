// Expirer: the deadline-queue thread. It sleeps until the engine's earliest
// deadline (no polling tick), expires what is due, and sleeps again. A write
// that brings the earliest deadline forward wakes it early.
//
//   lapse::Expirer expirer(&engine, lapse::RealClock());  // thread runs
//   ...                                                    // until destroyed
//
// Thread-safe. With a FakeClock the thread cannot see time move by itself:
// call Wake() after Advance().
#ifndef LAPSE_SERVER_ENGINE_EXPIRER_H_
#define LAPSE_SERVER_ENGINE_EXPIRER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "server/base/mutex.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/engine/engine.h"

namespace lapse {

class Expirer {
 public:
  // Starts the thread. Installs the engine's earlier-deadline listener.
  // `engine` and `clock` must outlive the Expirer.
  Expirer(Engine* engine, Clock* clock);
  // Stops and joins the thread.
  ~Expirer();
  Expirer(const Expirer&) = delete;
  Expirer& operator=(const Expirer&) = delete;

  // Makes the thread look at the clock and the queue again now.
  void Wake();

 private:
  void Run();

  // Constant after construction.
  Engine* const engine_;
  Clock* const clock_;

  // State below is protected by mu_.
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // The deadline the thread is sleeping towards.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  std::thread thread_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EXPIRER_H_

// StoppableThread: a thread running a loop until it is asked to stop, for the
// load generators' background loops (progress lines, the Redis poller and
// subscriber). The loop checks stopping() or sleeps in WaitForStop, which
// returns early when Stop is called.
//
//   lapse::load::StoppableThread worker;
//   worker.Start([&worker] {
//     absl::Time next = absl::Now();
//     while (!worker.WaitForStop(next += absl::Seconds(1))) Tick();
//   });
//   ...
//   worker.Stop();  // joins
//
// Start and Stop are called from one thread (the owner's); stopping() and
// WaitForStop from the loop. Destroying it stops it.
#ifndef LAPSE_BENCH_COMMON_STOPPABLE_THREAD_H_
#define LAPSE_BENCH_COMMON_STOPPABLE_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lapse {
namespace load {

class StoppableThread {
 public:
  StoppableThread() = default;
  ~StoppableThread() { Stop(); }
  StoppableThread(const StoppableThread&) = delete;
  StoppableThread& operator=(const StoppableThread&) = delete;

  // Runs `loop` on a new thread; after a Stop, runs it again.
  void Start(std::function<void()> loop);
  // Asks the loop to stop and waits for its thread to end. Idempotent.
  void Stop();

  // Whether Stop has been called since Start.
  bool stopping() const;
  // Sleeps until `deadline` unless Stop is called first; returns whether it
  // was.
  bool WaitForStop(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_STOPPABLE_THREAD_H_

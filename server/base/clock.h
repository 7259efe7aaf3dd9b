// Clock: where the engine and the expirer get the time from.
//
// Production code uses `RealClock()`; tests inject a `FakeClock` so that
// deadlines pass exactly when the test says, and never sleep.
//
//   lapse::FakeClock clock(absl::FromUnixSeconds(1000));
//   lapse::Engine engine(options, &clock, &log);
//   clock.Advance(absl::Seconds(30));
//   engine.ExpireDue();
//
// Both implementations are safe for concurrent use.
#ifndef LAPSE_SERVER_BASE_CLOCK_H_
#define LAPSE_SERVER_BASE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The system's wall clock. A process-wide singleton; never deleted.
Clock* RealClock();

// A clock that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start) : now_(start) {}
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  absl::Time Now() const override;
  void Advance(absl::Duration d);
  void Set(absl::Time t);

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_CLOCK_H_

#include "server/base/clock.h"

#include "absl/time/clock.h"

namespace lapse {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new SystemClock();
  return clock;
}

absl::Time FakeClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::Set(absl::Time t) {
  MutexLock lock(&mu_);
  now_ = t;
}

}  // namespace lapse

#include "server/engine/expirer.h"

namespace lapse {

Expirer::Expirer(Engine* engine, Clock* clock) : engine_(engine), clock_(clock) {
  engine_->SetEarlierDeadlineListener([this](absl::Time deadline) {
    MutexLock lock(&mu_);
    if (deadline < sleeping_until_) {
      woken_ = true;
      cv_.Signal();
    }
  });
  thread_ = std::thread([this] { Run(); });
}

Expirer::~Expirer() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.Signal();
  }
  thread_.join();
  engine_->SetEarlierDeadlineListener(nullptr);
}

void Expirer::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.Signal();
}

void Expirer::Run() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      // From here until the thread sleeps, any new deadline counts as earlier
      // than the one it will sleep towards, so none is missed.
      sleeping_until_ = absl::InfiniteFuture();
      woken_ = false;
    }
    engine_->ExpireDue();
    const absl::Time next = engine_->NextDeadline();
    MutexLock lock(&mu_);
    if (stopping_) return;
    if (woken_) continue;
    sleeping_until_ = next;
    // The clock may be fake, so the wait is measured on it: sleep (in real
    // time) for as long as the clock says remains, then look again.
    const absl::Duration remaining = next - clock_->Now();
    if (remaining > absl::ZeroDuration() && !woken_ && !stopping_) {
      cv_.WaitWithTimeout(&mu_, remaining);
    }
  }
}

}  // namespace lapse

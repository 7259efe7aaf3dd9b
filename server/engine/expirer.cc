#include "server/engine/expirer.h"

#include <cassert>

namespace lapse {

std::function<void(absl::Time)> ExpirerWakeup::Listener() {
  return [this](absl::Time deadline) { OnEarlierDeadline(deadline); };
}

void ExpirerWakeup::OnEarlierDeadline(absl::Time deadline) {
  MutexLock lock(&mu_);
  if (deadline < sleeping_until_) {
    woken_ = true;
    cv_.Signal();
  }
}

void ExpirerWakeup::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.Signal();
}

void ExpirerWakeup::Start() {
  MutexLock lock(&mu_);
  assert(!started_ && "an ExpirerWakeup serves one Expirer at a time");
  started_ = true;
  stopping_ = false;
}

bool ExpirerWakeup::BeginPass() {
  MutexLock lock(&mu_);
  if (stopping_) return false;
  sleeping_until_ = absl::InfiniteFuture();
  woken_ = false;
  return true;
}

void ExpirerWakeup::SleepUntil(absl::Time deadline, const Clock& clock) {
  MutexLock lock(&mu_);
  if (stopping_ || woken_) return;
  sleeping_until_ = deadline;
  // The clock may be fake, so the wait is measured on it: sleep (in real
  // time) for as long as the clock says remains, then look again.
  const absl::Duration remaining = deadline - clock.Now();
  if (remaining > absl::ZeroDuration()) cv_.WaitWithTimeout(&mu_, remaining);
}

void ExpirerWakeup::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  started_ = false;
  cv_.Signal();
}

Expirer::Expirer(Engine* engine, Clock* clock, ExpirerWakeup* wakeup)
    : engine_(engine), clock_(clock), wakeup_(wakeup) {
  wakeup_->Start();
  thread_ = std::thread([this] { Run(); });
}

Expirer::~Expirer() {
  wakeup_->Stop();
  thread_.join();
}

void Expirer::Run() {
  while (wakeup_->BeginPass()) {
    engine_->ExpireDue();
    // While the journal refuses changes nothing can expire: sleep until
    // woken, which the store does when writes resume.
    wakeup_->SleepUntil(engine_->Writable().ok() ? engine_->NextDeadline() : absl::InfiniteFuture(),
                        *clock_);
  }
}

}  // namespace lapse

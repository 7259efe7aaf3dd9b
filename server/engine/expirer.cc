#include "server/engine/expirer.h"

#include <cassert>
#include <future>
#include <utility>

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

namespace {

ExpiryWork WorkOf(Engine* engine) {
  return {.expire_due = [engine] { engine->ExpireDue(); },
          // While the journal refuses changes nothing can expire: sleep until
          // woken, which the store does when writes resume.
          .next_deadline =
              [engine] {
                return engine->Writable().ok() ? engine->NextDeadline() : absl::InfiniteFuture();
              }};
}

}  // namespace

Expirer::Expirer(Engine* engine, Clock* clock, ExpirerWakeup* wakeup, ThreadPriority priority)
    : Expirer(WorkOf(engine), clock, wakeup, priority) {}

Expirer::Expirer(ExpiryWork work, Clock* clock, ExpirerWakeup* wakeup, ThreadPriority priority)
    : work_(std::move(work)), clock_(clock), wakeup_(wakeup) {
  wakeup_->Start();
  std::promise<AppliedPriority> applied;
  std::future<AppliedPriority> got = applied.get_future();
  thread_ = std::thread([this, priority, &applied] {
    applied.set_value(ApplyThreadPriority(priority));
    Run();
  });
  priority_ = got.get();
}

Expirer::~Expirer() {
  wakeup_->Stop();
  thread_.join();
}

void Expirer::Run() {
  while (wakeup_->BeginPass()) {
    work_.expire_due();
    wakeup_->SleepUntil(work_.next_deadline(), *clock_);
  }
}

}  // namespace lapse

// Wakeup: wakes a sleeping thread without taking any lock, for notifiers that
// must never wait (the expirer telling the hubs of new events).
//
// A Mutex and CondVar make the notifier take the sleeper's lock, which any
// other thread may hold (and std::condition_variable_any takes an internal
// mutex of its own in notify). Wakeup is an epoch counter instead: Wake()
// bumps it and, only while a thread sleeps, makes one futex wake system call;
// a sleeper reads the epoch before it checks its condition and sleeps only
// while the epoch is still that value (the kernel compares and sleeps
// atomically), so a Wake() between the check and the sleep is never lost.
//
//   // the sleeper:                      // a notifier:
//   MutexLock lock(&mu);                 published.store(x, std::memory_order_release);
//   while (true) {                       wakeup.Wake();
//     const uint32_t epoch = wakeup.Epoch();
//     if (Ready()) break;
//     wakeup.Wait(&mu, epoch, timeout);
//   }
//
// What Wake() announces must be published before it: in an atomic, or under a
// lock the sleeper takes. One sleeping thread at a time. Linux only (futex).
#ifndef LAPSE_SERVER_BASE_WAKEUP_H_
#define LAPSE_SERVER_BASE_WAKEUP_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse {

class Wakeup {
 public:
  Wakeup() = default;
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Read before checking the condition a Wake() announces.
  uint32_t Epoch() const { return epoch_.load(std::memory_order_seq_cst); }

  // Ends a Wait of the sleeper, or the next Wait on an epoch read before this
  // call. Never blocks.
  void Wake();

  // Sleeps until the epoch differs from `epoch` (a Wake() since it was read)
  // or `timeout` passes, whichever is first; may return early. True when the
  // epoch differs.
  bool Wait(uint32_t epoch, absl::Duration timeout);

  // Wait with `mu` released; reacquires it before returning.
  bool Wait(Mutex* mu, uint32_t epoch, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    mu->Unlock();
    const bool woken = Wait(epoch, timeout);
    mu->Lock();
    return woken;
  }

 private:
  // The futex word.
  std::atomic<uint32_t> epoch_{0};
  // A thread is in Wait (or about to sleep): Wake() must make the system call.
  std::atomic<bool> sleeping_{false};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_WAKEUP_H_

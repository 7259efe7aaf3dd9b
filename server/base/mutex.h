// Mutex, MutexLock, ReaderMutexLock, CondVar: lapse's one lock family, used by
// the server, the C++ client and the tests alike.
//
// Thin wrappers over std::shared_mutex carrying Clang's thread-safety
// annotations, so ABSL_GUARDED_BY and friends are checked as with absl::Mutex.
// Why not absl::Mutex: Debian's prebuilt Abseil is not compiled for
// ThreadSanitizer, so TSan cannot see absl::Mutex's happens-before edges and
// reports false races; std::shared_mutex goes through pthreads, which TSan
// intercepts. The engine, the watch path and the client are tested under
// TSan, so they use these. Header-only and free of server code, so the client
// library includes it without depending on the server.
#ifndef LAPSE_SERVER_BASE_MUTEX_H_
#define LAPSE_SERVER_BASE_MUTEX_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lapse {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  friend class CondVar;
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable for a Mutex held exclusively.
class CondVar {
 public:
  // Releases `mu`, waits for a Signal or for `timeout`, reacquires `mu`.
  // May return early, like every condition variable: callers loop on their
  // condition.
  void WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
    // Bounded so that an infinite timeout does not overflow the conversion;
    // a spurious early return is allowed anyway.
    const absl::Duration bounded = std::min(timeout, absl::Hours(24));
    cv_.wait_for(mu->mu_, absl::ToChronoNanoseconds(bounded));
  }
  // Waits until ready() holds or `deadline` passes, whichever is first;
  // ready()'s last value. ready() is called with `mu` held; whoever changes
  // what it reads signals this. Not analysed for thread safety inside:
  // ready() refers to `mu` by the caller's name for it.
  template <typename Ready>
  bool WaitUntil(Mutex* mu, absl::Time deadline, Ready ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      WaitWithTimeout(mu, left);
    }
    return true;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_MUTEX_H_

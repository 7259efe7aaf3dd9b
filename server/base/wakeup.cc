#include "server/base/wakeup.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

namespace lapse {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the futex word must be a plain 32-bit integer");

uint32_t* FutexWord(std::atomic<uint32_t>* word) { return reinterpret_cast<uint32_t*>(word); }

}  // namespace

void Wakeup::Wake() {
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  // Either this sees the sleeper's flag, or the sleeper sees the new epoch
  // before it sleeps (both are sequentially consistent).
  if (sleeping_.load(std::memory_order_seq_cst)) {
    syscall(SYS_futex, FutexWord(&epoch_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
}

bool Wakeup::Wait(uint32_t epoch, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return Epoch() != epoch;
  // Bounded so that an infinite timeout converts; an early return is allowed.
  const timespec relative = absl::ToTimespec(std::min(timeout, absl::Hours(24)));
  sleeping_.store(true, std::memory_order_seq_cst);
  if (Epoch() == epoch) {
    // Returns at once (EAGAIN) if the epoch moved since; EINTR and ETIMEDOUT
    // are early returns.
    syscall(SYS_futex, FutexWord(&epoch_), FUTEX_WAIT_PRIVATE, epoch, &relative, nullptr, 0);
  }
  sleeping_.store(false, std::memory_order_seq_cst);
  return Epoch() != epoch;
}

}  // namespace lapse

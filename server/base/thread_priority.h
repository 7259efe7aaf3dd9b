// ThreadPriority: how soon after it wakes the kernel runs a thread whose
// lateness users see — the expirer (an event is as late as its pass) and the
// watch dispatcher (which hands the events to the streams).
//
// With the default policy, a woken thread that finds both CPUs busy with
// other processes (a compiler, say) waits until their time slices end: on a
// 2-core machine the expirer was measured runnable but not running for 2–10 ms
// at a time (perf sched timehist; docs/benchmarks.md, "The expiry tail
// (perftail2)"), which was all of the server's expiry tail. These threads sleep
// nearly all the time and run for well under a millisecond per wake-up, so
// they can be put ahead of other work at little cost to it.
//
//   lapse::AppliedPriority got = lapse::ApplyThreadPriority(lapse::ThreadPriority::kRealtime);
//   if (!got.refused.empty()) Log(LogLevel::kWarning, "... %s", got.refused);
//
// Linux only; elsewhere every request gets kNormal.
#ifndef LAPSE_SERVER_BASE_THREAD_PRIORITY_H_
#define LAPSE_SERVER_BASE_THREAD_PRIORITY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace lapse {

enum class ThreadPriority {
  // The process's own policy, untouched.
  kNormal,
  // The default policy with a 100 µs time slice instead of the kernel's
  // (EEVDF custom slice, Linux ≥ 6.12, no privilege needed): a woken thread
  // with a shorter slice preempts the running one. Helps at p99; under heavy
  // load it still waits now and then.
  kShortSlice,
  // SCHED_FIFO at the lowest real-time priority (1): runs as soon as it wakes,
  // ahead of every thread of the default policy. Needs CAP_SYS_NICE or an
  // RLIMIT_RTPRIO of at least 1. Threads it creates get the default policy
  // (SCHED_RESET_ON_FORK). The kernel's real-time throttling (by default 5 %
  // of each second) still leaves other threads the CPU should one spin.
  kRealtime,
};

// "normal", "short_slice", "realtime".
absl::string_view ThreadPriorityName(ThreadPriority priority);
// The inverse of ThreadPriorityName; false for any other text.
bool ParseThreadPriority(absl::string_view text, ThreadPriority* priority);

struct AppliedPriority {
  // What the thread got.
  ThreadPriority priority = ThreadPriority::kNormal;
  // Empty when it got what it asked for; otherwise why not, e.g.
  // "realtime refused: Operation not permitted".
  std::string refused;
};

// Gives the calling thread `wanted`, or the best below it that the kernel
// grants: kRealtime falls back to kShortSlice, which falls back to kNormal.
// kNormal changes nothing.
AppliedPriority ApplyThreadPriority(ThreadPriority wanted);

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_THREAD_PRIORITY_H_

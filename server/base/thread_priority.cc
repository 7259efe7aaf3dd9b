#include "server/base/thread_priority.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/base/enum_names.h"

#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lapse {
namespace {

constexpr EnumName<ThreadPriority> kThreadPriorityNames[] = {
    {ThreadPriority::kNormal, "normal"},
    {ThreadPriority::kShortSlice, "short_slice"},
    {ThreadPriority::kRealtime, "realtime"},
};

#ifdef __linux__

// The kernel's struct sched_attr (linux/sched/types.h, which cannot be
// included beside glibc's <sched.h>), as of its first version: 48 bytes.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};

constexpr uint64_t kShortSliceNs = 100'000;

std::string Errno() { return strerror(errno); }

// Empty on success, else why not.
std::string SetRealtime() {
  sched_param param{};
  param.sched_priority = 1;
  if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &param) != 0) {
    return absl::StrCat("realtime refused: ", Errno());
  }
  return "";
}

std::string SetShortSlice() {
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_runtime = kShortSliceNs;
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
    return absl::StrCat("short slice refused: ", Errno());
  }
  // Kernels before 6.12 accept and ignore the slice of a SCHED_OTHER thread;
  // from 6.12 sched_getattr reports the slice in force.
  SchedAttr got{};
  if (syscall(SYS_sched_getattr, 0, &got, sizeof got, 0) != 0) {
    return absl::StrCat("short slice not confirmed: ", Errno());
  }
  if (got.sched_runtime != kShortSliceNs) return "short slice not supported by this kernel";
  return "";
}

#endif  // __linux__

}  // namespace

absl::string_view ThreadPriorityName(ThreadPriority priority) {
  return NameOf(kThreadPriorityNames, priority, "normal");
}

bool ParseThreadPriority(absl::string_view text, ThreadPriority* priority) {
  return ParseName(kThreadPriorityNames, text, priority);
}

AppliedPriority ApplyThreadPriority(ThreadPriority wanted) {
  AppliedPriority applied;
  if (wanted == ThreadPriority::kNormal) return applied;
#ifdef __linux__
  if (wanted == ThreadPriority::kRealtime) {
    std::string why = SetRealtime();
    if (why.empty()) {
      applied.priority = ThreadPriority::kRealtime;
      return applied;
    }
    applied.refused = std::move(why);
  }
  std::string why = SetShortSlice();
  if (why.empty()) {
    applied.priority = ThreadPriority::kShortSlice;
    return applied;
  }
  applied.refused = applied.refused.empty() ? why : absl::StrCat(applied.refused, "; ", why);
#else
  applied.refused = "thread priorities are set on Linux only";
#endif
  return applied;
}

}  // namespace lapse

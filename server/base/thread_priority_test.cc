#include "server/base/thread_priority.h"

#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include "gtest/gtest.h"

namespace lapse {
namespace {

// Runs `body` on a thread of its own, so that what it changes about its
// thread's scheduling ends with it.
void OnOwnThread(const std::function<void()>& body) { std::thread(body).join(); }

int Policy() { return sched_getscheduler(0) & ~SCHED_RESET_ON_FORK; }

TEST(ThreadPriorityTest, NamesParseBack) {
  for (ThreadPriority p :
       {ThreadPriority::kNormal, ThreadPriority::kShortSlice, ThreadPriority::kRealtime}) {
    ThreadPriority parsed = ThreadPriority::kNormal;
    ASSERT_TRUE(ParseThreadPriority(ThreadPriorityName(p), &parsed));
    EXPECT_EQ(parsed, p);
  }
  ThreadPriority parsed = ThreadPriority::kNormal;
  EXPECT_FALSE(ParseThreadPriority("fifo", &parsed));
}

TEST(ThreadPriorityTest, NormalLeavesTheThreadAlone) {
  OnOwnThread([] {
    const AppliedPriority got = ApplyThreadPriority(ThreadPriority::kNormal);
    EXPECT_EQ(got.priority, ThreadPriority::kNormal);
    EXPECT_EQ(got.refused, "");
    EXPECT_EQ(Policy(), SCHED_OTHER);
  });
}

TEST(ThreadPriorityTest, RealtimeRunsTheThreadFirstInFifoAndNotItsChildren) {
  OnOwnThread([] {
    const AppliedPriority got = ApplyThreadPriority(ThreadPriority::kRealtime);
    if (got.priority != ThreadPriority::kRealtime) GTEST_SKIP() << got.refused;
    EXPECT_EQ(got.refused, "");
    EXPECT_EQ(Policy(), SCHED_FIFO);
    sched_param param{};
    ASSERT_EQ(sched_getparam(0, &param), 0);
    EXPECT_EQ(param.sched_priority, 1);
    int child_policy = -1;
    std::thread([&] { child_policy = Policy(); }).join();
    EXPECT_EQ(child_policy, SCHED_OTHER);
  });
}

// Drops CAP_SYS_NICE from the calling thread's effective capabilities
// (capabilities are per thread), so a root test sees what an unprivileged
// server sees.
bool DropSysNice() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_SYS_NICE)].effective &= ~CAP_TO_MASK(CAP_SYS_NICE);
  return syscall(SYS_capset, &header, data) == 0;
}

TEST(ThreadPriorityTest, RefusedRealtimeFallsBackToTheDefaultPolicySayingWhy) {
  rlimit rtprio{};
  ASSERT_EQ(getrlimit(RLIMIT_RTPRIO, &rtprio), 0);
  rlimit none = rtprio;
  none.rlim_cur = 0;
  ASSERT_EQ(setrlimit(RLIMIT_RTPRIO, &none), 0);
  OnOwnThread([] {
    ASSERT_TRUE(DropSysNice());
    const AppliedPriority got = ApplyThreadPriority(ThreadPriority::kRealtime);
    EXPECT_NE(got.priority, ThreadPriority::kRealtime);
    EXPECT_EQ(got.refused.rfind("realtime refused: ", 0), 0u) << got.refused;
    EXPECT_EQ(Policy(), SCHED_OTHER);
  });
  ASSERT_EQ(setrlimit(RLIMIT_RTPRIO, &rtprio), 0);
}

TEST(ThreadPriorityTest, ShortSliceKeepsTheDefaultPolicy) {
  OnOwnThread([] {
    const AppliedPriority got = ApplyThreadPriority(ThreadPriority::kShortSlice);
    if (got.priority != ThreadPriority::kShortSlice) GTEST_SKIP() << got.refused;
    EXPECT_EQ(Policy(), SCHED_OTHER);
  });
}

}  // namespace
}  // namespace lapse

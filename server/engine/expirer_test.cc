#include "server/engine/expirer.h"

#include <sched.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"

namespace lapse {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

// Wakes a test when the log reaches a sequence: the test synchronises on the
// append itself. The 30 s bound only matters when the test is about to fail.
class SequenceWaiter {
 public:
  // The log's listener.
  EventsReadableListener Listener() {
    return [this](uint64_t last) {
      MutexLock lock(&mu_);
      last_ = last;
      cv_.SignalAll();
    };
  }
  bool AwaitAtLeast(uint64_t sequence) {
    MutexLock lock(&mu_);
    return cv_.WaitUntil(&mu_, absl::Now() + absl::Seconds(30),
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return last_ >= sequence; });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t last_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(ExpirerTest, ExpiresAMemberOnceTheClockPassesItsDeadline) {
  FakeClock clock(kStart);
  SequenceWaiter waiter;
  EventFeed log({.first_sequence = 1, .on_readable = waiter.Listener()});
  ExpirerWakeup wakeup;
  Engine engine({.earlier_deadline_listener = wakeup.Listener()}, &clock, &log);
  Expirer expirer(&engine, &clock, &wakeup);
  MemberWrite w{"k", "v", Expiration::Ttl(absl::Seconds(10))};
  ASSERT_TRUE(engine.Put("c", {w}, {}).ok());
  clock.Advance(absl::Seconds(10));
  expirer.Wake();
  ASSERT_TRUE(waiter.AwaitAtLeast(1));
  EXPECT_EQ(engine.total_members(), 0u);
}

TEST(ExpirerTest, RealClockExpiryHappensAtOrAfterTheDeadline) {
  SequenceWaiter waiter;
  EventFeed log({.first_sequence = 1, .on_readable = waiter.Listener()});
  ExpirerWakeup wakeup;
  Engine engine({.earlier_deadline_listener = wakeup.Listener()}, RealClock(), &log);
  Expirer expirer(&engine, RealClock(), &wakeup);
  // A later deadline first, then an earlier one, which must wake the sleeper.
  MemberWrite later{"later", "v", Expiration::Ttl(absl::Hours(1))};
  ASSERT_TRUE(engine.Put("c", {later}, {}).ok());
  MemberWrite soon{"soon", "v", Expiration::Ttl(absl::Milliseconds(20))};
  absl::StatusOr<std::vector<PutResult>> put = engine.Put("c", {soon}, {});
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(waiter.AwaitAtLeast(1));
  absl::StatusOr<EventBatch> batch = log.Read(0, EventFilter{}, ReadLimits{});
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].key, "soon");
  EXPECT_GE(batch->events[0].expired_at, (*put)[0].expire_time);
}

TEST(ExpirerTest, StopsPromptlyWhileSleepingTowardsAFarDeadline) {
  FakeClock clock(kStart);
  EventFeed log({});
  ExpirerWakeup wakeup;
  Engine engine({.earlier_deadline_listener = wakeup.Listener()}, &clock, &log);
  {
    Expirer expirer(&engine, &clock, &wakeup);
    MemberWrite w{"k", "v", Expiration::Ttl(absl::Hours(24))};
    ASSERT_TRUE(engine.Put("c", {w}, {}).ok());
  }
  EXPECT_EQ(engine.total_members(), 1u);
}

// The scheduling policy of the thread that runs `priority`'s expirer's passes.
int PolicyOfPasses(ThreadPriority priority, AppliedPriority* got) {
  FakeClock clock(kStart);
  ExpirerWakeup wakeup;
  Mutex mu;
  CondVar ran;
  int policy = -1;
  Expirer expirer(ExpiryWork{.expire_due =
                                 [&] {
                                   MutexLock lock(&mu);
                                   policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
                                   ran.SignalAll();
                                 },
                             .next_deadline = [] { return absl::InfiniteFuture(); }},
                  &clock, &wakeup, priority);
  *got = expirer.priority();
  MutexLock lock(&mu);
  // The thread makes a pass as soon as it starts.
  ran.WaitUntil(&mu, absl::Now() + absl::Seconds(30),
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return policy != -1; });
  return policy;
}

// Whether this process may run threads at ThreadPriority::kRealtime.
bool RealtimeGranted(std::string* why) {
  AppliedPriority probe;
  std::thread([&] { probe = ApplyThreadPriority(ThreadPriority::kRealtime); }).join();
  *why = probe.refused;
  return probe.priority == ThreadPriority::kRealtime;
}

TEST(ExpirerTest, PassesRunAtTheRealtimePriorityAskedFor) {
  std::string why;
  if (!RealtimeGranted(&why)) GTEST_SKIP() << why;
  AppliedPriority got;
  EXPECT_EQ(PolicyOfPasses(ThreadPriority::kRealtime, &got), SCHED_FIFO);
  EXPECT_EQ(got.priority, ThreadPriority::kRealtime);
  EXPECT_EQ(got.refused, "");
}

TEST(ExpirerTest, PassesRunAtTheDefaultPolicyUnlessAsked) {
  AppliedPriority got;
  EXPECT_EQ(PolicyOfPasses(ThreadPriority::kNormal, &got), SCHED_OTHER);
  EXPECT_EQ(got.priority, ThreadPriority::kNormal);
  EXPECT_EQ(got.refused, "");
}

}  // namespace
}  // namespace lapse

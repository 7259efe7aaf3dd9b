#include "server/service/group_hub.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"

namespace lapse {
namespace {

// Counts the wake-ups that say its group is readable; never due otherwise.
class CountingWaiter : public GroupWaiter {
 public:
  absl::Time Wake(bool readable, absl::Time now) override {
    MutexLock lock(&mu_);
    if (readable) ++readable_wakes_;
    changed_.SignalAll();
    return absl::InfiniteFuture();
  }
  void Shutdown() override {}

  // Waits (at most `timeout`) for `count` readable wake-ups in all.
  bool AwaitReadableWakes(int count, absl::Duration timeout) {
    MutexLock lock(&mu_);
    return changed_.WaitUntil(
        &mu_, absl::Now() + timeout,
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return readable_wakes_ >= count; });
  }

 private:
  Mutex mu_;
  CondVar changed_;
  int readable_wakes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The dispatcher sleeps until told (the waiter is never due): each
// announcement, made while it sleeps or while it is still busy with the one
// before, must reach the waiter.
TEST(GroupHubTest, EveryEventsReadableWakesTheWaiters) {
  GroupHub hub({});
  auto* waiter = new CountingWaiter;
  ASSERT_TRUE(
      hub.Register(waiter, "billing", GroupHub::Kind::kStream, absl::InfiniteFuture()).ok());
  for (int i = 1; i <= 2000; ++i) {
    hub.OnEventsReadable();
    ASSERT_TRUE(waiter->AwaitReadableWakes(i, absl::Seconds(30))) << "announcement " << i;
  }
  hub.Unregister(waiter);
  hub.Shutdown();
  waiter->Unref();
}

TEST(GroupHubTest, GroupReadableWakesOnlyThatGroupsWaiters) {
  GroupHub hub({});
  auto* billing = new CountingWaiter;
  auto* audit = new CountingWaiter;
  ASSERT_TRUE(hub.Register(billing, "billing", GroupHub::Kind::kPoll, absl::InfiniteFuture()).ok());
  ASSERT_TRUE(hub.Register(audit, "audit", GroupHub::Kind::kPoll, absl::InfiniteFuture()).ok());
  hub.OnGroupReadable("billing");
  ASSERT_TRUE(billing->AwaitReadableWakes(1, absl::Seconds(30)));
  hub.OnEventsReadable();
  ASSERT_TRUE(audit->AwaitReadableWakes(1, absl::Seconds(30)));
  ASSERT_TRUE(billing->AwaitReadableWakes(2, absl::Seconds(30)));
  hub.Unregister(billing);
  hub.Unregister(audit);
  hub.Shutdown();
  billing->Unref();
  audit->Unref();
}

}  // namespace
}  // namespace lapse

#include "server/base/wakeup.h"

#include <atomic>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace lapse {
namespace {

TEST(WakeupTest, WakeBetweenEpochAndWaitIsNotLost) {
  Wakeup wakeup;
  const uint32_t epoch = wakeup.Epoch();
  wakeup.Wake();
  // Would sleep the whole day (and the test time out) if the wake were lost.
  EXPECT_TRUE(wakeup.Wait(epoch, absl::Hours(24)));
}

TEST(WakeupTest, WaitWithoutWakeTimesOut) {
  Wakeup wakeup;
  EXPECT_FALSE(wakeup.Wait(wakeup.Epoch(), absl::Milliseconds(1)));
  EXPECT_FALSE(wakeup.Wait(wakeup.Epoch(), absl::ZeroDuration()));
}

TEST(WakeupTest, WaitOnAnOldEpochReturnsAtOnce) {
  Wakeup wakeup;
  const uint32_t epoch = wakeup.Epoch();
  wakeup.Wake();
  wakeup.Wake();
  EXPECT_TRUE(wakeup.Wait(epoch, absl::Hours(24)));
  EXPECT_TRUE(wakeup.Wait(epoch, absl::ZeroDuration()));
}

TEST(WakeupTest, WaitReleasesAndRetakesTheMutex) {
  Mutex mu;
  Wakeup wakeup;
  int published = 0;
  std::thread notifier([&] {
    MutexLock lock(&mu);  // only possible while the sleeper has released it
    published = 1;
    wakeup.Wake();
  });
  {
    MutexLock lock(&mu);
    while (true) {
      const uint32_t epoch = wakeup.Epoch();
      if (published == 1) break;
      wakeup.Wait(&mu, epoch, absl::Hours(24));
    }
  }
  notifier.join();
}

// Two threads hand a counter back and forth, each sleeping until the other
// publishes: a single lost wake-up leaves both asleep for a day.
TEST(WakeupTest, PingPongLosesNoWakeUp) {
  constexpr uint64_t kRounds = 20000;
  std::atomic<uint64_t> ball{0};
  Wakeup to_odd;
  Wakeup to_even;
  auto player = [&](uint64_t parity, Wakeup* mine, Wakeup* theirs) {
    while (true) {
      const uint32_t epoch = mine->Epoch();
      const uint64_t seen = ball.load(std::memory_order_acquire);
      if (seen >= kRounds) return;
      if (seen % 2 == parity) {
        ball.store(seen + 1, std::memory_order_release);
        theirs->Wake();
        continue;
      }
      mine->Wait(epoch, absl::Hours(24));
    }
  };
  std::thread odd(player, 1, &to_odd, &to_even);
  std::thread even(player, 0, &to_even, &to_odd);
  even.join();
  odd.join();
  EXPECT_EQ(ball.load(), kRounds);
}

}  // namespace
}  // namespace lapse

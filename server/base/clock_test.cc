#include "server/base/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Now(), absl::FromUnixMillis(101500));
  clock.Set(absl::FromUnixSeconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(5));
}

TEST(RealClockTest, IsCloseToTheSystemTime) {
  const absl::Time before = absl::Now();
  const absl::Time now = RealClock()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now - before, absl::Seconds(5));
}

}  // namespace
}  // namespace lapse

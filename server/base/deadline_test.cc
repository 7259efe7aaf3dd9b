#include "server/base/deadline.h"

#include "gtest/gtest.h"

namespace lapse {
namespace {

const absl::Time kSecond = absl::FromUnixSeconds(1'700'000'000);

TEST(DeadlineTest, NoDeadlineIsTheInfiniteFutureAndAfterEveryRealDeadline) {
  EXPECT_EQ(NoDeadline(), absl::InfiniteFuture());
  EXPECT_EQ(TimeOfDeadline(kNoDeadlineMs), NoDeadline());
  EXPECT_GT(kNoDeadlineMs, FloorMillis(kSecond + absl::Hours(24 * 365 * 1000)));
}

TEST(DeadlineTest, CeilRoundsUpAndFloorRoundsDownToTheMillisecond) {
  const int64_t ms = absl::ToUnixMillis(kSecond);
  EXPECT_EQ(CeilMillis(kSecond), ms);
  EXPECT_EQ(FloorMillis(kSecond), ms);
  EXPECT_EQ(CeilMillis(kSecond + absl::Nanoseconds(1)), ms + 1);
  EXPECT_EQ(FloorMillis(kSecond + absl::Nanoseconds(1)), ms);
  EXPECT_EQ(CeilMillis(kSecond - absl::Nanoseconds(1)), ms);
  EXPECT_EQ(FloorMillis(kSecond - absl::Nanoseconds(1)), ms - 1);
}

TEST(DeadlineTest, RoundingBeforeTheEpochFollowsTheSameDirection) {
  const absl::Time t = absl::UnixEpoch() - absl::Microseconds(1500);
  EXPECT_EQ(CeilMillis(t), -1);
  EXPECT_EQ(FloorMillis(t), -2);
}

TEST(DeadlineTest, CeilOfTheInfiniteFutureDoesNotOverflow) {
  EXPECT_EQ(CeilMillis(absl::InfiniteFuture()), kNoDeadlineMs);
}

TEST(DeadlineTest, TimeOfDeadlineRoundTripsWholeMilliseconds) {
  const int64_t ms = 1'700'000'000'123;
  EXPECT_EQ(FloorMillis(TimeOfDeadline(ms)), ms);
  EXPECT_EQ(CeilMillis(TimeOfDeadline(ms)), ms);
}

}  // namespace
}  // namespace lapse

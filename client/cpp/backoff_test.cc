#include "client/cpp/backoff.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace lapse::client::internal {
namespace {

BackoffPolicy Policy(absl::Duration initial, absl::Duration max, double multiplier) {
  BackoffPolicy policy;
  policy.initial = initial;
  policy.max = max;
  policy.multiplier = multiplier;
  return policy;
}

TEST(BackoffTest, DelaysDoubleUpToTheCapWithJitterInTheUpperHalf) {
  Backoff backoff(Policy(absl::Milliseconds(100), absl::Seconds(1), 2.0));
  std::mt19937_64 random(42);
  const absl::Duration ceilings[] = {absl::Milliseconds(100), absl::Milliseconds(200),
                                     absl::Milliseconds(400), absl::Milliseconds(800),
                                     absl::Seconds(1),        absl::Seconds(1)};
  for (absl::Duration ceiling : ceilings) {
    const absl::Duration delay = backoff.Next(random);
    EXPECT_GE(delay, ceiling / 2);
    EXPECT_LE(delay, ceiling);
  }
}

TEST(BackoffTest, ResetStartsOverFromTheInitialDelay) {
  Backoff backoff(Policy(absl::Milliseconds(10), absl::Seconds(10), 10.0));
  std::mt19937_64 random(7);
  backoff.Next(random);
  backoff.Next(random);
  EXPECT_GE(backoff.Next(random), absl::Milliseconds(500));
  backoff.Reset();
  EXPECT_LE(backoff.Next(random), absl::Milliseconds(10));
}

TEST(BackoffTest, JitterSpreadsClientsThatFailedTogether) {
  std::mt19937_64 random(1);
  std::set<int64_t> delays;
  for (int client = 0; client < 20; ++client) {
    Backoff backoff(Policy(absl::Seconds(1), absl::Seconds(1), 2.0));
    delays.insert(absl::ToInt64Microseconds(backoff.Next(random)));
  }
  EXPECT_GT(delays.size(), 15u);
}

TEST(BackoffTest, NonsensePoliciesAreClampedInsteadOfSpinning) {
  Backoff backoff(Policy(absl::ZeroDuration(), -absl::Seconds(1), 0.5));
  std::mt19937_64 random(3);
  for (int i = 0; i < 5; ++i) {
    const absl::Duration delay = backoff.Next(random);
    EXPECT_GE(delay, absl::Microseconds(500));
    EXPECT_LE(delay, absl::Milliseconds(1));
  }
}

}  // namespace
}  // namespace lapse::client::internal

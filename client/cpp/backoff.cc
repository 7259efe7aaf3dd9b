#include "client/cpp/backoff.h"

#include <algorithm>

#include "absl/random/distributions.h"

namespace lapse::client::internal {

Backoff::Backoff(const BackoffPolicy& policy)
    : initial_(std::max(policy.initial, absl::Milliseconds(1))),
      max_(std::max(policy.max, initial_)),
      multiplier_(std::max(policy.multiplier, 1.0)),
      ceiling_(initial_) {}

absl::Duration Backoff::Next(absl::BitGenRef random) {
  const absl::Duration ceiling = ceiling_;
  ceiling_ = std::min(ceiling_ * multiplier_, max_);
  const double fraction = absl::Uniform(absl::IntervalClosed, random, 0.5, 1.0);
  return ceiling * fraction;
}

}  // namespace lapse::client::internal

// Backoff: the delays of a retry or reconnect loop (see BackoffPolicy in
// lapse/client.h): exponential growth with a cap, each delay jittered into
// [ceiling / 2, ceiling].
//
//   lapse::client::internal::Backoff backoff(options.retry_backoff);
//   absl::BitGen random;
//   absl::SleepFor(backoff.Next(random));  // after a failure
//   backoff.Reset();                       // after a success
//
// The randomness is passed in so tests can draw from a seeded generator. Not
// thread-safe: each loop owns its Backoff.
#ifndef LAPSE_CLIENT_CPP_BACKOFF_H_
#define LAPSE_CLIENT_CPP_BACKOFF_H_

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "lapse/client.h"

namespace lapse::client::internal {

class Backoff final {
 public:
  // A policy with a non-positive initial delay, a max below it or a
  // multiplier below 1 is clamped to something sane rather than rejected.
  explicit Backoff(const BackoffPolicy& policy);

  // The delay before the next attempt; the ceiling then grows.
  absl::Duration Next(absl::BitGenRef random);

  // Back to the initial delay.
  void Reset() { ceiling_ = initial_; }

 private:
  // Constant after construction.
  absl::Duration initial_;
  absl::Duration max_;
  double multiplier_;

  absl::Duration ceiling_;
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_BACKOFF_H_

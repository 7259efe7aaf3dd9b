// Backoff: the delays of a retry or reconnect loop, like the C++ client's
// (client/cpp/backoff.h): from `initial`, growing by `multiplier` up to
// `max`, each delay drawn uniformly from [ceiling / 2, ceiling] so clients
// that failed together do not retry together. Not thread-safe: each loop
// owns its Backoff.
package dev.lapse.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

public final class Backoff {
  // Exponential backoff settings; out-of-range values are clamped, not refused.
  public static final class Policy {
    public final Duration initial;
    public final Duration max;
    public final double multiplier;

    public Policy(Duration initial, Duration max, double multiplier) {
      this.initial = initial;
      this.max = max;
      this.multiplier = multiplier;
    }
  }

  private final long initialNanos;
  private final long maxNanos;
  private final double multiplier;
  private long ceilingNanos;

  public Backoff(Policy policy) {
    initialNanos = Math.max(policy.initial.toNanos(), 1_000_000L);
    maxNanos = Math.max(policy.max.toNanos(), initialNanos);
    multiplier = Math.max(policy.multiplier, 1.0);
    ceilingNanos = initialNanos;
  }

  // The delay before the next attempt; the ceiling then grows.
  public Duration next() {
    long ceiling = ceilingNanos;
    ceilingNanos = (long) Math.min(ceiling * multiplier, (double) maxNanos);
    return Duration.ofNanos((long) (ceiling * ThreadLocalRandom.current().nextDouble(0.5, 1.0)));
  }

  public void reset() {
    ceilingNanos = initialNanos;
  }
}

// Backoff: the delays of a retry or reconnect loop, like the C++ client's
// (client/cpp/backoff.h): from `initialMs`, growing by `multiplier` up to
// `maxMs`, each delay drawn uniformly from [ceiling / 2, ceiling] so clients
// that failed together do not retry together.
//
//   const backoff = new Backoff({initialMs: 50, maxMs: 2000, multiplier: 2});
//   await sleep(backoff.next());  // after a failure
//   backoff.reset();              // after a success
'use strict';

class Backoff {
  // Out-of-range settings are clamped to something sane, not refused.
  constructor({initialMs, maxMs, multiplier}, random = Math.random) {
    this.initialMs = Math.max(initialMs, 1);
    this.maxMs = Math.max(maxMs, this.initialMs);
    this.multiplier = Math.max(multiplier, 1);
    this.random = random;
    this.ceilingMs = this.initialMs;
  }

  // The delay before the next attempt, in milliseconds; the ceiling grows.
  next() {
    const ceiling = this.ceilingMs;
    this.ceilingMs = Math.min(ceiling * this.multiplier, this.maxMs);
    return ceiling * (0.5 + this.random() / 2);
  }

  reset() {
    this.ceilingMs = this.initialMs;
  }
}

module.exports = {Backoff};

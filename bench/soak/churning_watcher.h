// ChurningWatcher: one watch client of the soak that keeps connecting and
// disconnecting: it opens a WatchExpirations stream (matching everything, a
// prefix or a few collections, with or without values), keeps it for a random
// while and cancels it, again and again. A stalling watcher never reads its
// stream, so the server's writes back up until it cancels the stream or the
// watcher gives up.
//
//   lapse::soak::ChurningWatcher watcher(stub, {.stall = false, .seed = 7});
//   std::thread t([&] { watcher.Run(stop); });
//
// The counters are thread-safe; Run runs on one thread.
#ifndef LAPSE_BENCH_SOAK_CHURNING_WATCHER_H_
#define LAPSE_BENCH_SOAK_CHURNING_WATCHER_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "bench/load/lapse_load.h"

namespace lapse {
namespace soak {

class ChurningWatcher {
 public:
  struct Options {
    bool stall = false;
    // Each stream lives a uniformly random time up to this.
    absl::Duration max_life = absl::Seconds(30);
    int collections = 1000;
    uint64_t seed = 1;
  };

  // `stub` must outlive the watcher.
  ChurningWatcher(load::Stub* stub, const Options& options);

  // Opens stream after stream until `stop` is set.
  void Run(const std::atomic<bool>& stop);

  uint64_t streams() const { return streams_.load(std::memory_order_relaxed); }
  uint64_t events() const { return events_.load(std::memory_order_relaxed); }
  // Streams the server refused with RESOURCE_EXHAUSTED.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  load::Stub* const stub_;
  const Options options_;
  std::atomic<uint64_t> streams_{0};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace soak
}  // namespace lapse

#endif  // LAPSE_BENCH_SOAK_CHURNING_WATCHER_H_

// MixedWriter: one client thread's share of the soak's write load: puts of
// members with short TTLs (a few persistent), gets and removes, at a fixed
// pace, over a fixed set of collections, so lapse holds a steady population
// that keeps expiring.
//
//   lapse::soak::MixedWriter writer(stub, {.ops_per_second = 500, .seed = 1});
//   std::thread t([&] { writer.Run(stop); });
//
// ops() and errors() are thread-safe; Run runs on one thread.
#ifndef LAPSE_BENCH_SOAK_MIXED_WRITER_H_
#define LAPSE_BENCH_SOAK_MIXED_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "bench/load/lapse_load.h"

namespace lapse {
namespace soak {

class MixedWriter {
 public:
  struct Options {
    int collections = 1000;
    // At least 10: one request names 10 distinct keys.
    int keys_per_collection = 100;
    size_t value_bytes = 100;
    absl::Duration max_ttl = absl::Seconds(10);
    double ops_per_second = 500;
    uint64_t seed = 1;
  };

  // `stub` must outlive the writer.
  MixedWriter(load::Stub* stub, const Options& options);

  // Issues operations until `stop` is set.
  void Run(const std::atomic<bool>& stop);

  uint64_t ops() const { return ops_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  load::Stub* const stub_;
  const Options options_;
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> errors_{0};
};

}  // namespace soak
}  // namespace lapse

#endif  // LAPSE_BENCH_SOAK_MIXED_WRITER_H_

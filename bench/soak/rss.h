// What the soak tools read about the lapsed they drive: its resident set
// size, from /proc, and how a series of samples of it trends.
//
//   std::optional<int64_t> bytes = lapse::soak::ResidentBytes(pid);
//   lapse::soak::Trend trend = lapse::soak::FitTrend(samples);
//
// Thread-compatible.
#ifndef LAPSE_BENCH_SOAK_RSS_H_
#define LAPSE_BENCH_SOAK_RSS_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace lapse {
namespace soak {

// VmRSS of process `pid` in bytes; nullopt when it cannot be read (the
// process is gone).
std::optional<int64_t> ResidentBytes(int pid);

// One RSS sample, `seconds` into the run.
struct Sample {
  double seconds = 0;
  double mib = 0;
};

// A least-squares line through samples, with their extremes.
struct Trend {
  double min_mib = 0;
  double max_mib = 0;
  double mean_mib = 0;
  double mib_per_hour = 0;
};

// The trend of `samples` (at least one).
Trend FitTrend(const std::vector<Sample>& samples);

}  // namespace soak
}  // namespace lapse

#endif  // LAPSE_BENCH_SOAK_RSS_H_

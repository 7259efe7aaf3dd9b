// Stats: what the load generators (lapse-bench and the Redis side of
// bench/compare) measure, and the clock they measure it with.
//
//   lapse::load::LatencyRecorder put_latency;
//   put_latency.Record(lapse::load::NowMicros() - started_us);
//   lapse::load::LatencySummary s = put_latency.Summarize();
//   printf("p99 %s ms\n", lapse::load::FormatMs(s.p99_us).c_str());
//
// Every figure is taken from the wall clock (absl::GetCurrentTimeNanos): an
// expiry event's latency is "received - deadline", and the deadline is a wall
// clock instant chosen by the client, so client and server must share a clock
// (they do: loopback only, same machine).
//
// LatencyRecorder is thread-safe; LatencySummary is a plain value.
#ifndef LAPSE_BENCH_COMMON_STATS_H_
#define LAPSE_BENCH_COMMON_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lapse {
namespace load {

// Wall clock, microseconds and milliseconds since the Unix epoch.
int64_t NowMicros();
int64_t NowMillis();
// Sleeps until the wall clock reads `ms` (NowMillis); returns at once if it
// already does.
void SleepUntilMillis(int64_t ms);

// Percentiles of a set of samples, in microseconds. All zero when empty.
struct LatencySummary {
  size_t count = 0;
  int64_t min_us = 0;
  int64_t p50_us = 0;
  int64_t p90_us = 0;
  int64_t p99_us = 0;
  int64_t p999_us = 0;
  int64_t max_us = 0;
  double mean_us = 0;
};

// Collects every sample (8 bytes each: 1M samples are 8 MB) so percentiles
// are exact rather than bucketed.
class LatencyRecorder {
 public:
  LatencyRecorder() = default;
  LatencyRecorder(const LatencyRecorder&) = delete;
  LatencyRecorder& operator=(const LatencyRecorder&) = delete;

  void Record(int64_t micros);
  // For a batch of samples taken under one lock.
  void RecordAll(const std::vector<int64_t>& micros);
  size_t count() const;
  LatencySummary Summarize() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<int64_t> samples_ ABSL_GUARDED_BY(mu_);
};

// "1.23" (milliseconds, two decimals) for a duration in microseconds.
std::string FormatMs(int64_t micros);
// "1.23" (seconds, two decimals).
std::string FormatSeconds(absl::Duration d);
// "1.23M", "456.7k" or "89" for a count or rate.
std::string FormatCount(double n);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_STATS_H_

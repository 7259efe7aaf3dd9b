#include "bench/common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace lapse {
namespace load {
namespace {

// The sample at quantile q of sorted, non-empty `v` (nearest rank).
int64_t Quantile(const std::vector<int64_t>& v, double q) {
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

int64_t NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }
int64_t NowMillis() { return absl::GetCurrentTimeNanos() / 1'000'000; }

void SleepUntilMillis(int64_t ms) {
  const int64_t now = NowMillis();
  if (ms > now) absl::SleepFor(absl::Milliseconds(ms - now));
}

void LatencyRecorder::Record(int64_t micros) {
  absl::MutexLock lock(&mu_);
  samples_.push_back(micros);
}

void LatencyRecorder::RecordAll(const std::vector<int64_t>& micros) {
  absl::MutexLock lock(&mu_);
  samples_.insert(samples_.end(), micros.begin(), micros.end());
}

size_t LatencyRecorder::count() const {
  absl::MutexLock lock(&mu_);
  return samples_.size();
}

LatencySummary LatencyRecorder::Summarize() const {
  std::vector<int64_t> v;
  {
    absl::MutexLock lock(&mu_);
    v = samples_;
  }
  LatencySummary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.count = v.size();
  s.min_us = v.front();
  s.p50_us = Quantile(v, 0.50);
  s.p90_us = Quantile(v, 0.90);
  s.p99_us = Quantile(v, 0.99);
  s.p999_us = Quantile(v, 0.999);
  s.max_us = v.back();
  s.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}

std::string FormatMs(int64_t micros) {
  return absl::StrFormat("%.2f", static_cast<double>(micros) / 1000.0);
}

std::string FormatSeconds(absl::Duration d) {
  return absl::StrFormat("%.2f", absl::ToDoubleSeconds(d));
}

std::string FormatCount(double n) {
  if (n >= 1e6) return absl::StrFormat("%.2fM", n / 1e6);
  if (n >= 1e4) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

}  // namespace load
}  // namespace lapse

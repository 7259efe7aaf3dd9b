#include "bench/soak/rss.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lapse {
namespace soak {

std::optional<int64_t> ResidentBytes(int pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    // "VmRSS:    123456 kB"
    std::vector<absl::string_view> fields =
        absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib;
    if (fields.empty() || !absl::SimpleAtoi(fields[0], &kib)) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

Trend FitTrend(const std::vector<Sample>& samples) {
  Trend trend;
  trend.min_mib = samples.front().mib;
  trend.max_mib = samples.front().mib;
  double sum_t = 0;
  double sum_m = 0;
  for (const Sample& s : samples) {
    trend.min_mib = std::min(trend.min_mib, s.mib);
    trend.max_mib = std::max(trend.max_mib, s.mib);
    sum_t += s.seconds;
    sum_m += s.mib;
  }
  const double n = static_cast<double>(samples.size());
  trend.mean_mib = sum_m / n;
  const double mean_t = sum_t / n;
  double covariance = 0;
  double variance = 0;
  for (const Sample& s : samples) {
    covariance += (s.seconds - mean_t) * (s.mib - trend.mean_mib);
    variance += (s.seconds - mean_t) * (s.seconds - mean_t);
  }
  if (variance > 0) trend.mib_per_hour = covariance / variance * 3600;
  return trend;
}

}  // namespace soak
}  // namespace lapse

#include "bench/common/report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace lapse {
namespace load {

Table::Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void Table::Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

void Table::AddLatency(const std::string& what, const LatencySummary& s) {
  Add({what + " p50 (ms)", FormatMs(s.p50_us)});
  Add({what + " p90 (ms)", FormatMs(s.p90_us)});
  Add({what + " p99 (ms)", FormatMs(s.p99_us)});
  Add({what + " p99.9 (ms)", FormatMs(s.p999_us)});
  Add({what + " max (ms)", FormatMs(s.max_us)});
}

void Table::Print() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line = "  ";
    for (size_t i = 0; i < rows_[r].size(); ++i) {
      // First column left-aligned (labels), the others right-aligned (figures).
      line += i == 0 ? absl::StrFormat("%-*s", widths[i], rows_[r][i])
                     : absl::StrFormat("  %*s", widths[i], rows_[r][i]);
    }
    std::printf("%s\n", line.c_str());
    if (r == 0) {
      size_t total = 0;
      for (size_t w : widths) total += w + 2;
      std::printf("  %s\n", std::string(total - 2, '-').c_str());
    }
  }
  std::fflush(stdout);
}

Result::Result(std::string peer, std::string scenario)
    : line_(absl::StrCat("RESULT ", peer, " ", scenario)) {}

void Result::Add(const std::string& key, double value) {
  absl::StrAppend(&line_, " ", key, "=", absl::StrFormat("%.3f", value));
}
void Result::Add(const std::string& key, int64_t value) {
  absl::StrAppend(&line_, " ", key, "=", value);
}
void Result::Add(const std::string& key, uint64_t value) {
  absl::StrAppend(&line_, " ", key, "=", value);
}
void Result::Add(const std::string& key, const std::string& value) {
  absl::StrAppend(&line_, " ", key, "=", value);
}

void Result::AddLatency(const std::string& prefix, const LatencySummary& s) {
  Add(prefix + "_count", static_cast<uint64_t>(s.count));
  Add(prefix + "_p50_ms", static_cast<double>(s.p50_us) / 1000.0);
  Add(prefix + "_p99_ms", static_cast<double>(s.p99_us) / 1000.0);
  Add(prefix + "_p999_ms", static_cast<double>(s.p999_us) / 1000.0);
  Add(prefix + "_max_ms", static_cast<double>(s.max_us) / 1000.0);
}

void Result::Print() const {
  std::printf("%s\n", line_.c_str());
  std::fflush(stdout);
}

Progress::Progress(std::function<std::string()> line, absl::Duration quiet)
    : line_(std::move(line)), quiet_(quiet), start_(absl::Now()) {
  thread_.Start([this] { Run(); });
}

void Progress::Run() {
  absl::Time next = start_ + absl::Seconds(1);
  while (!thread_.WaitForStop(next)) {
    const absl::Duration elapsed = absl::Now() - start_;
    if (elapsed >= quiet_) {
      std::fprintf(stderr, "  [%5.1fs] %s\n", absl::ToDoubleSeconds(elapsed), line_().c_str());
    }
    next += absl::Seconds(1);
  }
}

}  // namespace load
}  // namespace lapse

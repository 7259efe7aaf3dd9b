// Report: how the load generators print what they measured.
//
// Each scenario prints a human table and then exactly one machine line,
//   RESULT <peer> <scenario> key=value key=value ...
// which bench/compare/run.sh collects to build its side-by-side table. A
// Progress ticker prints a line to stderr every second on long runs.
//
//   lapse::load::Table table({"metric", "value"});
//   table.Add({"members/s", "1.02M"});
//   table.Print();
//   lapse::load::Result result("lapse", "put");
//   result.Add("members_per_s", 1020000.0);
//   result.Print();
//
// Table and Result are not thread-safe; Progress is (its callback runs on
// its own thread and must be).
#ifndef LAPSE_BENCH_COMMON_REPORT_H_
#define LAPSE_BENCH_COMMON_REPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "bench/common/stats.h"
#include "bench/common/stoppable_thread.h"

namespace lapse {
namespace load {

// A table with aligned columns, printed to stdout.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void Add(std::vector<std::string> row);
  // Rows "<what> p50 (ms)", p90, p99, p99.9 and max.
  void AddLatency(const std::string& what, const LatencySummary& s);
  void Print() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// The one machine-readable line of a scenario.
class Result {
 public:
  Result(std::string peer, std::string scenario);
  void Add(const std::string& key, double value);
  void Add(const std::string& key, int64_t value);
  void Add(const std::string& key, uint64_t value);
  void Add(const std::string& key, const std::string& value);
  // Adds <prefix>_p50_ms, _p99_ms, _p999_ms, _max_ms and _count.
  void AddLatency(const std::string& prefix, const LatencySummary& s);
  void Print() const;

 private:
  std::string line_;
};

// Prints `line()` to stderr once a second, starting after `quiet` (short runs
// print nothing), until destroyed.
class Progress {
 public:
  Progress(std::function<std::string()> line, absl::Duration quiet = absl::Seconds(2));
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void Run();

  // Constant after construction.
  const std::function<std::string()> line_;
  const absl::Duration quiet_;
  const absl::Time start_;

  StoppableThread thread_;
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_REPORT_H_

#include "bench/common/load_counters.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lapse {
namespace load {

LoadCounters::LoadCounters(const LoadPlan& plan, size_t batch)
    : total_batches_(plan.Batches(batch)),
      start_(absl::Now()),
      end_(plan.members == 0 ? start_ + plan.duration : absl::InfiniteFuture()),
      stop_on_error_(plan.stop_on_error) {}

std::optional<uint64_t> LoadCounters::NextBatch() {
  if (stop_.load(std::memory_order_relaxed)) return std::nullopt;
  const uint64_t batch = next_batch_.fetch_add(1, std::memory_order_relaxed);
  if (batch >= total_batches_ || absl::Now() >= end_) {
    stop_.store(true, std::memory_order_relaxed);
    return std::nullopt;
  }
  return batch;
}

void LoadCounters::Finished(int64_t started_us, size_t members, bool ok) {
  latency_.Record(NowMicros() - started_us);
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (ok) members_.fetch_add(members, std::memory_order_relaxed);
}

void LoadCounters::Failed(const std::string& error) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  if (stop_on_error_) stop_.store(true, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  if (first_error_.empty()) first_error_ = error;
}

std::string LoadCounters::ProgressLine() const {
  const uint64_t n = members_.load(std::memory_order_relaxed);
  return absl::StrCat(
      "put: ", FormatCount(static_cast<double>(n)), " members, ",
      FormatCount(static_cast<double>(n) / absl::ToDoubleSeconds(absl::Now() - start_)), "/s");
}

LoadOutcome LoadCounters::Outcome() const {
  LoadOutcome out;
  out.elapsed = absl::Now() - start_;
  out.members = members_.load();
  out.requests = requests_.load();
  out.errors = errors_.load();
  out.latency = latency_.Summarize();
  absl::MutexLock lock(&mu_);
  out.first_error = first_error_;
  return out;
}

}  // namespace load
}  // namespace lapse

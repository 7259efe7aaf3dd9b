// LoadCounters: what a writer (lapse-bench's RunPuts, lapse-redis-bench's
// WriteMembers) counts while it loads members per a LoadPlan, shared by its
// threads or callbacks: which batch comes next, when to stop, what was
// written and how long each request took, and the LoadOutcome that adds up to.
//
//   lapse::load::LoadCounters counters(plan, shape.batch);  // starts the clock
//   while (std::optional<uint64_t> batch = counters.NextBatch()) {
//     const int64_t started_us = lapse::load::NowMicros();
//     ... send batch *batch ...
//     if (!ok) counters.Failed("PutMembers: ...");
//     counters.Finished(started_us, members, ok);
//   }
//   lapse::load::LoadOutcome out = counters.Outcome();
//
// Thread-safe.
#ifndef LAPSE_BENCH_COMMON_LOAD_COUNTERS_H_
#define LAPSE_BENCH_COMMON_LOAD_COUNTERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/common/load_plan.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

class LoadCounters {
 public:
  // Starts the clock: a plan without a member count ends plan.duration from
  // now.
  LoadCounters(const LoadPlan& plan, size_t batch);
  LoadCounters(const LoadCounters&) = delete;
  LoadCounters& operator=(const LoadCounters&) = delete;

  // The next batch to write; nullopt once the plan's batches or time are used
  // up or a failure stopped the load, and from then on.
  std::optional<uint64_t> NextBatch();
  // A request that started at `started_us` was answered; its `members` count
  // as written when `ok`.
  void Finished(int64_t started_us, size_t members, bool ok);
  // A failure: counted, the first one kept, and unless the plan says
  // otherwise (stop_on_error) no batch is handed out any more (a scenario
  // with errors has failed; stop rather than pile them up).
  void Failed(const std::string& error);

  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // "put: <members> members, <rate>/s", for a Progress line.
  std::string ProgressLine() const;
  // What was counted, over the time since construction.
  LoadOutcome Outcome() const;

 private:
  // Constant after construction.
  const uint64_t total_batches_;
  const absl::Time start_;
  const absl::Time end_;
  const bool stop_on_error_;

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_batch_{0};
  std::atomic<uint64_t> members_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> errors_{0};
  LatencyRecorder latency_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_LOAD_COUNTERS_H_

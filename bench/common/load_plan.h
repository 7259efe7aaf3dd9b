// LoadPlan and LoadOutcome: what a load generator's writer is asked to write
// and what it reports back, the same for lapse (batched PutMembers RPCs) and
// for Redis (pipelined batches).
//
//   lapse::load::LoadPlan plan;
//   plan.members = 100000;
//   plan.deadline_ms = [](uint64_t i) { return first_ms + i % 1000; };
//   for (uint64_t b = 0; b < plan.Batches(shape.batch); ++b) {
//     auto [first, end] = plan.BatchMembers(shape.batch, b);  // [first, end)
//     ...
//   }
//
// Plain values; thread-compatible.
#ifndef LAPSE_BENCH_COMMON_LOAD_PLAN_H_
#define LAPSE_BENCH_COMMON_LOAD_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

struct LoadPlan {
  // Members to write; 0 means "until `duration` has passed".
  uint64_t members = 0;
  absl::Duration duration = absl::ZeroDuration();
  // Each member gets `ttl`, or, when `deadline_ms` is set, the absolute
  // deadline it returns for the member's index.
  absl::Duration ttl = absl::Hours(1);
  std::function<int64_t(uint64_t index)> deadline_ms;
  // Print a progress line to stderr every second on long runs.
  bool progress = true;
  // A failed request stops the load (a scenario with errors has failed);
  // false goes on writing, counting the errors (a run that injects faults).
  bool stop_on_error = true;

  // How many batches of `batch` members the plan writes; UINT64_MAX when it
  // writes for a duration.
  uint64_t Batches(size_t batch) const {
    return members == 0 ? UINT64_MAX : (members + batch - 1) / batch;
  }
  // The members [first, end) of batch number `b`; the last batch may be short.
  std::pair<uint64_t, uint64_t> BatchMembers(size_t batch, uint64_t b) const {
    const uint64_t first = b * batch;
    return {first, members == 0 ? first + batch : std::min<uint64_t>(first + batch, members)};
  }
};

struct LoadOutcome {
  uint64_t members = 0;
  // What carried the batches: RPCs (lapse) or pipelined batches (Redis).
  uint64_t requests = 0;
  uint64_t errors = 0;
  std::string first_error;
  absl::Duration elapsed;
  // Per request.
  LatencySummary latency;
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_LOAD_PLAN_H_

// The pieces every lapse-bench scenario (lapse_scenarios.cc, mixed_run.cc,
// group_run.cc) uses: its header line, the watchers' options, how long a
// watch stream may take to be in place, and loading members before their
// deadlines.
//
//   PrintShape("drain", options);
//   EventWatcher watcher(stub, WatcherOptions(options), &ledger);
//   if (!StartWatching(watcher)) return false;
//
// Functions that print write to stdout. Thread-compatible.
#ifndef LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_
#define LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "bench/load/lapse_load.h"
#include "bench/load/lapse_scenarios.h"

namespace lapse {
namespace load {

// How long a watch stream may take to be in place.
inline constexpr absl::Duration kStreamPatience = absl::Seconds(10);

// "== <peer> <scenario>: concurrency ..., <addr>".
void PrintShape(const char* scenario, const ScenarioOptions& o);

// A watcher of the run's collections, as the options ask.
EventWatcher::Options WatcherOptions(const ScenarioOptions& o);

// Starts `watcher`, or explains why it could not.
bool StartWatching(EventWatcher& watcher);

// Loads o.members members for the watch and group scenarios, with the
// deadlines `deadline_ms` gives (the first at `first_deadline_ms`), or
// explains why it could not.
bool LoadBeforeDeadline(const std::vector<std::unique_ptr<Stub>>& stubs, const ScenarioOptions& o,
                        std::function<int64_t(uint64_t)> deadline_ms, int64_t first_deadline_ms,
                        LoadOutcome* out);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_

// The pieces every lapse-bench scenario (lapse_scenarios.cc, mixed_run.cc)
// uses: its header line, the watchers' options and how long a watch stream
// may take to be in place.
//
//   PrintShape("drain", options);
//   EventWatcher watcher(stub, WatcherOptions(options), &ledger);
//   if (!StartWatching(watcher)) return false;
//
// Functions that print write to stdout. Thread-compatible.
#ifndef LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_
#define LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_

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

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_LAPSE_SCENARIO_PARTS_H_

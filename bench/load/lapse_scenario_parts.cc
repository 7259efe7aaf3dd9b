#include "bench/load/lapse_scenario_parts.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

void PrintShape(const char* scenario, const ScenarioOptions& o) {
  std::printf(
      "== %s %s: concurrency %d, batch %zu, key %zu B, value %zu B, %llu "
      "collections, %d channel(s), %s\n",
      o.peer.c_str(), scenario, o.shape.concurrency, o.shape.batch, o.shape.key_bytes,
      o.shape.value_bytes, static_cast<unsigned long long>(o.shape.collections), o.channels,
      o.addr.c_str());
}

EventWatcher::Options WatcherOptions(const ScenarioOptions& o) {
  return {o.shape.prefix, o.include_values, o.shape.key_bytes, o.shape.value_bytes};
}

bool StartWatching(EventWatcher& watcher) {
  if (absl::Status s = watcher.Start(kStreamPatience); !s.ok()) {
    std::printf("  cannot watch: %s\n", std::string(s.message()).c_str());
    return false;
  }
  return true;
}

bool LoadBeforeDeadline(const std::vector<std::unique_ptr<Stub>>& stubs, const ScenarioOptions& o,
                        std::function<int64_t(uint64_t)> deadline_ms, int64_t first_deadline_ms,
                        LoadOutcome* out) {
  LoadPlan plan;
  plan.members = o.members;
  plan.deadline_ms = std::move(deadline_ms);
  *out = RunPuts(stubs, o.shape, plan);
  if (out->errors > 0) {
    std::printf("  load failed: %llu errors; first: %s\n",
                static_cast<unsigned long long>(out->errors), out->first_error.c_str());
    if (NowMillis() >= first_deadline_ms) {
      std::printf("  (loading ran past the first deadline: raise --lead)\n");
    }
    return false;
  }
  return true;
}

}  // namespace load
}  // namespace lapse

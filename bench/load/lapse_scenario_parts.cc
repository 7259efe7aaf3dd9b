#include "bench/load/lapse_scenario_parts.h"

#include <cstdio>
#include <string>

#include "absl/status/status.h"

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

}  // namespace load
}  // namespace lapse

#include "bench/load/lapse_scenarios.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/common/ledger.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/scenario.h"
#include "bench/common/stats.h"
#include "bench/load/client_puts.h"
#include "bench/load/lapse_scenario_parts.h"

namespace lapse {
namespace load {
namespace {

// What a watch scenario (expiry-latency, drain) runs on: its channels, a
// ledger expecting o.members members and one watcher feeding it.
struct WatchRig {
  explicit WatchRig(const ScenarioOptions& o)
      : stubs(MakeStubs(o.addr, o.channels, o.lookahead_bytes, o.security)),
        ledger(o.members),
        watcher(stubs[0].get(), WatcherOptions(o), &ledger) {}

  const std::vector<std::unique_ptr<Stub>> stubs;
  ExpiryLedger ledger;
  EventWatcher watcher;
};

}  // namespace

bool RunPut(const ScenarioOptions& o) {
  PrintShape("put", o);
  const std::vector<std::unique_ptr<Stub>> stubs =
      MakeStubs(o.addr, o.channels, o.lookahead_bytes, o.security);
  LoadPlan plan;
  plan.members = o.members;
  plan.duration = o.duration;
  plan.ttl = o.ttl;
  plan.stop_on_error = !o.keep_going;
  return ReportPut(
      o.peer, {"RPCs/s", "RPC latency"}, o.shape.batch, o.shape.concurrency,
      o.client_library ? RunClientPuts(o.addr, o.shape, plan) : RunPuts(stubs, o.shape, plan));
}

bool RunExpiryLatency(const ScenarioOptions& o) {
  PrintShape("expiry-latency", o);
  WatchRig rig(o);
  if (!StartWatching(rig.watcher)) return false;
  const uint64_t n = o.members;
  const int64_t start_ms = FirstDeadlineMs(o.timing.lead, n);
  const int64_t spread_ms = absl::ToInt64Milliseconds(o.timing.spread);
  const auto deadline = [start_ms, spread_ms](uint64_t i) {
    return SpreadDeadlineMs(start_ms, spread_ms, i);
  };
  LoadOutcome load;
  if (!LoadBeforeDeadline(rig.stubs, o, deadline, start_ms, &load)) return false;
  const int64_t slack_ms = start_ms - NowMillis();
  std::printf(
      "  loaded %llu members in %ss (%s/s); first deadline in %lld ms, "
      "deadlines spread over %ss\n",
      static_cast<unsigned long long>(load.members), FormatSeconds(load.elapsed).c_str(),
      FormatCount(static_cast<double>(load.members) / absl::ToDoubleSeconds(load.elapsed)).c_str(),
      static_cast<long long>(slack_ms), FormatSeconds(o.timing.spread).c_str());
  AwaitExpiries(rig.ledger, n,
                {"expiry-latency", "events", start_ms, start_ms + spread_ms, o.timing.reconnect_at,
                 o.timing.drain_timeout},
                [&] {
                  std::printf("  watcher drops its stream after %llu events, resumes in %ss\n",
                              static_cast<unsigned long long>(rig.ledger.received()),
                              FormatSeconds(o.timing.reconnect_pause).c_str());
                  const absl::Status s =
                      rig.watcher.Reconnect(o.timing.reconnect_pause, kStreamPatience);
                  if (!s.ok()) {
                    std::printf("  cannot resume: %s\n", std::string(s.message()).c_str());
                  }
                });
  rig.watcher.Stop();
  const ExpiryTally tally = Tally(rig.ledger, n);
  const uint64_t watch_errors = rig.watcher.errors();
  Table table({"expiry-latency", "value"});
  AddExpiryLatencyRows(n, load, tally, "events", "received", table);
  const LatencySummary lag = rig.ledger.SummarizeExpiryLag();
  table.Add({"server expired_at - deadline p50 (ms)", FormatMs(lag.p50_us)});
  table.Add({"server expired_at - deadline p99 (ms)", FormatMs(lag.p99_us)});
  table.Add({"server expired_at - deadline max (ms)", FormatMs(lag.max_us)});
  table.Add({"watch messages", absl::StrCat(rig.watcher.responses())});
  table.Add({"watch errors", absl::StrCat(watch_errors)});
  table.Print();
  if (watch_errors > 0) std::printf("  first watch error: %s\n", rig.watcher.first_error().c_str());
  Result result = ExpiryLatencyResult(o.peer, n, o.timing, tally);
  result.AddLatency("server_lag", lag);
  result.Add("messages", rig.watcher.responses());
  result.Add("errors", watch_errors + rig.ledger.unknown());
  result.Print();
  return tally.Clean(watch_errors + rig.ledger.unknown());
}

bool RunDrain(const ScenarioOptions& o) {
  PrintShape("drain", o);
  WatchRig rig(o);
  if (!StartWatching(rig.watcher)) return false;
  const uint64_t n = o.members;
  const int64_t deadline_ms = FirstDeadlineMs(o.timing.lead, n);
  LoadOutcome load;
  const auto deadline = [deadline_ms](uint64_t) { return deadline_ms; };
  if (!LoadBeforeDeadline(rig.stubs, o, deadline, deadline_ms, &load)) return false;
  std::printf("  loaded %llu members in %ss; shared deadline in %lld ms\n",
              static_cast<unsigned long long>(load.members), FormatSeconds(load.elapsed).c_str(),
              static_cast<long long>(deadline_ms - NowMillis()));
  AwaitExpiries(
      rig.ledger, n,
      {"drain", "events", deadline_ms, deadline_ms, absl::ZeroDuration(), o.timing.drain_timeout},
      nullptr);
  rig.watcher.Stop();
  const ExpiryTally tally = Tally(rig.ledger, n);
  const DrainTimes times = DrainTimesFor(rig.ledger, deadline_ms);
  const uint64_t watch_errors = rig.watcher.errors();
  Table table({"drain", "value"});
  table.Add({"members sharing the deadline", absl::StrCat(n)});
  table.Add({"first event after deadline (ms)", FormatMs(times.first_us)});
  table.Add({tally.lost == 0 ? "all events after deadline (ms)" : "last event after deadline (ms)",
             FormatMs(times.all_us)});
  table.Add({"events/s", FormatCount(times.rate)});
  const LatencySummary lag = rig.ledger.SummarizeExpiryLag();
  table.Add({"server expired_at - deadline: first (ms)", FormatMs(lag.min_us)});
  table.Add({"server expired_at - deadline: last (ms)", FormatMs(lag.max_us)});
  table.Add({"events received", absl::StrCat(tally.received)});
  table.Add({"events lost", absl::StrCat(tally.lost)});
  table.Add({"duplicates", absl::StrCat(tally.duplicates)});
  table.Add({"watch messages", absl::StrCat(rig.watcher.responses())});
  table.Add({"watch errors", absl::StrCat(watch_errors)});
  table.Print();
  if (watch_errors > 0) std::printf("  first watch error: %s\n", rig.watcher.first_error().c_str());
  Result result = DrainResult(o.peer, n, times);
  result.Add("server_first_ms", static_cast<double>(lag.min_us) / 1000.0);
  result.Add("server_last_ms", static_cast<double>(lag.max_us) / 1000.0);
  AddTally(tally, result);
  result.Add("errors", watch_errors + rig.ledger.unknown());
  result.Print();
  return tally.Clean(watch_errors + rig.ledger.unknown());
}

}  // namespace load
}  // namespace lapse

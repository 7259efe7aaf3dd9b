#include "bench/common/scenario.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

absl::Duration AutoLead(uint64_t members) {
  return absl::Seconds(2) + absl::Microseconds(static_cast<int64_t>(members) * 1'000'000 / 100'000);
}

int64_t FirstDeadlineMs(absl::Duration lead, uint64_t members) {
  const absl::Duration chosen = lead > absl::ZeroDuration() ? lead : AutoLead(members);
  return NowMillis() + absl::ToInt64Milliseconds(chosen);
}

bool ReportPut(const std::string& peer, const PutUnits& units, size_t batch, int concurrency,
               const LoadOutcome& out) {
  const double secs = absl::ToDoubleSeconds(out.elapsed);
  const double rate = static_cast<double>(out.members) / secs;
  Table table({"put", "value"});
  table.Add({"members written", absl::StrCat(out.members)});
  table.Add({"elapsed (s)", FormatSeconds(out.elapsed)});
  table.Add({"members/s", FormatCount(rate)});
  table.Add({units.rate, FormatCount(static_cast<double>(out.requests) / secs)});
  table.AddLatency(units.latency, out.latency);
  table.Add({"errors", absl::StrCat(out.errors)});
  table.Print();
  if (!out.first_error.empty()) std::printf("  first error: %s\n", out.first_error.c_str());
  Result result(peer, "put");
  result.Add("members", out.members);
  result.Add("elapsed_s", secs);
  result.Add("members_per_s", rate);
  result.Add("batch", static_cast<uint64_t>(batch));
  result.Add("concurrency", static_cast<int64_t>(concurrency));
  result.AddLatency("rpc", out.latency);
  result.Add("errors", out.errors);
  result.Print();
  return out.errors == 0;
}

void AwaitExpiries(const ExpiryLedger& ledger, uint64_t n, const ExpiryWait& wait,
                   const std::function<void()>& reconnect) {
  Progress progress([&ledger, n, &wait] {
    return absl::StrCat(wait.scenario, ": ", ledger.received(), " / ", n, " ", wait.noun);
  });
  if (wait.reconnect_at > absl::ZeroDuration()) {
    SleepUntilMillis(wait.first_deadline_ms + absl::ToInt64Milliseconds(wait.reconnect_at));
    reconnect();
  }
  ledger.WaitForAll(absl::FromUnixMillis(wait.last_deadline_ms) + wait.drain_timeout);
}

ExpiryTally Tally(const ExpiryLedger& ledger, uint64_t expected) {
  ExpiryTally tally;
  tally.received = ledger.received();
  tally.lost = expected - std::min(expected, tally.received);
  tally.duplicates = ledger.duplicates();
  tally.latency = ledger.Summarize();
  return tally;
}

Result ExpiryLatencyResult(const std::string& peer, uint64_t members, const ExpiryTiming& timing,
                           const ExpiryTally& tally) {
  Result result(peer, timing.reconnect_at > absl::ZeroDuration() ? "reconnect" : "expiry-latency");
  result.Add("members", members);
  result.Add("spread_s", absl::ToDoubleSeconds(timing.spread));
  AddTally(tally, result);
  result.AddLatency("event", tally.latency);
  return result;
}

void AddExpiryLatencyRows(uint64_t members, const LoadOutcome& load, const ExpiryTally& tally,
                          const std::string& unit, const std::string& received, Table& table) {
  table.Add({"members (pending at first deadline)", absl::StrCat(members)});
  table.Add({"load members/s",
             FormatCount(static_cast<double>(load.members) / absl::ToDoubleSeconds(load.elapsed))});
  table.Add({absl::StrCat(unit, " expected"), absl::StrCat(members)});
  table.Add({absl::StrCat(unit, " ", received), absl::StrCat(tally.received)});
  table.Add({absl::StrCat(unit, " lost"), absl::StrCat(tally.lost)});
  table.Add({"duplicates", absl::StrCat(tally.duplicates)});
  table.AddLatency("received - deadline", tally.latency);
  table.Add({"received - deadline min (ms)", FormatMs(tally.latency.min_us)});
}

DrainTimes DrainTimesFor(const ExpiryLedger& ledger, int64_t deadline_ms) {
  DrainTimes times;
  const int64_t deadline_us = deadline_ms * 1000;
  times.first_us = ledger.first_received_us() - deadline_us;
  times.all_us = ledger.last_received_us() - deadline_us;
  times.rate = times.all_us > 0 ? static_cast<double>(ledger.received()) * 1e6 /
                                      static_cast<double>(times.all_us)
                                : 0;
  return times;
}

Result DrainResult(const std::string& peer, uint64_t members, const DrainTimes& times) {
  Result result(peer, "drain");
  result.Add("members", members);
  result.Add("first_ms", static_cast<double>(times.first_us) / 1000.0);
  result.Add("all_ms", static_cast<double>(times.all_us) / 1000.0);
  result.Add("events_per_s", times.rate);
  return result;
}

void AddTally(const ExpiryTally& tally, Result& result) {
  result.Add("received", tally.received);
  result.Add("lost", tally.lost);
  result.Add("duplicates", tally.duplicates);
}

}  // namespace load
}  // namespace lapse

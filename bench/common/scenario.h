// Scenario: the steps lapse-bench and lapse-redis-bench take alike in their
// put, expiry-latency and drain scenarios, so both measure and report the
// same way: when the first deadline falls, how the put scenario reports, how
// long a watch scenario waits for its notifications (with an optional
// mid-run reconnect), and what its ledger says.
//
//   const int64_t first_ms = lapse::load::FirstDeadlineMs(options.timing.lead, n);
//   ... load n members, start watching ...
//   lapse::load::AwaitExpiries(ledger, n, {"drain", "events", first_ms, first_ms,
//                                          absl::ZeroDuration(), drain_timeout},
//                              nullptr);
//   const lapse::load::ExpiryTally tally = lapse::load::Tally(ledger, n);
//
// Functions that print write to stdout (stderr for progress). Not
// thread-safe: a scenario runs on one thread.
#ifndef LAPSE_BENCH_COMMON_SCENARIO_H_
#define LAPSE_BENCH_COMMON_SCENARIO_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "bench/common/ledger.h"
#include "bench/common/load_plan.h"
#include "bench/common/report.h"

namespace lapse {
namespace load {

// The lead used when --lead is zero: enough to load `members` at a
// pessimistic 100k members/s (a busy shared machine), plus two seconds.
absl::Duration AutoLead(uint64_t members);

// The first deadline of a watch scenario, in wall-clock milliseconds: `lead`
// from now, or AutoLead(members) when `lead` is zero.
int64_t FirstDeadlineMs(absl::Duration lead, uint64_t members);

// When a watch scenario's members expire and how long it waits for their
// notifications (the flags --spread, --lead, --drain-timeout, --reconnect-at
// and --reconnect-pause, see load_flags.h).
struct ExpiryTiming {
  // expiry-latency: deadlines are spread over this window.
  absl::Duration spread = absl::Seconds(10);
  // From the start of loading to the first deadline; zero picks AutoLead.
  absl::Duration lead = absl::ZeroDuration();
  // How long after the last deadline to wait for stragglers.
  absl::Duration drain_timeout = absl::Seconds(5);
  // expiry-latency: when (after the first deadline) the watcher drops its
  // stream, and for how long it stays away; zero: never.
  absl::Duration reconnect_at = absl::ZeroDuration();
  absl::Duration reconnect_pause = absl::Seconds(1);
};

// How the put scenario names what carried one batch.
struct PutUnits {
  // e.g. "RPCs/s" or "batches/s".
  std::string rate;
  // e.g. "RPC latency" or "batch latency".
  std::string latency;
};

// Prints the put scenario's table and RESULT line; returns whether the load
// saw no error.
bool ReportPut(const std::string& peer, const PutUnits& units, size_t batch, int concurrency,
               const LoadOutcome& out);

// What a watch scenario waits for.
struct ExpiryWait {
  // The progress line: "<scenario>: <received> / <n> <noun>".
  std::string scenario;
  std::string noun;
  int64_t first_deadline_ms = 0;
  int64_t last_deadline_ms = 0;
  // This long after the first deadline the watcher reconnects; zero: never.
  absl::Duration reconnect_at = absl::ZeroDuration();
  // How long after the last deadline to wait for stragglers.
  absl::Duration drain_timeout = absl::ZeroDuration();
};

// Waits until `ledger` has all `n` members or the last deadline plus the
// drain timeout has passed, printing progress on long waits. With a
// reconnect_at, sleeps until then and calls `reconnect` (which reports and
// re-establishes the watch) first.
void AwaitExpiries(const ExpiryLedger& ledger, uint64_t n, const ExpiryWait& wait,
                   const std::function<void()>& reconnect);

// What a ledger says about the members a run expected (see also
// ExpiryLedger::unknown).
struct ExpiryTally {
  uint64_t received = 0;
  uint64_t lost = 0;
  uint64_t duplicates = 0;
  // received - deadline, per member.
  LatencySummary latency;

  // No member lost or notified twice, and no `errors` besides.
  bool Clean(uint64_t errors) const { return lost == 0 && duplicates == 0 && errors == 0; }
};

ExpiryTally Tally(const ExpiryLedger& ledger, uint64_t expected);

// The expiry-latency RESULT line up to its peer-specific fields: members,
// spread_s, received, lost, duplicates and the event latency. The scenario is
// "reconnect" when the timing had the watcher reconnect mid-run.
Result ExpiryLatencyResult(const std::string& peer, uint64_t members, const ExpiryTiming& timing,
                           const ExpiryTally& tally);

// The expiry-latency table's rows every peer shows, from its members to the
// least received - deadline. A peer names what it counts: `unit` is "events"
// or "members", `received` says how they came ("received", "notified").
void AddExpiryLatencyRows(uint64_t members, const LoadOutcome& load, const ExpiryTally& tally,
                          const std::string& unit, const std::string& received, Table& table);

// When a drain's notifications arrived, relative to the shared deadline.
struct DrainTimes {
  int64_t first_us = 0;
  // The last one (all of them when none was lost).
  int64_t all_us = 0;
  // Members notified per second, from the deadline to the last one.
  double rate = 0;
};

DrainTimes DrainTimesFor(const ExpiryLedger& ledger, int64_t deadline_ms);

// The drain RESULT line up to its peer-specific fields: members, first_ms,
// all_ms and events_per_s.
Result DrainResult(const std::string& peer, uint64_t members, const DrainTimes& times);

// Adds received, lost and duplicates to a RESULT line.
void AddTally(const ExpiryTally& tally, Result& result);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_SCENARIO_H_

// lapse-redis-bench's scenarios: lapse-bench's put, expiry-latency, drain and
// group (bench/load/lapse_scenarios.h) against the Redis recipes users would pick
// instead of lapse, with the same members (bench/common/members.h), the same
// batch (one pipelined batch per lapse RPC), the same concurrency (batches in
// flight) and the same output (tables and a RESULT line that
// bench/compare/run.sh collects). Each returns false when it saw an error or
// lost a notification.
//
//   lapse::compare::Options options = ...;
//   if (options.mode == lapse::compare::Mode::kHfe && !CheckHfe(options).ok()) ...
//   bool ok = lapse::compare::RunDrain(options);
//
// Each Run* call is blocking and self-contained (its own connections).
#ifndef LAPSE_BENCH_COMPARE_REDIS_SCENARIOS_H_
#define LAPSE_BENCH_COMPARE_REDIS_SCENARIOS_H_

#include "absl/status/status.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

bool RunPut(const Options& o);
bool RunExpiryLatency(const Options& o);
bool RunDrain(const Options& o);
// The classic recipe's poller XADDs each due member to a stream (o.channel)
// that a consumer group of o.group.consumers StreamConsumers reads and
// acknowledges: lapse-bench's group scenario (GroupLedger, ReportGroup).
bool RunGroup(const Options& o);

// Whether the server has native hash-field expiration; also turns on the
// `hexpired` keyspace events the hfe subscriber listens to.
absl::Status CheckHfe(const Options& o);

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_SCENARIOS_H_

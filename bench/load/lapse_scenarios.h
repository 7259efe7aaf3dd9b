// lapse-bench's scenarios against a running lapsed. Each prints a table, then
// one RESULT line (report.h), and returns false when it saw an RPC error, a
// watch stream failure, or a lost or duplicated expiry event.
//
//   put             members/s of batched PutMembers at a given concurrency.
//   expiry-latency  N members with deadlines spread over T seconds, one
//                   watcher: received - deadline percentiles, lost events.
//                   With reconnect_at the watcher drops and resumes by
//                   sequence mid-way.
//   drain           M members sharing one deadline: time until the watcher
//                   has all M events.
//   group           M members expiring at once (or spread) read by a consumer
//                   group of K consumers, each on its own Consume stream,
//                   acking every delivery: events/s acked, ack - deadline
//                   percentiles, each member acked exactly once; with
//                   group.kill_consumer one consumer dies holding events:
//                   death to ack by another, minus the visibility timeout.
//   mixed           puts, gets, expires and removes at a fixed rate with K
//                   watchers; per-op latency (from the intended send time, so
//                   a stall is not hidden) and errors, events lost per watcher.
//
//   lapse::load::ScenarioOptions options;
//   options.addr = "127.0.0.1:50051";
//   bool ok = lapse::load::RunDrain(options);
//
// Each Run* call is blocking and self-contained (its own channels). RunMixed
// and ParseOpMix live in mixed_run.cc, RunGroup in group_run.cc, the others
// in lapse_scenarios.cc.
#ifndef LAPSE_BENCH_LOAD_LAPSE_SCENARIOS_H_
#define LAPSE_BENCH_LOAD_LAPSE_SCENARIOS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/common/group_ledger.h"
#include "bench/common/scenario.h"
#include "bench/load/lapse_load.h"

namespace lapse {
namespace load {

// Relative weights of the mixed scenario's operations.
struct OpMix {
  int put = 40;
  int get = 30;
  int expire = 15;
  int remove = 15;
};

// "put=40,get=30,expire=15,remove=15" (missing ones are 0).
absl::StatusOr<OpMix> ParseOpMix(absl::string_view text);

struct ScenarioOptions {
  // The name on RESULT lines, e.g. "lapse" or "lapse-durable".
  std::string peer = "lapse";
  std::string addr = "127.0.0.1:50051";
  int channels = 1;
  // See MakeStubs; 0 keeps gRPC's default.
  int lookahead_bytes = 0;
  // Plaintext unless set (--tls_*), with a bearer token when set (--token_file).
  ChannelSecurity security;
  Shape shape;
  // put, expiry-latency and drain: members written (put: or for `duration`).
  uint64_t members = 0;
  absl::Duration duration = absl::ZeroDuration();
  // put and mixed: the TTL of every member written.
  absl::Duration ttl = absl::Hours(1);
  // put: through the C++ client library (client_puts.h), not the stubs.
  bool client_library = false;
  // put: go on writing after a failed RPC, counting the errors (LoadPlan's
  // stop_on_error), to measure a stall while a fault is injected.
  bool keep_going = false;
  // expiry-latency and drain (mixed: its drain_timeout).
  ExpiryTiming timing;
  bool include_values = true;
  // group.
  GroupShape group;
  // mixed.
  double rate = 2000;
  int watchers = 2;
  OpMix mix;
};

bool RunPut(const ScenarioOptions& options);
bool RunExpiryLatency(const ScenarioOptions& options);
bool RunDrain(const ScenarioOptions& options);
bool RunMixed(const ScenarioOptions& options);
bool RunGroup(const ScenarioOptions& options);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_LAPSE_SCENARIOS_H_

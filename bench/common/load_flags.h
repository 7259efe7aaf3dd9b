// The flags lapse-bench and lapse-redis-bench share, defined once, with the
// same names, defaults and meaning: what each member looks like, how members are
// batched and spread over collections, how many are written, when they
// expire and are waited for, and the consumer group that reads them. Each tool defines its other
// flags itself
// (--addr, --host, --ttl, --concurrency, ...), whose meaning differs.
//
//   absl::ParseCommandLine(argc, args.data());
//   if (absl::Status s = lapse::load::CheckLoadFlags(); !s.ok()) ...
//   options.timing = lapse::load::ExpiryTimingFromFlags();
//
// Read after absl::ParseCommandLine; thread-compatible.
#ifndef LAPSE_BENCH_COMMON_LOAD_FLAGS_H_
#define LAPSE_BENCH_COMMON_LOAD_FLAGS_H_

#include <cstdint>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/common/group_ledger.h"
#include "bench/common/scenario.h"

ABSL_DECLARE_FLAG(int32_t, batch);
ABSL_DECLARE_FLAG(int32_t, key_bytes);
ABSL_DECLARE_FLAG(int32_t, value_bytes);
ABSL_DECLARE_FLAG(int64_t, collections);
ABSL_DECLARE_FLAG(int64_t, members);
ABSL_DECLARE_FLAG(absl::Duration, spread);
ABSL_DECLARE_FLAG(absl::Duration, lead);
ABSL_DECLARE_FLAG(absl::Duration, drain_timeout);
ABSL_DECLARE_FLAG(absl::Duration, reconnect_at);
ABSL_DECLARE_FLAG(absl::Duration, reconnect_pause);
ABSL_DECLARE_FLAG(int32_t, consumers);
ABSL_DECLARE_FLAG(int32_t, max_in_flight);
ABSL_DECLARE_FLAG(absl::Duration, visibility_timeout);
ABSL_DECLARE_FLAG(bool, kill_consumer);

namespace lapse {
namespace load {

// INVALID_ARGUMENT, with a message for the user, when --batch, --key_bytes,
// --value_bytes or --collections is out of range.
absl::Status CheckLoadFlags();

// --consumers, --max-in-flight, --visibility-timeout and --kill-consumer, or
// INVALID_ARGUMENT naming the flag out of range.
absl::StatusOr<GroupShape> GroupShapeFromFlags();

// --spread, --lead, --drain-timeout, --reconnect-at and --reconnect-pause.
ExpiryTiming ExpiryTimingFromFlags();

// `members`, or when it is 0 the scenario's default: put 500000 (unless it
// runs for a `duration`), expiry-latency and drain 100000, group 20000.
uint64_t MembersFor(absl::string_view scenario, uint64_t members, absl::Duration duration);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_LOAD_FLAGS_H_

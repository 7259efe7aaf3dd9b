// LoadFlags: the flags lapse-bench and lapse-redis-bench share, with the same
// names, defaults and meaning: what each member looks like, how members are
// batched and spread over collections, how many are written, and when they
// expire and are waited for. Each tool defines its other flags itself
// (--addr, --host, --ttl, --concurrency, ...), whose meaning differs.
//
//   absl::ParseCommandLine(argc, args.data());
//   absl::StatusOr<lapse::load::LoadFlags> flags =
//       lapse::load::LoadFlagsFromCommandLine();
//   if (!flags.ok()) return Fail(std::string(flags.status().message()));
//
// Read after absl::ParseCommandLine; thread-compatible.
#ifndef LAPSE_BENCH_COMMON_LOAD_FLAGS_H_
#define LAPSE_BENCH_COMMON_LOAD_FLAGS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse {
namespace load {

struct LoadFlags {
  size_t batch = 100;
  size_t key_bytes = 16;
  size_t value_bytes = 16;
  uint64_t collections = 1000;
  // As given (0: the scenario's default, see MembersFor); may be negative,
  // which each tool treats in its own way.
  int64_t members = 0;
  absl::Duration spread;
  absl::Duration lead;
  absl::Duration drain_timeout;
  absl::Duration reconnect_at;
  absl::Duration reconnect_pause;
};

// The flags above; INVALID_ARGUMENT, with a message for the user, when
// --batch, --key_bytes, --value_bytes or --collections is out of range.
absl::StatusOr<LoadFlags> LoadFlagsFromCommandLine();

// `members`, or when it is 0 the scenario's default: put 500000 (unless it
// runs for a `duration`), expiry-latency and drain 100000.
uint64_t MembersFor(absl::string_view scenario, uint64_t members, absl::Duration duration);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_LOAD_FLAGS_H_

// Deadlines: the one home of "no deadline" and of the conversions between
// absl::Time and the whole Unix milliseconds that deadlines are kept in.
//
// Inside the engine, in the journal and in snapshots a deadline is an int64_t
// of Unix milliseconds, and kNoDeadlineMs marks a member that never expires.
// At the API it is an absl::Time, and NoDeadline() plays that role.
//
//   int64_t ms = lapse::CeilMillis(now + ttl);   // never before the time asked for
//   absl::Time t = lapse::TimeOfDeadline(ms);    // NoDeadline() for kNoDeadlineMs
//
// Constants and pure functions: safe from any thread.
#ifndef LAPSE_SERVER_BASE_DEADLINE_H_
#define LAPSE_SERVER_BASE_DEADLINE_H_

#include <cstdint>
#include <limits>

#include "absl/time/time.h"

namespace lapse {

// The deadline, in Unix milliseconds, of a member that never expires. Greater
// than every real deadline, so "earliest deadline" needs no special case.
inline constexpr int64_t kNoDeadlineMs = std::numeric_limits<int64_t>::max();

// The range of deadlines the engine stores: a member keeps its deadline in 48
// bits (server/engine/collection.h). From about the year -2489 to the year
// 6429; requests for later deadlines are refused (validate.h).
inline constexpr int64_t kEarliestDeadlineMs = -(int64_t{1} << 47);
inline constexpr int64_t kLatestDeadlineMs = (int64_t{1} << 47) - 2;

// The deadline of a member that never expires, as a time.
inline absl::Time NoDeadline() { return absl::InfiniteFuture(); }

// `t` in whole Unix milliseconds, rounded toward the infinite past.
inline int64_t FloorMillis(absl::Time t) { return absl::ToUnixMillis(t); }

// `t` in whole Unix milliseconds, rounded toward the infinite future: a
// deadline rounded up never passes before the time asked for.
inline int64_t CeilMillis(absl::Time t) {
  int64_t ms = absl::ToUnixMillis(t);
  if (ms != std::numeric_limits<int64_t>::max() && absl::FromUnixMillis(ms) < t) ++ms;
  return ms;
}

// The time of a deadline in milliseconds; NoDeadline() for kNoDeadlineMs.
inline absl::Time TimeOfDeadline(int64_t deadline_ms) {
  return deadline_ms == kNoDeadlineMs ? NoDeadline() : absl::FromUnixMillis(deadline_ms);
}

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_DEADLINE_H_

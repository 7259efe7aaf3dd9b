// GroupLedger: which expiry events a consumer group acknowledged, when, and
// by which consumer; and, when one consumer of the group dies holding
// events, how long after its death each of them was acknowledged by another.
// The group scenarios of lapse-bench (bench/load/group_run.cc, over the
// Consume stream) and of lapse-redis-bench (bench/compare/redis_group.cc,
// Redis Streams consumer groups) count and report through it alike.
//
// A consumer hands every acknowledgement the server accepted to Acked with
// the member's index (from its key, see members.h) and its deadline. An event
// acknowledged twice (by two consumers, or twice by one) is a duplicate: the
// run fails unless every member was acknowledged exactly once.
//
//   lapse::load::GroupLedger ledger(/*expected=*/20000, /*consumers=*/3);
//   ledger.Acked(1, {{.index = 42, .deadline_us = d, .acked_us = NowMicros()}});
//   lapse::load::AwaitExpiries(ledger.acks(), 20000, {...}, nullptr);
//   bool ok = lapse::load::ReportGroup(run, ledger, /*other_errors=*/0);
//
// Thread-safe.
#ifndef LAPSE_BENCH_COMMON_GROUP_LEDGER_H_
#define LAPSE_BENCH_COMMON_GROUP_LEDGER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bench/common/ledger.h"
#include "bench/common/load_plan.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

// The group every group scenario reads with (the flags --consumers,
// --max-in-flight, --visibility-timeout and --kill-consumer, see
// load_flags.h).
struct GroupShape {
  int consumers = 3;
  // lapse: the Consume stream's max_in_flight (and the group's
  // max_unacked_per_consumer); Redis: XREADGROUP's COUNT.
  int max_in_flight = 100;
  // lapse: the group's visibility timeout; Redis: XAUTOCLAIM's min-idle-time.
  absl::Duration visibility_timeout = absl::Seconds(1);
  // Consumer 0 dies (its stream cancelled, its connection closed) once it
  // holds max_in_flight events, without acknowledging them.
  bool kill_consumer = false;
};

// One accepted acknowledgement.
struct GroupAck {
  uint64_t index = 0;
  int64_t deadline_us = 0;
  int64_t acked_us = 0;
};

class GroupLedger {
 public:
  GroupLedger(uint64_t expected, int consumers);
  GroupLedger(const GroupLedger&) = delete;
  GroupLedger& operator=(const GroupLedger&) = delete;

  // Acknowledgements of consumer `consumer` (0-based) the server accepted.
  void Acked(int consumer, absl::Span<const GroupAck> acks);
  // Consumer death: it held the members `held` (indices) when it died at
  // `died_us`.
  void Died(absl::Span<const uint64_t> held, int64_t died_us);
  // Something that should not happen: an acknowledgement refused, an event
  // naming no member of this run, a value that is not the one written.
  void Error(const std::string& what, uint64_t n = 1);

  // Distinct members acknowledged (received), duplicates, ack - deadline.
  const ExpiryLedger& acks() const { return acks_; }
  // Acknowledgements per consumer, duplicates included.
  std::vector<uint64_t> per_consumer() const;
  uint64_t errors() const;
  std::string first_error() const;
  // How many members the dead consumer held, and when it died (0: none died).
  size_t held() const;
  int64_t died_us() const;
  // One sample per member the dead consumer held and another acknowledged:
  // acked - died - `minus`.
  LatencySummary SummarizeRedelivery(absl::Duration minus) const;

 private:
  ExpiryLedger acks_;

  mutable absl::Mutex mu_;
  // First accepted acknowledgement per member; 0: none yet.
  std::vector<int64_t> acked_us_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> per_consumer_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> held_ ABSL_GUARDED_BY(mu_);
  int64_t died_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

// What a group run was, for its report.
struct GroupRun {
  std::string peer;
  GroupShape shape;
  uint64_t members = 0;
  // Deadlines spread over this window from the first; zero: one shared
  // deadline (a burst).
  absl::Duration spread;
  int64_t first_deadline_ms = 0;
  LoadOutcome load;
};

// The last deadline of a group run plus how long redelivery may take: what
// AwaitExpiries waits for after it (with its drain timeout).
int64_t GroupWaitUntilMs(const GroupRun& run);

// Prints the group table and one RESULT line (scenario "group", or
// "group-redelivery" when a consumer was killed); returns whether every
// member was acknowledged exactly once and nothing went wrong (the ledger's
// errors plus `other_errors`).
bool ReportGroup(const GroupRun& run, const GroupLedger& ledger, uint64_t other_errors);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_GROUP_LEDGER_H_

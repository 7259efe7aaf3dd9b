// ExpiryLedger: which expiry notifications a watcher received, how late, and
// which it never received.
//
// A watcher (a lapse WatchExpirations stream, a Redis SUBSCRIBE client) hands
// every notification it gets to Deliver with the member's index (from its
// key, see members.h), its deadline and when the notification arrived. The
// ledger counts each member once, counts duplicates apart, and keeps one
// latency sample (received - deadline) per first delivery.
//
//   lapse::load::ExpiryLedger ledger(/*expected=*/100000);
//   ledger.Deliver({{.index = 42, .deadline_us = d, .received_us = now}});
//   ledger.WaitForAll(absl::Now() + absl::Seconds(5));
//   uint64_t lost = ledger.expected() - ledger.received();
//
// Thread-safe.
#ifndef LAPSE_BENCH_COMMON_LEDGER_H_
#define LAPSE_BENCH_COMMON_LEDGER_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {

struct Delivery {
  uint64_t index = 0;
  int64_t deadline_us = 0;
  int64_t received_us = 0;
  // When the server says it expired the member; 0 when the notification does
  // not say (Redis).
  int64_t expired_us = 0;
};

class ExpiryLedger {
 public:
  // `expected` may be set (or raised) later with set_expected.
  explicit ExpiryLedger(uint64_t expected = 0);
  ExpiryLedger(const ExpiryLedger&) = delete;
  ExpiryLedger& operator=(const ExpiryLedger&) = delete;

  void set_expected(uint64_t expected);
  // One notification's worth (or one batch's) under a single lock.
  void Deliver(absl::Span<const Delivery> deliveries);
  // A notification that names no member this run wrote.
  void DeliverUnknown(uint64_t n = 1);

  // Waits until every expected member was received or `deadline` passes.
  // Returns whether all were.
  bool WaitForAll(absl::Time deadline) const;

  uint64_t expected() const;
  // Distinct members received.
  uint64_t received() const;
  uint64_t duplicates() const;
  uint64_t unknown() const;
  // Wall clock (µs) of the first and the latest first delivery; 0 if none.
  int64_t first_received_us() const;
  int64_t last_received_us() const;
  // Distinct members received among those whose `mask` byte is non-zero.
  uint64_t ReceivedAmong(absl::Span<const uint8_t> mask) const;
  // One sample per distinct member: received - deadline.
  LatencySummary Summarize() const;
  // One sample per distinct member whose notification carried expired_us:
  // expired - deadline, the server's own share of the latency.
  LatencySummary SummarizeExpiryLag() const;

 private:
  mutable absl::Mutex mu_;
  uint64_t expected_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t> seen_ ABSL_GUARDED_BY(mu_);
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unknown_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t first_received_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_received_us_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> latencies_us_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> expiry_lags_us_ ABSL_GUARDED_BY(mu_);
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_LEDGER_H_

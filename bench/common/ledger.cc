#include "bench/common/ledger.h"

#include <algorithm>

namespace lapse {
namespace load {

ExpiryLedger::ExpiryLedger(uint64_t expected) : expected_(expected) {
  seen_.resize(expected, 0);
  latencies_us_.reserve(expected);
}

void ExpiryLedger::set_expected(uint64_t expected) {
  absl::MutexLock lock(&mu_);
  expected_ = expected;
  if (seen_.size() < expected) seen_.resize(expected, 0);
}

void ExpiryLedger::Deliver(absl::Span<const Delivery> deliveries) {
  absl::MutexLock lock(&mu_);
  for (const Delivery& d : deliveries) {
    if (d.index >= seen_.size()) {
      // Only the open-ended mixed scenario grows the ledger as it goes.
      seen_.resize(std::max<uint64_t>(d.index + 1, seen_.size() * 2), 0);
    }
    if (seen_[d.index] != 0) {
      ++duplicates_;
      continue;
    }
    seen_[d.index] = 1;
    ++received_;
    if (first_received_us_ == 0) first_received_us_ = d.received_us;
    last_received_us_ = std::max(last_received_us_, d.received_us);
    latencies_us_.push_back(d.received_us - d.deadline_us);
    if (d.expired_us != 0) expiry_lags_us_.push_back(d.expired_us - d.deadline_us);
  }
}

void ExpiryLedger::DeliverUnknown(uint64_t n) {
  absl::MutexLock lock(&mu_);
  unknown_ += n;
}

bool ExpiryLedger::WaitForAll(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  const auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return received_ >= expected_; };
  return mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
}

uint64_t ExpiryLedger::expected() const {
  absl::MutexLock lock(&mu_);
  return expected_;
}
uint64_t ExpiryLedger::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}
uint64_t ExpiryLedger::duplicates() const {
  absl::MutexLock lock(&mu_);
  return duplicates_;
}
uint64_t ExpiryLedger::unknown() const {
  absl::MutexLock lock(&mu_);
  return unknown_;
}
int64_t ExpiryLedger::first_received_us() const {
  absl::MutexLock lock(&mu_);
  return first_received_us_;
}
int64_t ExpiryLedger::last_received_us() const {
  absl::MutexLock lock(&mu_);
  return last_received_us_;
}

uint64_t ExpiryLedger::ReceivedAmong(absl::Span<const uint8_t> mask) const {
  absl::MutexLock lock(&mu_);
  const size_t end = std::min(mask.size(), seen_.size());
  uint64_t count = 0;
  for (size_t i = 0; i < end; ++i) count += (mask[i] != 0 && seen_[i] != 0) ? 1 : 0;
  return count;
}

LatencySummary ExpiryLedger::Summarize() const {
  LatencyRecorder recorder;
  {
    absl::MutexLock lock(&mu_);
    recorder.RecordAll(latencies_us_);
  }
  return recorder.Summarize();
}

LatencySummary ExpiryLedger::SummarizeExpiryLag() const {
  LatencyRecorder recorder;
  {
    absl::MutexLock lock(&mu_);
    recorder.RecordAll(expiry_lags_us_);
  }
  return recorder.Summarize();
}

}  // namespace load
}  // namespace lapse

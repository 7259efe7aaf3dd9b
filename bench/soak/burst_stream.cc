#include "bench/soak/burst_stream.h"

namespace lapse {
namespace soak {

void BurstTally::Count(Stage stage) {
  absl::MutexLock lock(&mu_);
  ++counts_[stage];
}

bool BurstTally::WaitFor(Stage stage, size_t count, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto reached = [this, stage, count]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counts_[stage] >= count; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

size_t BurstTally::count(Stage stage) {
  absl::MutexLock lock(&mu_);
  return counts_[stage];
}

BurstStream::BurstStream(load::Stub* stub, const v1::WatchExpirationsRequest& request,
                         size_t events, BurstTally* tally)
    : want_(events), tally_(tally) {
  stub->async()->WatchExpirations(&context_, &request, this);
  StartCall();
}

void BurstStream::OnReadInitialMetadataDone(bool ok) {
  if (!ok) return;
  tally_->Count(BurstTally::kReady);
  StartRead(&response_);
}

void BurstStream::OnReadDone(bool ok) {
  if (!ok) return;
  seen_ += static_cast<size_t>(response_.events_size());
  if (seen_ >= want_) {
    tally_->Count(BurstTally::kFilled);
    return;
  }
  StartRead(&response_);
}

void BurstStream::OnDone(const grpc::Status&) { tally_->Count(BurstTally::kDone); }

}  // namespace soak
}  // namespace lapse

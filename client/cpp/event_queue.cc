#include "client/cpp/event_queue.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace lapse::client::internal {

EventQueue::EventQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void EventQueue::Push(const ExpiryEvent& event) {
  MutexLock lock(&mu_);
  while (!closed_ && events_.size() >= capacity_) {
    cv_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
  }
  if (closed_) return;
  events_.push_back(event);
  cv_.SignalAll();
}

void EventQueue::End(const absl::Status& status) {
  MutexLock lock(&mu_);
  if (end_.ok()) end_ = status;
  cv_.SignalAll();
}

void EventQueue::Close() {
  MutexLock lock(&mu_);
  closed_ = true;
  events_.clear();
  end_ = absl::CancelledError("the watch was cancelled");
  cv_.SignalAll();
}

absl::StatusOr<ExpiryEvent> EventQueue::Next(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (events_.empty() && end_.ok()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("no event within the timeout");
    }
    cv_.WaitWithTimeout(&mu_, left);
  }
  if (events_.empty()) return end_;
  ExpiryEvent event = std::move(events_.front());
  events_.pop_front();
  cv_.SignalAll();
  return event;
}

}  // namespace lapse::client::internal

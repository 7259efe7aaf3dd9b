#include "client/cpp/event_queue.h"

#include <algorithm>
#include <utility>

namespace lapse::client::internal {

EventQueue::EventQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void EventQueue::Push(const ExpiryEvent& event) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || events_.size() < capacity_;
  };
  mu_.Await(absl::Condition(&room));
  if (closed_) return;
  events_.push_back(event);
}

void EventQueue::End(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (end_.ok()) end_ = status;
}

void EventQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  events_.clear();
  end_ = absl::CancelledError("the watch was cancelled");
}

absl::StatusOr<ExpiryEvent> EventQueue::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !events_.empty() || !end_.ok();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError("no event within the timeout");
  }
  if (events_.empty()) return end_;
  ExpiryEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

}  // namespace lapse::client::internal

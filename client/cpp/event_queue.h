// EventQueue: the bounded queue between a Subscription's thread and
// EventStream::Next().
//
//   handlers.on_event = [queue](const ExpiryEvent& e) { queue->Push(e); };
//   handlers.on_error = [queue](const absl::Status& s) { queue->End(s); };
//   absl::StatusOr<ExpiryEvent> event = queue->Next(absl::Seconds(1));
//
// Push blocks while the queue is full, which holds back the subscription's
// next read (and so the server's stream). Thread-safe.
#ifndef LAPSE_CLIENT_CPP_EVENT_QUEUE_H_
#define LAPSE_CLIENT_CPP_EVENT_QUEUE_H_

#include <cstddef>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lapse/client.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

class EventQueue final {
 public:
  explicit EventQueue(size_t capacity);
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Appends `event`, waiting for room; drops it once the queue is closed.
  void Push(const ExpiryEvent& event);
  // The subscription ended with `status`; Next() returns it once the queue
  // is drained.
  void End(const absl::Status& status);
  // Cancelled: drops what is queued, wakes everyone, and Next() returns
  // CANCELLED from now on.
  void Close();

  // See EventStream::Next.
  absl::StatusOr<ExpiryEvent> Next(absl::Duration timeout);

 private:
  // Constant after construction.
  const size_t capacity_;

  // State below is protected by mu_; cv_ is signalled on every change.
  Mutex mu_;
  CondVar cv_;
  std::deque<ExpiryEvent> events_ ABSL_GUARDED_BY(mu_);
  // OK until the subscription ends or the queue is closed.
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_EVENT_QUEUE_H_

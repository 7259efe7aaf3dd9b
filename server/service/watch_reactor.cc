#include "server/service/watch_reactor.h"

#include <cassert>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/service/proto_convert.h"

namespace lapse {

WatchReactor::WatchReactor(WatchHub* hub, const EventSource* events, EventFilter filter,
                           uint64_t after)
    : hub_(hub),
      events_(events),
      filter_(std::move(filter)),
      read_limits_(hub->options().read_limits),
      heartbeat_interval_(hub->options().heartbeat_interval),
      cursor_(after),
      sent_sequence_(after),
      last_write_(absl::Now()) {
  // Headers go out at once so a client can tell that its stream is in place
  // (its start position fixed) before the first event.
  StartSendInitialMetadata();
  if (!hub_->Register(this)) {
    Shutdown();
    return;
  }
  // The hub may already have polled (or shut down) this stream.
  MutexLock lock(&mu_);
  if (!finished_ && !write_in_flight_) SendNextBatchLocked();
}

void WatchReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (!ok) {
    FinishOnceLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch stream closed"));
    return;
  }
  if (!finished_) SendNextBatchLocked();
}

void WatchReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishOnceLocked(grpc::Status::CANCELLED);
}

void WatchReactor::OnDone() {
  hub_->Unregister(this);
  Unref();
}

void WatchReactor::Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }

void WatchReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

absl::Time WatchReactor::Poll(bool new_events, absl::Time now) {
  MutexLock lock(&mu_);
  if (finished_) return absl::InfiniteFuture();
  if (new_events && !write_in_flight_) SendNextBatchLocked();
  if (!finished_ && !write_in_flight_ && now - last_write_ >= heartbeat_interval_) {
    response_.clear_events();
    WriteLocked(now);
  }
  // A stream with a write stuck in flight (a client that does not read) is
  // looked at again one interval from now rather than at once.
  const absl::Time due = last_write_ + heartbeat_interval_;
  return due > now ? due : now + heartbeat_interval_;
}

void WatchReactor::Shutdown() {
  MutexLock lock(&mu_);
  FinishOnceLocked(
      grpc::Status(grpc::StatusCode::UNAVAILABLE,
                   absl::StrCat("server shutting down; last delivered sequence ", sent_sequence_)));
}

void WatchReactor::SendNextBatchLocked() {
  assert(!write_in_flight_);
  // Reads that match nothing only move the cursor; keep reading until a batch
  // has events or the log has nothing more, so no empty message goes out.
  while (true) {
    absl::StatusOr<EventBatch> batch = events_->Read(cursor_, filter_, read_limits_);
    if (!batch.ok()) {
      FinishOnceLocked(ToGrpcStatus(batch.status()));
      return;
    }
    const bool advanced = batch->examined_sequence > cursor_;
    if (advanced) cursor_ = batch->examined_sequence;
    if (!batch->events.empty()) {
      response_.clear_events();
      for (const ExpiryEvent& event : batch->events) {
        ExpiryEventToProto(event, filter_.include_values, response_.add_events());
      }
      WriteLocked(absl::Now());
      return;
    }
    if (!advanced || cursor_ >= events_->last_sequence()) return;
  }
}

void WatchReactor::WriteLocked(absl::Time now) {
  assert(!write_in_flight_ && !finished_);
  response_.set_examined_sequence(cursor_);
  sent_sequence_ = cursor_;
  last_write_ = now;
  write_in_flight_ = true;
  StartWrite(&response_);
}

void WatchReactor::FinishOnceLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

}  // namespace lapse

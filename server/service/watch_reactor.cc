#include "server/service/watch_reactor.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/log.h"
#include "server/service/proto_convert.h"

namespace lapse {

WatchReactor::WatchReactor(WatchHub* hub, grpc::CallbackServerContext* context,
                           const EventSource* events, EventFilter filter, uint64_t after)
    : hub_(hub),
      context_(context),
      events_(events),
      filter_(std::move(filter)),
      read_limits_(hub->options().read_limits),
      heartbeat_interval_(hub->options().heartbeat_interval),
      stall_timeout_(hub->options().stall_timeout),
      store_id_(events->store_id().ToString()),
      cursor_(after),
      sent_sequence_(after),
      last_write_(absl::Now()) {
  // Headers go out at once so a client can tell that its stream is in place
  // (its start position fixed) before the first event.
  StartSendInitialMetadata();
  if (absl::Status registered = hub_->Register(this); !registered.ok()) {
    // Shutting down: ended like every other stream, with where to resume.
    if (absl::IsUnavailable(registered)) {
      Shutdown();
      return;
    }
    MutexLock lock(&mu_);
    FinishOnceLocked(ToGrpcStatus(registered));
    return;
  }
  // The hub may already have polled (or shut down) this stream.
  MutexLock lock(&mu_);
  if (!finished_ && !write_in_flight_ && !waiting_) SendNextBatchLocked();
}

void WatchReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  write_in_flight_ = false;
  message_.Clear();
  if (pinned_ > 0) {
    hub_->Unpin(pinned_);
    pinned_ = 0;
  }
  if (!ok) {
    FinishOnceLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch stream closed"));
    return;
  }
  // Also when waiting in the hub's line: a heartbeat written meanwhile may
  // have kept it from taking its turn.
  if (!finished_) SendNextBatchLocked();
}

void WatchReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishOnceLocked(grpc::Status::CANCELLED);
}

void WatchReactor::OnDone() {
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  hub_->Unregister(this);
  Unref();
}

void WatchReactor::Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }

void WatchReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

absl::Time WatchReactor::Poll(bool new_events, absl::Time now) {
  MutexLock lock(&mu_);
  if (done_) return absl::InfiniteFuture();
  if (write_in_flight_ && now - last_write_ >= stall_timeout_) {
    if (!stall_cancelled_) {
      stall_cancelled_ = true;
      hub_->CountStall();
      Log(LogLevel::kWarning,
          "watch stream from %s cancelled: a write of %d bytes has not completed for %s (the "
          "client stopped reading); it can resume after sequence %d",
          context_->peer(), pinned_, absl::FormatDuration(now - last_write_), sent_sequence_);
      // gRPC fails the write and calls OnCancel, OnWriteDone and OnDone, on
      // its own threads (never inside TryCancel, which is why this may hold
      // mu_).
      context_->TryCancel();
    }
    return absl::InfiniteFuture();
  }
  if (finished_) return absl::InfiniteFuture();
  if (new_events && !write_in_flight_ && !waiting_) SendNextBatchLocked();
  if (!finished_ && !write_in_flight_ && now - last_write_ >= heartbeat_interval_) {
    WriteLocked(std::make_unique<std::string>(), 0, now);
  }
  // A stream with a write stuck in flight (a client that does not read) is
  // looked at again one interval from now rather than at once, or when it
  // would count as stalled.
  absl::Time due = last_write_ + heartbeat_interval_;
  if (due <= now) due = now + heartbeat_interval_;
  if (write_in_flight_) due = std::min(due, last_write_ + stall_timeout_);
  return due;
}

bool WatchReactor::Resume() {
  MutexLock lock(&mu_);
  if (!waiting_) return true;
  if (!finished_ && !write_in_flight_) SendNextBatchLocked();
  return !waiting_;
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
    auto events = std::make_unique<std::string>();
    events->reserve(last_batch_bytes_);
    size_t matched = 0;
    absl::StatusOr<uint64_t> examined = events_->ReadEach(
        cursor_, filter_, read_limits_, [&](uint64_t sequence, const ExpiryEventView& event) {
          AppendWatchEvent(sequence, event, events.get());
          ++matched;
        });
    if (!examined.ok()) {
      FinishOnceLocked(ToGrpcStatus(examined.status()));
      return;
    }
    if (matched > 0) {
      const size_t bytes = events->size();
      last_batch_bytes_ = bytes;
      waiting_ = !hub_->Pin(this, bytes);
      // Unsent, the batch is read again when the hub resumes the stream.
      if (waiting_) return;
      cursor_ = *examined;
      WriteLocked(std::move(events), bytes, absl::Now());
      return;
    }
    const bool advanced = *examined > cursor_;
    if (advanced) cursor_ = *examined;
    if (!advanced || cursor_ >= events_->last_sequence()) {
      StopWaitingLocked();
      return;
    }
  }
}

void WatchReactor::WriteLocked(std::unique_ptr<std::string> events, size_t pinned, absl::Time now) {
  assert(!write_in_flight_ && !finished_);
  // The other fields follow the events, as protobuf orders them.
  v1::WatchExpirationsResponse cursor;
  cursor.set_examined_sequence(cursor_);
  cursor.set_resume_token(events_->ResumeTokenAfter(cursor_));
  cursor.set_store_id(store_id_);
  cursor.AppendToString(events.get());
  // gRPC sends the bytes where they are and frees them with the slice.
  std::string* bytes = events.release();
  grpc::Slice slice(
      bytes->data(), bytes->size(), [](void* s) { delete static_cast<std::string*>(s); }, bytes);
  message_ = grpc::ByteBuffer(&slice, 1);
  sent_sequence_ = cursor_;
  last_write_ = now;
  write_in_flight_ = true;
  pinned_ = pinned;
  StartWrite(&message_);
}

void WatchReactor::StopWaitingLocked() {
  if (!waiting_) return;
  waiting_ = false;
  hub_->StopWaiting(this);
}

void WatchReactor::FinishOnceLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  StopWaitingLocked();
  Finish(status);
}

}  // namespace lapse

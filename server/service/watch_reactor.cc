#include "server/service/watch_reactor.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/base/log.h"
#include "server/service/operation.h"
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
      last_write_(absl::Now()),
      arena_(MessageArenaOptions()) {
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
  response_ = nullptr;
  arena_.Reset();
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
    WriteLocked(NewResponseLocked(), 0, now);
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
    absl::StatusOr<EventBatch> batch = events_->Read(cursor_, filter_, read_limits_);
    if (!batch.ok()) {
      FinishOnceLocked(ToGrpcStatus(batch.status()));
      return;
    }
    if (!batch->events.empty()) {
      v1::WatchExpirationsResponse* response = NewResponseLocked();
      response->mutable_events()->Reserve(static_cast<int>(batch->events.size()));
      for (ExpiryEvent& event : batch->events) {
        ExpiryEventToProto(std::move(event), filter_.include_values, response->add_events());
      }
      const size_t bytes = response->ByteSizeLong();
      waiting_ = !hub_->Pin(this, bytes);
      // Unsent, the batch is read again when the hub resumes the stream.
      if (waiting_) {
        arena_.Reset();
        return;
      }
      cursor_ = batch->examined_sequence;
      WriteLocked(response, bytes, absl::Now());
      return;
    }
    const bool advanced = batch->examined_sequence > cursor_;
    if (advanced) cursor_ = batch->examined_sequence;
    if (!advanced || cursor_ >= events_->last_sequence()) {
      StopWaitingLocked();
      return;
    }
  }
}

v1::WatchExpirationsResponse* WatchReactor::NewResponseLocked() {
  assert(response_ == nullptr);
  return google::protobuf::Arena::CreateMessage<v1::WatchExpirationsResponse>(&arena_);
}

void WatchReactor::WriteLocked(v1::WatchExpirationsResponse* response, size_t pinned,
                               absl::Time now) {
  assert(!write_in_flight_ && !finished_);
  response->set_examined_sequence(cursor_);
  response->set_resume_token(events_->ResumeTokenAfter(cursor_));
  response->set_store_id(store_id_);
  sent_sequence_ = cursor_;
  last_write_ = now;
  write_in_flight_ = true;
  pinned_ = pinned;
  response_ = response;
  StartWrite(response_);
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

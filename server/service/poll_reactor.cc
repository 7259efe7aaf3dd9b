#include "server/service/poll_reactor.h"

#include <algorithm>
#include <utility>

#include "server/service/consumer_group_handlers.h"
#include "server/service/proto_convert.h"

namespace lapse {

PollReactor::PollReactor(Store* store, GroupHub* hub, const v1::PollRequest* request,
                         v1::PollResponse* response, absl::Duration wait)
    : store_(store),
      hub_(hub),
      request_(request),
      response_(response),
      deadline_(absl::Now() + wait) {
  // Registered before the first poll, so that nothing the group announces
  // after that poll looked is missed.
  if (absl::Status registered =
          hub_->Register(this, request_->group(), GroupHub::Kind::kPoll, deadline_);
      !registered.ok()) {
    MutexLock lock(&mu_);
    FinishOnceLocked(registered);
    return;
  }
  PollStore();
}

void PollReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishOnceLocked(absl::CancelledError("poll cancelled"));
}

void PollReactor::OnDone() {
  hub_->Unregister(this);
  Unref();
}

absl::Time PollReactor::Wake(bool readable, absl::Time now) {
  {
    MutexLock lock(&mu_);
    if (finished_ || last_) return absl::InfiniteFuture();
    if (now >= deadline_) {
      last_ = true;
    } else if (!readable) {
      return deadline_;
    }
  }
  PollStore();
  return deadline_;
}

void PollReactor::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    last_ = true;
  }
  PollStore();
}

void PollReactor::PollStore() {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    if (polling_) {
      again_ = true;
      return;
    }
    polling_ = true;
    again_ = false;
  }
  Ref();
  store_->Poll(request_->group(), request_->consumer(),
               std::max<uint32_t>(1, request_->max_events()),
               [this](absl::StatusOr<PollResult> result) {
                 OnPolled(std::move(result));
                 Unref();
               });
}

void PollReactor::OnPolled(absl::StatusOr<PollResult> result) {
  {
    MutexLock lock(&mu_);
    polling_ = false;
    if (finished_) return;
    if (!result.ok()) {
      FinishOnceLocked(result.status());
      return;
    }
    if (!result->deliveries.empty() || result->lost.has_value() || last_) {
      PollResultToProto(*result, response_);
      FinishOnceLocked(absl::OkStatus());
      return;
    }
    if (!again_) return;
  }
  PollStore();
}

void PollReactor::FinishOnceLocked(const absl::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(ToGrpcStatus(status));
}

}  // namespace lapse

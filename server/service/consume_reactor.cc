#include "server/service/consume_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/validate.h"
#include "server/service/consumer_group_handlers.h"
#include "server/service/proto_convert.h"

namespace lapse {

struct ConsumeReactor::Applying {
  enum Step { kAck, kNack, kExtend, kDone };

  std::unique_ptr<v1::ConsumeRequest> request;
  absl::Duration extension;
  std::string group;
  std::string consumer;
  Step step = kAck;
  std::unique_ptr<v1::ConsumeResponse> response = std::make_unique<v1::ConsumeResponse>();
};

namespace {

// A request's lease lists, with their names for errors.
struct LeaseList {
  const char* field;
  const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases;
};

}  // namespace

ConsumeReactor::ConsumeReactor(Store* store, GroupHub* hub, Authorize authorize,
                               const absl::Status& refusal)
    : store_(store),
      hub_(hub),
      authorize_(std::move(authorize)),
      clock_(hub->options().clock),
      heartbeat_interval_(hub->options().heartbeat_interval),
      last_write_(absl::Now()) {
  MutexLock lock(&mu_);
  if (!refusal.ok()) {
    FinishOnceLocked(refusal);
    return;
  }
  ReadNextLocked();
}

void ConsumeReactor::OnReadDone(bool ok) {
  std::unique_ptr<v1::ConsumeRequest> request;
  bool first = false;
  {
    MutexLock lock(&mu_);
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    // Requests read once draining are not applied.
    if (finished_ || draining_) return;
    request = std::make_unique<v1::ConsumeRequest>(std::move(read_));
    read_.Clear();
    first = !started_;
  }
  if (first) {
    Start(*request);
  } else {
    Apply(std::move(request));
  }
}

void ConsumeReactor::Start(const v1::ConsumeRequest& first) {
  const v1::ConsumeStart& start = first.start();
  // Authorized first, as a unary call is before its request is looked at.
  absl::Status status = authorize_(start);
  if (status.ok() && !first.has_start()) {
    status = InvalidField("start",
                          "the first request of a Consume stream must carry start (group and "
                          "consumer)");
  }
  if (status.ok() && (first.ack_size() > 0 || first.nack_size() > 0 || first.extend_size() > 0)) {
    status = InvalidField("start", "the first request carries start alone; send acks after it");
  }
  if (status.ok()) status = ValidateName("start.group", start.group(), store_->limits());
  if (status.ok()) status = ValidateName("start.consumer", start.consumer(), store_->limits());
  {
    MutexLock lock(&mu_);
    if (!status.ok()) {
      FinishOnceLocked(status);
      return;
    }
    applying_ = true;
  }
  Ref();
  store_->GetConsumerGroup(start.group(), 0,
                           [this, start](absl::StatusOr<ConsumerGroupInfo> group) {
                             OnGroup(start, std::move(group));
                             Unref();
                           });
}

void ConsumeReactor::OnGroup(const v1::ConsumeStart& start,
                             absl::StatusOr<ConsumerGroupInfo> group) {
  {
    MutexLock lock(&mu_);
    applying_ = false;
    if (finished_) return;
    if (!group.ok()) {
      FinishOnceLocked(group.status());
      return;
    }
    if (draining_) {
      MaybeFinishLocked();
      return;
    }
    const size_t most = group->options.max_unacked_per_consumer;
    max_in_flight_ =
        start.max_in_flight() == 0 ? most : std::min<size_t>(start.max_in_flight(), most);
    max_batch_ = start.max_batch() == 0 ? kDefaultMaxBatch : std::min(start.max_batch(), kMaxBatch);
    group_ = start.group();
    consumer_ = start.consumer();
    if (absl::Status registered = hub_->Register(this, group_, GroupHub::Kind::kStream,
                                                 absl::Now() + heartbeat_interval_);
        !registered.ok()) {
      FinishOnceLocked(registered);
      return;
    }
    started_ = true;
    last_write_ = absl::Now();
    ReadNextLocked();
  }
  Deliver();
}

void ConsumeReactor::Apply(std::unique_ptr<v1::ConsumeRequest> request) {
  const size_t most = store_->limits().max_members_per_request;
  absl::Status status;
  if (request->has_start()) {
    status = InvalidField("start", "only the first request of a Consume stream carries it");
  }
  for (const LeaseList& list :
       {LeaseList{"ack", request->ack()}, LeaseList{"nack", request->nack()},
        LeaseList{"extend", request->extend()}}) {
    if (status.ok() && static_cast<size_t>(list.leases.size()) > most) {
      status =
          InvalidField(list.field, absl::StrCat(list.leases.size(), " leases exceed the limit of ",
                                                most, " (--max_members_per_request)"));
    }
  }
  absl::Duration extension;
  if (status.ok() && request->extend_size() > 0) {
    absl::StatusOr<absl::Duration> parsed = DurationFromProto(request->extension(), "extension");
    if (!parsed.ok()) {
      status = parsed.status();
    } else if (*parsed <= absl::ZeroDuration()) {
      status = InvalidField("extension", "must be positive with extend");
    } else {
      extension = *parsed;
    }
  }
  auto applying = std::make_unique<Applying>();
  {
    MutexLock lock(&mu_);
    if (!status.ok()) {
      FinishOnceLocked(status);
      return;
    }
    applying_ = true;
    applying->group = group_;
    applying->consumer = consumer_;
  }
  applying->request = std::move(request);
  applying->extension = extension;
  ApplyStep(std::move(applying));
}

void ConsumeReactor::ApplyStep(std::unique_ptr<Applying> applying) {
  const v1::ConsumeRequest& request = *applying->request;
  while (applying->step != Applying::kDone) {
    const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases =
        applying->step == Applying::kAck    ? request.ack()
        : applying->step == Applying::kNack ? request.nack()
                                            : request.extend();
    if (leases.empty()) {
      applying->step = static_cast<Applying::Step>(applying->step + 1);
      continue;
    }
    // Copies: the store may answer (and `applying` go) before it returns.
    const Applying::Step step = applying->step;
    const std::string group = applying->group;
    const std::string consumer = applying->consumer;
    const absl::Duration extension = applying->extension;
    const std::vector<LeaseRef> refs = LeasesOf(leases);
    StoreDone<std::vector<absl::Status>> done =
        [this, applying =
                   std::move(applying)](absl::StatusOr<std::vector<absl::Status>> results) mutable {
          if (!results.ok()) {
            MutexLock lock(&mu_);
            applying_ = false;
            FinishOnceLocked(results.status());
          } else {
            const v1::ConsumeRequest& answered = *applying->request;
            v1::ConsumeResponse& response = *applying->response;
            switch (applying->step) {
              case Applying::kAck:
                LeaseResultsToProto(answered.ack(), *results, response.mutable_ack_results());
                break;
              case Applying::kNack:
                LeaseResultsToProto(answered.nack(), *results, response.mutable_nack_results());
                break;
              default:
                LeaseResultsToProto(answered.extend(), *results, response.mutable_extend_results());
                break;
            }
            applying->step = static_cast<Applying::Step>(applying->step + 1);
            ApplyStep(std::move(applying));
          }
          Unref();
        };
    Ref();
    switch (step) {
      case Applying::kAck:
        store_->Ack(group, consumer, refs, std::move(done));
        break;
      case Applying::kNack:
        store_->Nack(group, consumer, refs, std::move(done));
        break;
      default:
        store_->ExtendLeases(group, consumer, refs, extension, std::move(done));
        break;
    }
    return;
  }
  Applied(std::move(applying));
}

void ConsumeReactor::Applied(std::unique_ptr<Applying> applying) {
  {
    MutexLock lock(&mu_);
    applying_ = false;
    v1::ConsumeResponse& response = *applying->response;
    // Answered, acked or not, a lease no longer takes room on this stream;
    // an extended one lasts longer.
    for (const v1::LeaseResult& r : response.ack_results()) held_.erase(r.sequence());
    for (const v1::LeaseResult& r : response.nack_results()) held_.erase(r.sequence());
    const absl::Time deadline = clock_->Now() + applying->extension;
    for (const v1::LeaseResult& r : response.extend_results()) {
      auto it = held_.find(r.sequence());
      if (it == held_.end()) continue;
      if (r.code() == 0) {
        it->second.deadline = deadline;
      } else {
        held_.erase(it);
      }
    }
    if (finished_) return;
    EnqueueLocked(std::move(applying->response));
    if (!draining_ && !reads_done_) {
      if (queue_.size() < kMaxQueuedResponses) {
        ReadNextLocked();
      } else {
        read_paused_ = true;
      }
    }
    MaybeFinishLocked();
  }
  Deliver();
}

void ConsumeReactor::Deliver() {
  std::string group;
  std::string consumer;
  size_t want;
  {
    MutexLock lock(&mu_);
    if (!started_ || finished_ || draining_ || reads_done_) return;
    if (polling_) {
      again_ = true;
      return;
    }
    const size_t room = RoomLocked();
    if (room == 0) return;
    want = std::min(room, max_batch_);
    polling_ = true;
    again_ = false;
    group = group_;
    consumer = consumer_;
  }
  Ref();
  store_->Poll(group, consumer, want, [this](absl::StatusOr<PollResult> result) {
    OnPolled(std::move(result));
    Unref();
  });
}

void ConsumeReactor::OnPolled(absl::StatusOr<PollResult> result) {
  bool more;
  {
    MutexLock lock(&mu_);
    polling_ = false;
    if (finished_) return;
    if (!result.ok()) {
      FinishOnceLocked(result.status());
      return;
    }
    if (!result->deliveries.empty() || result->lost.has_value()) {
      auto response = std::make_unique<v1::ConsumeResponse>();
      PollResultToProto(*result, response.get());
      for (const Delivery& d : result->deliveries) {
        held_[d.event.sequence] = Held{d.delivery_count, d.lease_deadline};
      }
      EnqueueLocked(std::move(response));
    }
    // A batch may have left more behind; an empty poll waits to be woken.
    more = again_ || !result->deliveries.empty();
    MaybeFinishLocked();
  }
  if (more) Deliver();
}

absl::Time ConsumeReactor::Wake(bool readable, absl::Time now) {
  absl::Time due;
  {
    MutexLock lock(&mu_);
    if (finished_) return absl::InfiniteFuture();
    if (started_ && !writing_ && queue_.empty() && now - last_write_ >= heartbeat_interval_) {
      EnqueueLocked(std::make_unique<v1::ConsumeResponse>());
    }
    due = last_write_ + heartbeat_interval_;
    if (due <= now) due = now + heartbeat_interval_;
  }
  if (readable) Deliver();
  return due;
}

void ConsumeReactor::Shutdown() {
  MutexLock lock(&mu_);
  draining_ = true;
  MaybeFinishLocked();
}

void ConsumeReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  queue_.pop_front();
  if (!ok) {
    FinishOnceLocked(absl::CancelledError("consume stream closed"));
    return;
  }
  WriteNextLocked();
  if (read_paused_ && !finished_ && !draining_ && queue_.size() < kMaxQueuedResponses) {
    read_paused_ = false;
    ReadNextLocked();
  }
  MaybeFinishLocked();
}

void ConsumeReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishOnceLocked(absl::CancelledError("consume stream cancelled"));
}

void ConsumeReactor::OnDone() {
  hub_->Unregister(this);
  Unref();
}

size_t ConsumeReactor::RoomLocked() {
  const absl::Time now = clock_->Now();
  for (auto it = held_.begin(); it != held_.end();) {
    it = it->second.deadline <= now ? held_.erase(it) : std::next(it);
  }
  return held_.size() >= max_in_flight_ ? 0 : max_in_flight_ - held_.size();
}

void ConsumeReactor::ReadNextLocked() { StartRead(&read_); }

void ConsumeReactor::EnqueueLocked(std::unique_ptr<v1::ConsumeResponse> response) {
  queue_.push_back(std::move(response));
  WriteNextLocked();
}

void ConsumeReactor::WriteNextLocked() {
  if (writing_ || finished_ || queue_.empty()) return;
  writing_ = true;
  last_write_ = absl::Now();
  StartWrite(queue_.front().get());
}

void ConsumeReactor::MaybeFinishLocked() {
  if (finished_ || !(draining_ || reads_done_)) return;
  if (applying_ || polling_ || writing_ || !queue_.empty()) return;
  if (draining_) {
    FinishOnceLocked(absl::UnavailableError(
        "server shutting down; the leases this consumer holds stay until they expire: reconnect "
        "with the same consumer name to keep them"));
  } else {
    FinishOnceLocked(absl::OkStatus());
  }
}

void ConsumeReactor::FinishOnceLocked(const absl::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(ToGrpcStatus(status));
}

}  // namespace lapse

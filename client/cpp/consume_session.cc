#include "client/cpp/consume_session.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/backoff.h"
#include "client/cpp/convert.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "proto/recycle.h"

namespace lapse::client::internal {
namespace {

// ConsumeStart::max_batch: the server's most.
constexpr size_t kServerMaxBatch = 1000;

// How long a stopping session waits for the server to end a half-closed
// stream before it cancels it.
constexpr absl::Duration kHalfCloseGrace = absl::Seconds(1);

absl::Status Stopped() {
  return absl::CancelledError(
      "the consumer stopped before the server answered; the lease stays until it expires");
}

// The options' first fault, naming the field.
absl::Status Validate(const ConsumerOptions& options) {
  if (options.group.empty()) {
    return absl::InvalidArgumentError("ConsumerOptions::group: must name a consumer group");
  }
  if (options.consumer.empty()) {
    return absl::InvalidArgumentError("ConsumerOptions::consumer: must name this consumer");
  }
  return absl::OkStatus();
}

}  // namespace

// One Consume call. Its reactions report to the session; the session's
// thread destroys it after OnDone. The hold taken at its start keeps OnDone
// from happening while no read or write is pending (the session pauses
// reads for flow control); the session releases it once the stream is
// ending (EndingLocked).
class ConsumeSession::Call final
    : public grpc::ClientBidiReactor<v1::ConsumeRequest, v1::ConsumeResponse> {
 public:
  explicit Call(ConsumeSession* session) : session_(session) {
    // Without readable credentials the server refuses the call, and says so.
    session_->connection_->AddCredentials(&context_).IgnoreError();
    session_->connection_->stub().async()->Consume(&context_, this);
    AddHold();
  }

  void TryCancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override { session_->OnWriteDone(ok); }
  void OnReadDone(bool ok) override { session_->OnReadDone(ok); }
  void OnDone(const grpc::Status& status) override { session_->OnDone(status); }

 private:
  ConsumeSession* const session_;
  grpc::ClientContext context_;
};

ConsumeSession::ConsumeSession(std::shared_ptr<Connection> connection,
                               const ConsumerOptions& options, const BackoffPolicy& backoff)
    : connection_(std::move(connection)),
      options_(options),
      max_in_flight_(std::max<size_t>(1, options.max_in_flight)),
      max_batch_(std::min({options.max_batch == 0 ? max_in_flight_ : options.max_batch,
                           max_in_flight_, kServerMaxBatch})),
      backoff_(backoff) {
  absl::Status valid = Validate(options_);
  if (valid.ok()) valid = connection_->channel_status();
  MutexLock lock(&mu_);
  if (!valid.ok()) {
    ended_ = valid;
    return;
  }
  MutexLock join(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
}

ConsumeSession::~ConsumeSession() { Stop(); }

void ConsumeSession::Loop() {
  Backoff backoff(backoff_);
  absl::BitGen random;
  while (true) {
    const grpc::Status status = RunCall();
    std::vector<Answer> answers;
    bool ended = false;
    {
      MutexLock lock(&mu_);
      if (closing_) return;
      if (!StreamResumable(status)) {
        ended = true;
        ended_ = FromGrpcStatus(status);
        AnswerAllLocked(ended_, &answers);
        items_.clear();
        held_.clear();
        cv_.SignalAll();
      } else if (got_response_) {
        backoff.Reset();
      }
    }
    if (ended) {
      Deliver(std::move(answers));
      return;
    }
    const absl::Time retry_at = absl::Now() + backoff.Next(random);
    MutexLock lock(&mu_);
    while (!closing_ && absl::Now() < retry_at) cv_.WaitWithTimeout(&mu_, retry_at - absl::Now());
    if (closing_) return;
    ++stats_.reconnects;
  }
}

grpc::Status ConsumeSession::RunCall() {
  {
    MutexLock lock(&mu_);
    if (closing_) return grpc::Status::CANCELLED;
  }
  // Made outside mu_; a Stop() that comes meanwhile cancels it below.
  auto call = std::make_unique<Call>(this);
  {
    MutexLock lock(&mu_);
    call_ = call.get();
    reading_ = false;
    ending_ = false;
    done_ = false;
    got_response_ = false;
    request_ = ConsumeStartToProto(options_.group, options_.consumer,
                                   static_cast<uint32_t>(max_in_flight_),
                                   static_cast<uint32_t>(max_batch_));
    writing_ = true;
    call_->StartWrite(&request_);
    ReadIfAllowedLocked();
  }
  call->StartCall();

  // Once Stop() is done waiting: half-close, so that the server stops
  // delivering and ends the stream OK once it has written its answers; and
  // if it has not ended within kHalfCloseGrace (or cannot be half-closed
  // now), cancel it.
  bool half_closed = false;
  bool cancelled = false;
  absl::Time cancel_at = absl::InfiniteFuture();
  MutexLock lock(&mu_);
  while (!done_) {
    if (closing_ && !half_closed) {
      half_closed = true;
      cancel_at = absl::Now() + kHalfCloseGrace;
      if (!ending_ && !writing_) {
        // The hold goes: the read kept pending takes the stream's end.
        ending_ = true;
        writing_ = true;
        if (!reading_) {
          reading_ = true;
          call->StartRead(&response_);
        }
        mu_.Unlock();
        call->StartWritesDone();
        call->RemoveHold();
        mu_.Lock();
        continue;
      }
      cancel_at = absl::Now();
    }
    if (closing_ && !cancelled && absl::Now() >= cancel_at) {
      // Let it end even with no read or write pending.
      cancelled = true;
      const bool release = EndingLocked();
      mu_.Unlock();
      call->TryCancel();
      if (release) call->RemoveHold();
      mu_.Lock();
      continue;
    }
    cv_.WaitWithTimeout(
        &mu_, closing_ && !cancelled ? cancel_at - absl::Now() : absl::InfiniteDuration());
  }
  // OnDone has run: gRPC is finished with the call.
  call_ = nullptr;
  return done_status_;
}

void ConsumeSession::OnWriteDone(bool ok) {
  bool release = false;
  Call* call;
  {
    MutexLock lock(&mu_);
    call = call_;
    writing_ = false;
    if (ok) {
      WriteIfAllowedLocked();
    } else {
      // The stream is ending; OnDone sends what it carried again later.
      release = EndingLocked();
    }
  }
  if (release) call->RemoveHold();
}

void ConsumeSession::OnReadDone(bool ok) {
  std::vector<Answer> answers;
  bool release = false;
  Call* call;
  {
    MutexLock lock(&mu_);
    call = call_;
    reading_ = false;
    if (ok) {
      got_response_ = true;
      TakeResponseLocked(&answers);
      RecycleDeliveries(&response_);
      response_.Clear();
      WriteIfAllowedLocked();
      ReadIfAllowedLocked();
      if (closing_ && ending_) {
        // Half-closed: read on to the stream's end (what comes is released
        // by Stop).
        reading_ = true;
        call->StartRead(&response_);
      }
      cv_.SignalAll();
    } else {
      release = EndingLocked();
    }
  }
  Deliver(std::move(answers));
  if (release) call->RemoveHold();
}

void ConsumeSession::OnDone(const grpc::Status& status) {
  MutexLock lock(&mu_);
  // What the stream had sent and not had answered goes first on the next.
  std::deque<Pending> again;
  for (std::vector<Pending>& request : sent_) {
    for (Pending& pending : request) {
      pending.resent = true;
      again.push_back(std::move(pending));
    }
  }
  sent_.clear();
  for (Pending& pending : unsent_) again.push_back(std::move(pending));
  unsent_ = std::move(again);
  done_ = true;
  done_status_ = status;
  cv_.SignalAll();
}

bool ConsumeSession::EndingLocked() {
  if (ending_) return false;
  ending_ = true;
  return true;
}

void ConsumeSession::ReadIfAllowedLocked() {
  if (call_ == nullptr || reading_ || ending_ || done_) return;
  if (held_.size() >= max_in_flight_ && sent_.empty()) return;
  reading_ = true;
  call_->StartRead(&response_);
}

void ConsumeSession::WriteIfAllowedLocked() {
  if (call_ == nullptr || writing_ || ending_ || done_ || unsent_.empty()) return;
  // One request: acks, nacks and extends (by one extension) in the order
  // the server applies them, each list at most kMaxLeases long; the rest
  // waits for the next.
  std::vector<Pending> lists[3];
  std::optional<absl::Duration> extension;
  std::deque<Pending> rest;
  for (Pending& pending : unsent_) {
    std::vector<Pending>& list = lists[static_cast<int>(pending.op)];
    if (pending.op == LeaseOp::kExtend) {
      if (!extension.has_value()) extension = pending.extension;
      if (pending.extension != *extension) {
        rest.push_back(std::move(pending));
        continue;
      }
    }
    if (list.size() >= kMaxLeases) {
      rest.push_back(std::move(pending));
      continue;
    }
    list.push_back(std::move(pending));
  }
  unsent_ = std::move(rest);
  request_.Clear();
  google::protobuf::RepeatedPtrField<v1::LeaseRef>* fields[3] = {
      request_.mutable_ack(), request_.mutable_nack(), request_.mutable_extend()};
  std::vector<Pending> request;
  for (int i = 0; i < 3; ++i) {
    std::vector<LeaseRef> leases;
    for (Pending& pending : lists[i]) {
      leases.push_back(pending.lease);
      request.push_back(std::move(pending));
    }
    LeasesToProto(leases, fields[i]);
  }
  if (extension.has_value()) DurationToProto(*extension, request_.mutable_extension());
  sent_.push_back(std::move(request));
  writing_ = true;
  call_->StartWrite(&request_);
}

void ConsumeSession::TakeResponseLocked(std::vector<Answer>* answers) {
  const v1::ConsumeResponse& response = response_;
  if ((response.ack_results_size() > 0 || response.nack_results_size() > 0 ||
       response.extend_results_size() > 0) &&
      !sent_.empty()) {
    // The answer to the oldest request: its results, list by list, in order.
    std::vector<Pending> request = std::move(sent_.front());
    sent_.pop_front();
    const google::protobuf::RepeatedPtrField<v1::LeaseResult>* results[3] = {
        &response.ack_results(), &response.nack_results(), &response.extend_results()};
    int next[3] = {0, 0, 0};
    for (Pending& pending : request) {
      const int list = static_cast<int>(pending.op);
      const int at = next[list]++;
      if (at >= results[list]->size()) {
        AnswerLocked(pending,
                     absl::InternalError("the server's answer has no result for this lease"),
                     answers);
      } else {
        AnswerLocked(pending, LeaseResultFromProto(results[list]->Get(at)).status, answers);
      }
    }
  }
  if (response.lost_first_sequence() != 0) {
    Item lost;
    lost.kind = Item::Kind::kLost;
    lost.lost_first = response.lost_first_sequence();
    lost.lost_last = response.lost_last_sequence();
    stats_.lost_sequences += lost.lost_last - lost.lost_first + 1;
    items_.push_back(std::move(lost));
  }
  for (const v1::Delivery& proto : response.deliveries()) {
    ++stats_.delivered;
    Item item;
    item.delivery = DeliveryFromProto(proto);
    const LeaseRef lease{item.delivery.event.sequence, item.delivery.delivery_count};
    held_.insert(lease.sequence);
    items_.push_back(std::move(item));
  }
}

void ConsumeSession::AnswerLocked(Pending& pending, absl::Status status,
                                  std::vector<Answer>* answers) {
  if (status.code() == absl::StatusCode::kFailedPrecondition && pending.resent) {
    status = absl::FailedPreconditionError(
        absl::StrCat(status.message(),
                     "; it was sent again after the stream broke, so the first send may have "
                     "been applied"));
  }
  if (!status.ok()) {
    ++stats_.refused;
  } else if (pending.op == LeaseOp::kAck) {
    ++stats_.acked;
  } else if (pending.op == LeaseOp::kNack) {
    ++stats_.nacked;
  }
  answers->push_back(Answer{std::move(pending.done), std::move(status)});
  cv_.SignalAll();
}

void ConsumeSession::AnswerAllLocked(const absl::Status& status, std::vector<Answer>* answers) {
  for (std::vector<Pending>& request : sent_) {
    for (Pending& pending : request) AnswerLocked(pending, status, answers);
  }
  for (Pending& pending : unsent_) AnswerLocked(pending, status, answers);
  sent_.clear();
  unsent_.clear();
}

void ConsumeSession::Deliver(std::vector<Answer> answers) {
  for (Answer& answer : answers) answer.done(answer.status);
}

absl::StatusOr<ConsumeSession::Item> ConsumeSession::NextItem(absl::Duration timeout,
                                                              bool for_handler) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (items_.empty() && !stopping_ && ended_.ok()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("no delivery within the timeout");
    }
    cv_.WaitWithTimeout(&mu_, left);
  }
  if (stopping_) return absl::CancelledError("the consumer was stopped");
  if (!ended_.ok()) return ended_;
  Item item = std::move(items_.front());
  items_.pop_front();
  if (for_handler && item.kind == Item::Kind::kDelivery) {
    ++handling_;
    handler_thread_ = std::this_thread::get_id();
  }
  return item;
}

void ConsumeSession::Handled() {
  MutexLock lock(&mu_);
  --handling_;
  cv_.SignalAll();
}

void ConsumeSession::Send(LeaseOp op, const Delivery& delivery, absl::Duration extension,
                          Done done) {
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    if (!ended_.ok()) {
      refused = ended_;
    } else if (closing_) {
      refused = Stopped();
    } else {
      const LeaseRef lease{delivery.event.sequence, delivery.delivery_count};
      if (op != LeaseOp::kExtend) held_.erase(lease.sequence);
      unsent_.push_back(Pending{op, lease, extension, std::move(done), false});
      WriteIfAllowedLocked();
      ReadIfAllowedLocked();
      cv_.SignalAll();
      return;
    }
  }
  done(refused);
}

void ConsumeSession::Refused(const LeaseResult& result) {
  MutexLock lock(&mu_);
  Item item;
  item.kind = Item::Kind::kRefused;
  item.refused = result;
  items_.push_back(std::move(item));
  cv_.SignalAll();
}

void ConsumeSession::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
    // A handler of Run's that is running still answers its delivery (unless
    // it is the one stopping), then the answers owed are awaited.
    const bool in_handler = handler_thread_ == std::this_thread::get_id();
    const absl::Time deadline = absl::Now() + options_.stop_timeout;
    while (((handling_ > 0 && !in_handler) || !unsent_.empty() || !sent_.empty()) && ended_.ok() &&
           !closing_ && absl::Now() < deadline) {
      cv_.WaitWithTimeout(&mu_, deadline - absl::Now());
    }
    closing_ = true;
    cv_.SignalAll();
  }
  {
    MutexLock join(&join_mu_);
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Answer> answers;
  std::vector<LeaseRef> unhanded;
  {
    MutexLock lock(&mu_);
    AnswerAllLocked(Stopped(), &answers);
    for (const Item& item : items_) {
      if (item.kind != Item::Kind::kDelivery) continue;
      unhanded.push_back({item.delivery.event.sequence, item.delivery.delivery_count});
    }
    items_.clear();
  }
  Deliver(std::move(answers));
  if (unhanded.empty()) return;
  // Deliveries never handed out go back to the group at once, by a unary
  // Nack now that no stream is open that could receive them again.
  v1::NackRequest request;
  request.set_group(options_.group);
  request.set_consumer(options_.consumer);
  LeasesToProto(unhanded, request.mutable_leases());
  absl::StatusOr<std::vector<LeaseResult>> released = connection_->Call<std::vector<LeaseResult>>(
      &v1::LapseService::Stub::Nack, request, Idempotency::kNotIdempotent, CallOptions());
  MutexLock lock(&mu_);
  if (!released.ok()) {
    stats_.refused += unhanded.size();
    return;
  }
  for (const LeaseResult& result : *released) {
    if (result.status.ok()) {
      ++stats_.nacked;
    } else {
      ++stats_.refused;
    }
  }
}

bool ConsumeSession::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

ConsumerStats ConsumeSession::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace lapse::client::internal

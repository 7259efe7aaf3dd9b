#include "client/cpp/watch_loop.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/cpp/backoff.h"
#include "client/cpp/convert.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "proto/recycle.h"

namespace lapse::client::internal {
namespace {

// The loop whose thread is running here, so that Cancel() from a handler
// does not wait for its own thread.
thread_local const WatchLoop* current_loop = nullptr;

// A draining lapse server ends a stream with "server shutting down; last
// delivered sequence N" (see the README's WatchExpirations section).
std::optional<uint64_t> LastDeliveredSequence(const grpc::Status& status) {
  constexpr absl::string_view kMarker = "last delivered sequence ";
  const std::string& message = status.error_message();
  const size_t at = message.find(kMarker.data(), 0, kMarker.size());
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + kMarker.size();
  size_t end = begin;
  while (end < message.size() && absl::ascii_isdigit(message[end])) ++end;
  uint64_t sequence = 0;
  if (!absl::SimpleAtoi(absl::string_view(message).substr(begin, end - begin), &sequence)) {
    return std::nullopt;
  }
  return sequence;
}

}  // namespace

// One WatchExpirations call. Its reactions report to the loop; the loop's
// thread asks for each next response and destroys the Attempt after OnDone.
class WatchLoop::Attempt final : public grpc::ClientReadReactor<v1::WatchExpirationsResponse> {
 public:
  // Creates the call; Start() starts it.
  Attempt(WatchLoop* loop, v1::WatchExpirationsRequest request)
      : loop_(loop), request_(std::move(request)) {
    // Without readable credentials the server refuses the call, and says so.
    loop_->connection_->AddCredentials(&context_).IgnoreError();
    loop_->connection_->stub().async()->WatchExpirations(&context_, &request_, this);
    // Between a response and the loop's next StartRead no operation is
    // pending; the hold keeps OnDone (and the end of this reactor's use) from
    // happening in that gap. The final OnReadDone releases it.
    AddHold();
    StartRead(&response_);
  }

  void Start() { StartCall(); }
  void ReadNext() {
    RecycleEvents(&response_);
    StartRead(&response_);
  }
  void TryCancel() { context_.TryCancel(); }
  // Valid between a successful read and the next ReadNext().
  const v1::WatchExpirationsResponse& response() const { return response_; }

  void OnReadInitialMetadataDone(bool ok) override {
    // Not ok also for a trailers-only answer: the call was refused.
    if (ok) loop_->OnHeaders();
  }
  void OnReadDone(bool ok) override {
    if (ok) {
      loop_->OnResponse();
    } else {
      RemoveHold();
    }
  }
  void OnDone(const grpc::Status& status) override { loop_->OnEnd(status); }

 private:
  WatchLoop* const loop_;
  grpc::ClientContext context_;
  const v1::WatchExpirationsRequest request_;
  v1::WatchExpirationsResponse response_;
};

WatchLoop::WatchLoop(std::shared_ptr<Connection> connection, const WatchOptions& options,
                     WatchHandlers handlers, const BackoffPolicy& backoff)
    : connection_(std::move(connection)),
      options_(options),
      handlers_(std::move(handlers)),
      backoff_(backoff) {
  if (options_.start == StartPosition::kAfterSequence) {
    position_ = options_.after_sequence;
  }
  if (options_.start == StartPosition::kAfterToken) {
    token_ = options_.resume_token;
  }
  thread_ = std::thread([this] { Run(); });
}

WatchLoop::~WatchLoop() { Cancel(); }

void WatchLoop::Cancel() {
  std::shared_ptr<Attempt> attempt;
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
    attempt = attempt_;
    cv_.SignalAll();
  }
  if (attempt != nullptr) attempt->TryCancel();
  if (current_loop == this) return;
  MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

uint64_t WatchLoop::position() const {
  MutexLock lock(&mu_);
  return position_.value_or(0);
}

std::string WatchLoop::resume_token() const {
  MutexLock lock(&mu_);
  return token_;
}

bool WatchLoop::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

void WatchLoop::Run() {
  current_loop = this;
  Backoff backoff(backoff_);
  absl::BitGen random;
  while (true) {
    const AttemptEnd end = RunAttempt();
    if (cancelled()) return;
    if (!StreamResumable(end.status)) {
      if (handlers_.on_error) handlers_.on_error(FromGrpcStatus(end.status));
      return;
    }
    if (end.got_response) backoff.Reset();
    {
      MutexLock lock(&mu_);
      if (!position_.has_value()) position_ = LastDeliveredSequence(end.status);
    }
    if (handlers_.on_reconnecting) {
      handlers_.on_reconnecting(FromGrpcStatus(end.status));
    }
    const absl::Time retry_at = absl::Now() + backoff.Next(random);
    MutexLock lock(&mu_);
    while (!cancelled_ && absl::Now() < retry_at) {
      cv_.WaitWithTimeout(&mu_, retry_at - absl::Now());
    }
    if (cancelled_) return;
  }
}

WatchLoop::AttemptEnd WatchLoop::RunAttempt() {
  std::optional<uint64_t> position;
  std::string token;
  {
    MutexLock lock(&mu_);
    if (cancelled_) return {grpc::Status::CANCELLED, false};
    headers_received_ = false;
    headers_reported_ = false;
    response_ready_ = false;
    ended_ = false;
    position = position_;
    token = token_;
  }
  // Created, published and started outside mu_: gRPC may run reactions
  // inline. A Cancel() that ran before publication is caught right after.
  auto attempt = std::make_shared<Attempt>(this, WatchRequest(options_, position, token));
  {
    MutexLock lock(&mu_);
    attempt_ = attempt;
  }
  attempt->Start();
  if (cancelled()) attempt->TryCancel();

  AttemptEnd end;
  while (true) {
    mu_.Lock();
    while (!AttemptHasNews()) cv_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
    if (headers_received_ && !headers_reported_) {
      headers_reported_ = true;
      const bool cancelled = cancelled_;
      mu_.Unlock();
      if (!cancelled && handlers_.on_connected) handlers_.on_connected();
      continue;
    }
    if (response_ready_) {
      response_ready_ = false;
      mu_.Unlock();
      end.got_response = true;
      Deliver(attempt->response());
      attempt->ReadNext();
      continue;
    }
    // OnDone has run: gRPC is finished with the attempt.
    end.status = end_status_;
    attempt_.reset();
    mu_.Unlock();
    return end;
  }
}

bool WatchLoop::AttemptHasNews() const {
  return (headers_received_ && !headers_reported_) || response_ready_ || ended_;
}

void WatchLoop::Deliver(const v1::WatchExpirationsResponse& response) {
  std::optional<uint64_t> position;
  {
    MutexLock lock(&mu_);
    position = position_;
  }
  // One for the response, so that its strings' buffers serve every event.
  ExpiryEvent handed;
  for (const v1::ExpiryEvent& event : response.events()) {
    if (position.has_value() && event.sequence() <= *position) continue;
    if (cancelled()) return;
    EventFromProto(event, &handed);
    handlers_.on_event(handed);
    position = event.sequence();
    MutexLock lock(&mu_);
    position_ = position;
  }
  // Every event the response examined has been handed over.
  MutexLock lock(&mu_);
  position_ = std::max(position_.value_or(0), response.examined_sequence());
  if (!response.resume_token().empty()) token_ = response.resume_token();
}

void WatchLoop::OnHeaders() {
  MutexLock lock(&mu_);
  headers_received_ = true;
  cv_.SignalAll();
}

void WatchLoop::OnResponse() {
  MutexLock lock(&mu_);
  // A response implies headers, whichever reaction ran first.
  headers_received_ = true;
  response_ready_ = true;
  cv_.SignalAll();
}

void WatchLoop::OnEnd(const grpc::Status& status) {
  MutexLock lock(&mu_);
  end_status_ = status;
  ended_ = true;
  cv_.SignalAll();
}

}  // namespace lapse::client::internal

#include "server/callback_threads.h"

#include <atomic>

#include "absl/time/time.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"

namespace lapse {
namespace {

// Some CallbackThreadParking of this process holds a thread.
std::atomic<bool> process_holds_one{false};

// A call's reactor that ends it at once with `status`.
class Ended final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Ended(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

CallbackThreadParking::~CallbackThreadParking() { Release(); }

bool CallbackThreadParking::Park(grpc::Server* server) {
  {
    MutexLock lock(&mu_);
    if (released_ || stub_ != nullptr) return false;
    if (process_holds_one.exchange(true)) return false;
    holds_ = true;
    expecting_ = true;
  }
  // An empty message: a ByteBuffer never filled is not one.
  grpc::Slice empty;
  request_ = grpc::ByteBuffer(&empty, 1);
  stub_ = std::make_unique<grpc::GenericStub>(server->InProcessChannel(grpc::ChannelArguments()));
  stub_->UnaryCall(&context_, kMethod, grpc::StubOptions(), &request_, &response_,
                   [this](const grpc::Status&) {
                     MutexLock lock(&mu_);
                     call_ended_ = true;
                     changed_.SignalAll();
                   });
  MutexLock lock(&mu_);
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return parked_ || call_ended_;
  });
  return parked_;
}

grpc::ServerGenericBidiReactor* CallbackThreadParking::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kMethod) {
    return new Ended(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  MutexLock lock(&mu_);
  if (!expecting_ || released_) {
    return new Ended(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  expecting_ = false;
  parked_ = true;
  changed_.SignalAll();
  // The point: this callback thread waits here, out of gRPC's rotation.
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(),
                     [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_; });
  return new Ended(grpc::Status::OK);
}

void CallbackThreadParking::Release() {
  MutexLock lock(&mu_);
  released_ = true;
  changed_.SignalAll();
  if (stub_ == nullptr) return;
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(),
                     [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return call_ended_; });
  if (holds_) {
    holds_ = false;
    process_holds_one.store(false);
  }
}

}  // namespace lapse

#include "server/callback_threads.h"

#include <time.h>

#include <atomic>

#include "absl/time/time.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "server/base/log.h"

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
  Hold* hold;
  {
    MutexLock lock(&mu_);
    if (hold_ != nullptr) return false;
    if (process_holds_one.exchange(true)) return false;
    last_.reset();
    hold_ = std::make_unique<Hold>();
    hold = hold_.get();
  }
  // An empty message: a ByteBuffer never filled is not one.
  grpc::Slice empty;
  hold->request = grpc::ByteBuffer(&empty, 1);
  hold->stub =
      std::make_unique<grpc::GenericStub>(server->InProcessChannel(grpc::ChannelArguments()));
  hold->stub->UnaryCall(&hold->context, kMethod, grpc::StubOptions(), &hold->request,
                        &hold->response, [this, hold](const grpc::Status&) {
                          MutexLock lock(&mu_);
                          hold->call_ended = true;
                          changed_.SignalAll();
                        });
  MutexLock lock(&mu_);
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(),
                     [hold]() { return hold->parked || hold->call_ended; });
  if (hold->parked) return true;
  // Refused (or released meanwhile, which then let the hold go itself):
  // nothing is held.
  if (hold_.get() == hold) {
    last_ = std::move(hold_);
    process_holds_one.store(false);
  }
  return false;
}

grpc::ServerGenericBidiReactor* CallbackThreadParking::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kMethod) {
    return new Ended(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  MutexLock lock(&mu_);
  Hold* hold = hold_.get();
  if (hold == nullptr || hold->parked || hold->released) {
    return new Ended(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  hold->parked = true;
  ++times_parked_;
  changed_.SignalAll();
  // The point: this callback thread waits here, out of gRPC's rotation.
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [hold]() { return hold->released; });
  return new Ended(grpc::Status::OK);
}

void CallbackThreadParking::Release() {
  MutexLock lock(&mu_);
  if (hold_ == nullptr) return;
  Hold* hold = hold_.get();
  hold->released = true;
  changed_.SignalAll();
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [hold]() { return hold->call_ended; });
  last_ = std::move(hold_);
  process_holds_one.store(false);
  changed_.SignalAll();
}

bool CallbackThreadParking::parked() {
  MutexLock lock(&mu_);
  return hold_ != nullptr && hold_->parked;
}

bool CallbackThreadParking::AwaitParked(bool parked, int times, absl::Time deadline) {
  MutexLock lock(&mu_);
  return changed_.WaitUntil(
      &mu_, deadline, [this, parked, times]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (hold_ != nullptr && hold_->parked) == parked && times_parked_ >= times;
      });
}

ParkingPolicy::Action ParkingPolicy::Next(absl::Time now, absl::Duration cpu, bool parked) {
  const bool sampled = sampled_;
  const absl::Duration used = cpu - last_cpu_;
  const absl::Duration elapsed = now - last_now_;
  sampled_ = true;
  last_now_ = now;
  last_cpu_ = cpu;
  if (!parked) {
    busy_ = 0;
    // Released by the policy: parked again after a while. A thread that was
    // never parked, or that was refused, is not the policy's to park.
    if (released_at_ == absl::InfinitePast() || now - released_at_ < options_.released_for) {
      return Action::kNone;
    }
    released_at_ = absl::InfinitePast();
    return Action::kPark;
  }
  if (!sampled || elapsed <= absl::ZeroDuration()) return Action::kNone;
  busy_ = used >= elapsed * options_.busy_share ? busy_ + 1 : 0;
  if (busy_ < options_.busy_samples) return Action::kNone;
  busy_ = 0;
  released_at_ = now;
  return Action::kRelease;
}

ParkingGovernor::ParkingGovernor(CallbackThreadParking* parking, grpc::Server* server,
                                 const ParkingPolicy::Options& options)
    : parking_(parking), server_(server), policy_(options), thread_([this] { Run(); }) {}

ParkingGovernor::~ParkingGovernor() { Stop(); }

void ParkingGovernor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    stop_requested_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void ParkingGovernor::Run() {
  const absl::Duration interval = policy_.options().interval;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stop_requested_.WaitUntil(&mu_, absl::Now() + interval,
                                    [this]()
                                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
        return;
      }
    }
    timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    switch (policy_.Next(absl::Now(), absl::DurationFromTimespec(cpu), parking_->parked())) {
      case ParkingPolicy::Action::kRelease:
        parking_->Release();
        Log(LogLevel::kInfo, "callback thread let go: the process used %.0f%% of a core or more",
            100 * policy_.options().busy_share);
        break;
      case ParkingPolicy::Action::kPark:
        if (parking_->Park(server_)) Log(LogLevel::kInfo, "callback thread parked again");
        break;
      case ParkingPolicy::Action::kNone:
        break;
    }
  }
}

}  // namespace lapse

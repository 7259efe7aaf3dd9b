// CallbackThreadParking: serves a server's callback-API calls on one fewer of
// gRPC's callback threads, by holding one of them in a call until Release.
// ParkingGovernor lets that thread go while the process needs more than one
// core, and parks it again later.
//
// gRPC 1.51 runs every callback-API method on its callback threads
// (Clamp(cores / 2, 2, 16) of them, whatever the server asks), and these
// threads also poll the server's sockets: one waits in epoll_wait while the
// others wait on a futex, and each time the poller returns with a request it
// wakes another to poll in its place. With two threads, a stream of small
// requests costs a futex wake and two context switches per request on top of
// the work itself. Parking one of the two leaves a single thread that polls,
// runs the reactors and writes the answers, with no hand-off: lapsed's CPU per
// 100k single puts fell from 0.46-0.60 to 0.26-0.37 s (docs/benchmarks.md,
// "perfsingle6"). The price is parallelism: every callback of the process
// then runs on the threads left (one, on up to five cores), so a server that
// has more work than one thread does (large batched requests, many clients)
// is slower parked. ParkingGovernor watches for that: parked, a process that
// used more than ParkingPolicy's busy share of a core in its last samples
// gets its thread back, for a while, then parks it again and looks anew.
//
// At most one thread is parked per process (the callback threads are the
// process's, shared by every server and client in it): a second server's
// Park does nothing while the first holds one. A reactor must never block:
// with one thread left, a blocked callback stops the server.
//
//   CallbackThreadParking parking;
//   builder.RegisterCallbackGenericService(&parking);
//   server = builder.BuildAndStart();
//   parking.Park(server.get());
//   ParkingGovernor governor(&parking, server.get(), ParkingPolicy::Options());
//   ...
//   governor.Stop();    // first: it would park the thread again
//   parking.Release();  // before server->Shutdown(), which would wait for it
//
// The parked call comes from the server's in-process channel; calls to any
// other unregistered method, or to the parking method from anywhere else,
// are UNIMPLEMENTED as without it. Thread-safe.
#ifndef LAPSE_SERVER_CALLBACK_THREADS_H_
#define LAPSE_SERVER_CALLBACK_THREADS_H_

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/server.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/base/mutex.h"

namespace lapse {

class CallbackThreadParking final : public grpc::CallbackGenericService {
 public:
  // The method the parked call makes; not in any service.
  static constexpr char kMethod[] = "/lapse.internal.CallbackThreads/Park";

  CallbackThreadParking() = default;
  CallbackThreadParking(const CallbackThreadParking&) = delete;
  CallbackThreadParking& operator=(const CallbackThreadParking&) = delete;
  // Releases the parked thread.
  ~CallbackThreadParking() override;

  // Parks one callback thread in a call from `server`'s in-process channel,
  // unless one is parked in this process already (by this object or
  // another); returns once it is parked (true) or not (false). `server` is
  // this service's, started.
  bool Park(grpc::Server* server);
  // Lets the parked thread go, if one is, and waits for its call to end;
  // Park may park one again.
  void Release();
  // Whether this object holds a parked thread.
  bool parked();
  // Waits until parked() is `parked` and the thread has been parked at least
  // `times` times in all, or until `deadline`; whether it got there. For
  // tests.
  bool AwaitParked(bool parked, int times, absl::Time deadline);

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  // One Park's call, alive until it has ended.
  struct Hold {
    std::unique_ptr<grpc::GenericStub> stub;
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    // The call reached CreateReactor, which holds its thread.
    bool parked = false;
    // Release let it go.
    bool released = false;
    // The call ended (parked and released, or refused).
    bool call_ended = false;
  };

  Mutex mu_;
  CondVar changed_;
  // Park's call, from Park until Release (or until it was refused); null
  // otherwise. CreateReactor takes the call once, while it is not parked.
  std::unique_ptr<Hold> hold_ ABSL_GUARDED_BY(mu_);
  // The last hold released, kept until the next one goes: gRPC may still be
  // leaving its call's callback when Release returns.
  std::unique_ptr<Hold> last_ ABSL_GUARDED_BY(mu_);
  // Threads parked so far.
  int times_parked_ ABSL_GUARDED_BY(mu_) = 0;
};

// When a parked thread is better let go: from the process's CPU time,
// sampled at a fixed interval. Parked, the thread is released once every one
// of the last `busy_samples` intervals used at least `busy_share` of a core;
// released, it is parked again `released_for` later, and the samples start
// anew. Not thread-safe; ParkingGovernor calls it from its one thread.
class ParkingPolicy {
 public:
  struct Options {
    absl::Duration interval = absl::Milliseconds(50);
    // Fraction of one core's time.
    double busy_share = 0.9;
    int busy_samples = 2;
    absl::Duration released_for = absl::Seconds(5);
  };
  enum class Action { kNone, kRelease, kPark };

  explicit ParkingPolicy(const Options& options) : options_(options) {}

  const Options& options() const { return options_; }

  // The sample taken at `now`: `cpu` is the process's CPU time since it
  // started, `parked` whether a thread is parked now.
  Action Next(absl::Time now, absl::Duration cpu, bool parked);

 private:
  const Options options_;
  bool sampled_ = false;
  absl::Time last_now_;
  absl::Duration last_cpu_;
  // Consecutive intervals that were busy, while parked.
  int busy_ = 0;
  // When the policy released the thread; InfinitePast when it did not.
  absl::Time released_at_ = absl::InfinitePast();
};

// Applies a ParkingPolicy to `parking` on a thread of its own, from
// construction until Stop (or destruction): every policy interval it reads
// the process's CPU time and releases or parks the thread as the policy
// says. `parking` and `server` (parking's, started) outlive it.
class ParkingGovernor {
 public:
  ParkingGovernor(CallbackThreadParking* parking, grpc::Server* server,
                  const ParkingPolicy::Options& options);
  ParkingGovernor(const ParkingGovernor&) = delete;
  ParkingGovernor& operator=(const ParkingGovernor&) = delete;
  ~ParkingGovernor();

  // Stops the thread and waits for it; idempotent. A thread it released
  // stays released, one parked stays parked.
  void Stop();

 private:
  void Run();

  CallbackThreadParking* const parking_;
  grpc::Server* const server_;
  ParkingPolicy policy_;
  Mutex mu_;
  CondVar stop_requested_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_CALLBACK_THREADS_H_

// CallbackThreadParking: serves a server's callback-API calls on one fewer of
// gRPC's callback threads, by holding one of them in a call until Release.
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
// then runs on the threads left (one, on up to five cores), so large batched
// requests are parsed one at a time (slower there, same page). Hence opt in
// (lapsed --park_callback_thread).
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
//   ...
//   parking.Release();  // before server->Shutdown(), which would wait for it
//
// The parked call comes from the server's in-process channel; calls to any
// other unregistered method, or to the parking method from anywhere else,
// are UNIMPLEMENTED as without it. Thread-safe.
#ifndef LAPSE_SERVER_CALLBACK_THREADS_H_
#define LAPSE_SERVER_CALLBACK_THREADS_H_

#include <memory>

#include "absl/base/thread_annotations.h"
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
  // unless one is parked in this process already; returns once it is parked
  // (true) or not (false). `server` is this service's, started.
  bool Park(grpc::Server* server);
  // Lets the parked thread go and waits for its call to end. Idempotent.
  void Release();

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  Mutex mu_;
  CondVar changed_;
  // Park's call is on its way; CreateReactor takes it once.
  bool expecting_ ABSL_GUARDED_BY(mu_) = false;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  // The in-process call ended (parked and released, or refused).
  bool call_ended_ ABSL_GUARDED_BY(mu_) = false;
  // This object holds the process's one parked thread.
  bool holds_ ABSL_GUARDED_BY(mu_) = false;

  // The in-process call's, alive until it has ended.
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_CALLBACK_THREADS_H_

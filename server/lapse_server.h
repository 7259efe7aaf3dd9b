// LapseServer: a whole lapse server in one object, for lapsed and for tests.
//
// Owns the store (today the EmbeddedStore: engine, event feed, expirer and,
// with ServerOptions::store.data_dir set, the write-ahead log), the WatchHub,
// the service and the grpc::Server (with the standard health service and
// server reflection, which can describe grpc.health.v1 as well as lapse.v1).
//
// Health: "" is SERVING from Start to Shutdown (the process is alive: use it
// for liveness); "lapse.v1.LapseService" is SERVING only while the store takes
// writes too, and NOT_SERVING while the write-ahead log refuses them, e.g. on
// a full disk, until they resume by themselves (use it for readiness).
//
//   lapse::ServerOptions options;
//   options.listen_address = "127.0.0.1:0";
//   options.store.data_dir = "/var/lib/lapse";
//   lapse::LapseServer server(options);
//   absl::StatusOr<int> port = server.Start();
//   ...
//   server.Shutdown(absl::Seconds(5));
//
// Start and Shutdown must not run concurrently with each other; everything
// else is thread-safe, and Shutdown may run while clients are mid-RPC. The
// accessors are valid once Start() has succeeded; embedded_store() is for
// tests that drive the engine directly, e.g. with a FakeClock:
//   clock.Advance(absl::Seconds(30));
//   server.embedded_store().expirer().Wake();
#ifndef LAPSE_SERVER_LAPSE_SERVER_H_
#define LAPSE_SERVER_LAPSE_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "server/base/mutex.h"
#include "server/service/lapse_service.h"
#include "server/service/watch_hub.h"
#include "server/storage/embedded_store.h"
#include "server/storage/store.h"

namespace lapse {

struct ServerOptions {
  // "host:port"; port 0 picks a free one (see Start()).
  std::string listen_address = "127.0.0.1:50051";
  EmbeddedStore::Options store;
  // An idle watch stream gets an empty batch this often.
  absl::Duration heartbeat_interval = absl::Seconds(30);
  // Bounds on one watch batch.
  size_t watch_batch_max_events = 1000;
  size_t watch_batch_max_bytes = size_t{1} << 20;
  // gRPC's receive and send message size limits.
  int max_message_bytes = 16 << 20;
};

// What a server with `options` may put in one answer, as
// Limits::max_response_bytes counts it: a message of max_message_bytes less
// the largest page token. INVALID_ARGUMENT when that cannot hold one member
// of the largest key and value, one collection of the longest name, or the
// answer to a request of max_members_per_request keys of the longest size.
absl::StatusOr<size_t> ResponseBytesFor(const ServerOptions& options);

class LapseServer {
 public:
  explicit LapseServer(const ServerOptions& options);
  // Shuts down with no grace period if still running.
  ~LapseServer();
  LapseServer(const LapseServer&) = delete;
  LapseServer& operator=(const LapseServer&) = delete;

  // Recovers the data directory (if any) and starts serving, with the
  // store's Limits::max_response_bytes set to ResponseBytesFor(options).
  // Returns the bound port; INVALID_ARGUMENT when ResponseBytesFor refuses
  // the options, FAILED_PRECONDITION when the data directory is locked by
  // another server, DATA_LOSS when it is damaged, UNAVAILABLE when the
  // address cannot be listened on. Call at most once.
  absl::StatusOr<int> Start();

  // Drains: health turns NOT_SERVING, new RPCs fail with UNAVAILABLE, watch
  // streams end with UNAVAILABLE naming their last delivered sequence, then
  // in-flight RPCs get `grace` to finish before they are cancelled, and the
  // expirer stops. Idempotent.
  void Shutdown(absl::Duration grace);

  Store& store() { return *store_; }
  EmbeddedStore& embedded_store() { return *store_; }

 private:
  // The store's WritableListener: sets the service's health.
  void OnWritableChanged(const absl::Status& status);

  // Constant after construction.
  const ServerOptions options_;

  // State below is protected by health_mu_; declared before the store, whose
  // log thread reports here until the store is gone.
  Mutex health_mu_;
  // server_'s health service, from Start until Shutdown; null otherwise.
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(health_mu_) = nullptr;
  // The store's last word on writes.
  absl::Status writable_ ABSL_GUARDED_BY(health_mu_);

  // Built by Start(), in this order; destroyed in the reverse one: the hub
  // outlives the store that tells it about new events.
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<EmbeddedStore> store_;
  std::unique_ptr<LapseServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_LAPSE_SERVER_H_

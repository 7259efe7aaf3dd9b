// LapseServer: a whole lapse server in one object, for lapsed and for tests.
//
// Owns the EventLog, the Engine, the Expirer, the WatchHub, the service and
// the grpc::Server (with the standard health service and server reflection).
// The store is memory-only: the log's first sequence is the clock's now in
// nanoseconds since the Unix epoch, so a restarted server never reuses a
// sequence a client may hold.
//
//   lapse::ServerOptions options;
//   options.listen_address = "127.0.0.1:0";
//   lapse::LapseServer server(options);
//   absl::StatusOr<int> port = server.Start();
//   ...
//   server.Shutdown(absl::Seconds(5));
//
// Start and Shutdown must not run concurrently with each other; everything
// else is thread-safe, and Shutdown may run while clients are mid-RPC. The
// accessors are for tests that drive the engine directly, e.g. with a
// FakeClock:
//   clock.Advance(absl::Seconds(30));
//   server.expirer().Wake();
#ifndef LAPSE_SERVER_LAPSE_SERVER_H_
#define LAPSE_SERVER_LAPSE_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/clock.h"
#include "server/engine.h"
#include "server/event_log.h"
#include "server/expirer.h"
#include "server/lapse_service.h"
#include "server/limits.h"
#include "server/watch_hub.h"

namespace lapse {

struct ServerOptions {
  // "host:port"; port 0 picks a free one (see Start()).
  std::string listen_address = "127.0.0.1:50051";
  size_t shards = 16;
  Limits limits;
  // Retention of the expiry event log: whichever bound is hit first.
  size_t event_retention_events = 1'000'000;
  size_t event_retention_bytes = size_t{256} << 20;
  // An idle watch stream gets an empty batch this often.
  absl::Duration heartbeat_interval = absl::Seconds(30);
  // Bounds on one watch batch.
  size_t watch_batch_max_events = 1000;
  size_t watch_batch_max_bytes = size_t{1} << 20;
  // gRPC's receive and send message size limits.
  int max_message_bytes = 16 << 20;
  // Not owned; must outlive the server.
  Clock* clock = RealClock();
};

class LapseServer {
 public:
  explicit LapseServer(const ServerOptions& options);
  // Shuts down with no grace period if still running.
  ~LapseServer();
  LapseServer(const LapseServer&) = delete;
  LapseServer& operator=(const LapseServer&) = delete;

  // Starts serving. Returns the bound port, or UNAVAILABLE when the address
  // cannot be listened on. Call at most once.
  absl::StatusOr<int> Start();

  // Drains: health turns NOT_SERVING, new RPCs fail with UNAVAILABLE, watch
  // streams end with UNAVAILABLE naming their last delivered sequence, then
  // in-flight RPCs get `grace` to finish before they are cancelled, and the
  // expirer stops. Idempotent.
  void Shutdown(absl::Duration grace);

  Engine& engine() { return engine_; }
  EventLog& event_log() { return event_log_; }
  // Valid until Shutdown().
  Expirer& expirer() { return *expirer_; }

 private:
  // Constant after construction.
  const ServerOptions options_;

  EventLog event_log_;
  Engine engine_;
  WatchHub hub_;
  LapseServiceImpl service_;
  std::unique_ptr<Expirer> expirer_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_LAPSE_SERVER_H_

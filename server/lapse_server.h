// LapseServer: a whole lapse server in one object, for lapsed and for tests.
//
// Owns the EventLog, the Engine, the Expirer, the WatchHub, the service, the
// grpc::Server (with the standard health service and server reflection) and,
// with ServerOptions::data_dir set, the DurableStore: then every change is in
// the write-ahead log before its RPC answers, and Start() recovers the state a
// previous run left. Without a data_dir the store is memory-only: the log's
// first sequence is the clock's now in nanoseconds since the Unix epoch, so a
// restarted server never reuses a sequence a client may hold.
//
//   lapse::ServerOptions options;
//   options.listen_address = "127.0.0.1:0";
//   options.data_dir = "/var/lib/lapse";
//   lapse::LapseServer server(options);
//   absl::StatusOr<int> port = server.Start();
//   ...
//   server.Shutdown(absl::Seconds(5));
//
// Start and Shutdown must not run concurrently with each other; everything
// else is thread-safe, and Shutdown may run while clients are mid-RPC. The
// accessors are for tests that drive the engine directly, e.g. with a
// FakeClock, and are valid once Start() has succeeded:
//   clock.Advance(absl::Seconds(30));
//   server.expirer().Wake();
#ifndef LAPSE_SERVER_LAPSE_SERVER_H_
#define LAPSE_SERVER_LAPSE_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/base/clock.h"
#include "server/engine/engine.h"
#include "server/engine/event_log.h"
#include "server/engine/expirer.h"
#include "server/service/lapse_service.h"
#include "server/engine/limits.h"
#include "server/storage/durable_store.h"
#include "server/storage/wal.h"
#include "server/service/watch_hub.h"

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

  // Durability: on when data_dir is set (see storage/durable_store.h).
  std::string data_dir;
  FsyncPolicy fsync = FsyncPolicy::kEverySecond;
  size_t snapshot_after_bytes = size_t{256} << 20;
  size_t wal_segment_bytes = size_t{64} << 20;
  bool wal_truncate_damaged = false;
};

class LapseServer {
 public:
  explicit LapseServer(const ServerOptions& options);
  // Shuts down with no grace period if still running.
  ~LapseServer();
  LapseServer(const LapseServer&) = delete;
  LapseServer& operator=(const LapseServer&) = delete;

  // Recovers the data directory (if any) and starts serving. Returns the
  // bound port; FAILED_PRECONDITION when the data directory is locked by
  // another server, DATA_LOSS when it is damaged, UNAVAILABLE when the address
  // cannot be listened on. Call at most once.
  absl::StatusOr<int> Start();

  // Drains: health turns NOT_SERVING, new RPCs fail with UNAVAILABLE, watch
  // streams end with UNAVAILABLE naming their last delivered sequence, then
  // in-flight RPCs get `grace` to finish before they are cancelled, and the
  // expirer stops. Idempotent.
  void Shutdown(absl::Duration grace);

  Engine& engine() { return *engine_; }
  EventLog& event_log() { return *event_log_; }
  // Valid until Shutdown().
  Expirer& expirer() { return *expirer_; }
  // Null when memory-only.
  DurableStore* store() { return store_.get(); }
  // What Start() recovered; empty when memory-only.
  const std::optional<RecoveryStats>& recovery() const { return recovery_; }

 private:
  absl::Status OpenStore();

  // Constant after construction.
  const ServerOptions options_;

  // How the engine wakes the expirer: built before and destroyed after both.
  ExpirerWakeup expirer_wakeup_;

  // Built by Start(), in this order; destroyed in the reverse one: the store
  // outlives the engine that journals to it, the event log outlives the
  // store's flusher that makes events visible in it.
  std::unique_ptr<EventLog> event_log_;
  std::unique_ptr<DurableStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<LapseServiceImpl> service_;
  std::unique_ptr<Expirer> expirer_;
  std::unique_ptr<grpc::Server> server_;
  std::optional<RecoveryStats> recovery_;
  bool shut_down_ = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_LAPSE_SERVER_H_

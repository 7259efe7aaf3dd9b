// LapseServer: a whole lapse server in one object, for lapsed and for tests.
//
// Start() installs the process-wide accept guard (server/accept_guard.h), so
// that running out of descriptors never stops the listener, and calls
// RouteGrpcLogs().
//
// Owns the store — the EmbeddedStore (engine, event feed, expirer and, with
// ServerOptions::store.data_dir set, the write-ahead log) by default, or with
// ServerOptions::redis_cluster set the RedisClusterStore (issue #11: state in
// a Redis Cluster, this server one stateless replica of many) — the WatchHub,
// the GroupHub (long polls and Consume streams),
// the service and the grpc::Server (with the standard health service and
// server reflection, which can describe grpc.health.v1 as well as lapse.v1),
// and with ServerOptions::metrics_listen set, Prometheus /metrics
// (server/metrics), and with ServerOptions::auth_file set, the AuthFile the
// service enforces. With ServerOptions::health_listen set, a second
// grpc::Server on that port serves the same health statuses, in plaintext.
//
// Health: "" is SERVING from Start to Shutdown (the process is alive: use it
// for liveness); "lapse.v1.LapseService" is SERVING only while the store takes
// writes too, and NOT_SERVING while the write-ahead log refuses them, e.g. on
// a full disk, until they resume by themselves (use it for readiness). The
// Redis Cluster store has no such state: a call that cannot reach Redis fails
// UNAVAILABLE on its own.
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
// accessors are valid once Start() has succeeded; embedded_store() and
// redis_store() are for what only one store has (recovery figures) and for
// tests that drive the store directly, e.g. with a FakeClock:
//   clock.Advance(absl::Seconds(30));
//   server.embedded_store().expirer().Wake();
#ifndef LAPSE_SERVER_LAPSE_SERVER_H_
#define LAPSE_SERVER_LAPSE_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "server/auth/auth_file.h"
#include "server/base/block_pool.h"
#include "server/base/mutex.h"
#include "server/base/thread_priority.h"
#include "server/callback_threads.h"
#include "server/metrics/server_metrics.h"
#include "server/service/group_hub.h"
#include "server/service/lapse_service.h"
#include "server/service/watch_hub.h"
#include "server/storage/embedded_store.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "server/storage/store.h"
#include "server/tls_credentials.h"

namespace lapse {

struct ServerOptions {
  // HOST:PORT, [IPV6]:PORT or unix:/PATH (server/listen_address.h); port 0
  // picks a free one (see Start()).
  std::string listen_address = "127.0.0.1:50051";
  // The embedded store's options. Its limits and clock apply to either store,
  // and with redis_cluster set event_retention_events and _bytes bound the
  // replica's local buffer of events (RedisClusterStoreOptions::
  // event_buffer_events, _bytes); the rest is the embedded store's alone.
  EmbeddedStore::Options store;
  // Set: the Redis Cluster store serves instead of the embedded one. Its
  // limits, clock, event buffer and on_events_readable are set from the
  // above and by the server.
  std::optional<redis::RedisClusterStoreOptions> redis_cluster;
  // Asked for by the threads that make expiries and hand them to watch
  // streams: the embedded store's expirer and the watch dispatcher
  // (server/base/thread_priority.h). lapsed asks for kRealtime.
  ThreadPriority expiry_thread_priority = ThreadPriority::kNormal;
  // An idle watch stream gets an empty batch this often.
  absl::Duration heartbeat_interval = absl::Seconds(30);
  // Bounds on one watch batch.
  size_t watch_batch_max_events = 1000;
  size_t watch_batch_max_bytes = size_t{1} << 20;
  // gRPC's receive and send message size limits.
  int max_message_bytes = 16 << 20;
  // Descriptors kept free below the open-file limit: a connection that would
  // take one of them is reset at once (server/accept_guard.h).
  int reserved_fds = 64;
  // "host:port" to serve Prometheus /metrics on (port 0 picks a free one);
  // empty: no metrics.
  std::string metrics_listen;
  // Watch streams open at once across the server (WatchHub::Options).
  size_t max_watch_streams = 10000;
  // Polls waiting (PollRequest.wait) and Consume streams open at once
  // (GroupHub::Options).
  size_t max_waiting_polls = 10000;
  size_t max_consume_streams = 10000;
  // Bytes of watch batches written and not yet completed, across all streams.
  size_t watch_pinned_bytes = size_t{64} << 20;
  // A watch stream whose write has not completed for this long is cancelled.
  absl::Duration watch_stall_timeout = absl::Seconds(60);
  // Concurrent HTTP/2 streams (RPCs) one client connection may open, sent to
  // clients as SETTINGS_MAX_CONCURRENT_STREAMS: more wait in the client.
  int max_concurrent_streams = 1000;
  // Hold one of gRPC's callback threads out of the server's work while the
  // process uses less than a core (server/callback_threads.h): small requests
  // are served without handing the poller role between threads; a busier
  // server gets the thread back. lapsed turns it on unless told otherwise.
  bool park_callback_thread = false;
  // TLS (mTLS with tls.client_ca_file) on listen_address, Unix socket too;
  // plaintext when tls.cert_file is empty (server/tls_credentials.h).
  TlsOptions tls;
  // "host:port" of a second, plaintext gRPC port that serves only
  // grpc.health.v1 (and reflection), with the same statuses: for probes that
  // cannot speak TLS, such as the kubelet's. Empty: none.
  std::string health_listen;
  // An auth file (server/auth/auth_policy.h) to enforce, re-read when it
  // changes (polled every auth_poll_interval); empty: anyone may do anything.
  std::string auth_file;
  absl::Duration auth_poll_interval = absl::Seconds(2);
};

// Routes gRPC's own log lines into lapse's log (server/base/log.h), at most
// 20 a minute, for the rest of the process. lapsed calls it before grpc_init,
// so gRPC's first lines go there too. Idempotent.
void RouteGrpcLogs();

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

  // Recovers the data directory (if any), or connects to the Redis Cluster,
  // and starts serving, with the store's Limits::max_response_bytes set to
  // ResponseBytesFor(options).
  // Returns the bound port; INVALID_ARGUMENT when the listen (or health)
  // address is malformed, ResponseBytesFor refuses the options, CheckTlsFiles
  // the TLS files (before anything else starts) or the auth file cannot be
  // read or parsed, FAILED_PRECONDITION
  // when the data directory is locked by another server or the open-file
  // limit leaves nothing beyond reserved_fds, DATA_LOSS when the data
  // directory is damaged, UNAVAILABLE when the address (or the metrics or
  // health address) cannot be listened on or the Redis Cluster cannot be
  // reached within its router's retry budget. Call at most once.
  absl::StatusOr<int> Start();

  // Drains: health turns NOT_SERVING, new RPCs fail with UNAVAILABLE, watch
  // streams end with UNAVAILABLE naming their last delivered sequence,
  // waiting polls answer with what is deliverable, Consume streams end
  // UNAVAILABLE once the requests they read are answered, then
  // in-flight RPCs get `grace` to finish before they are cancelled, and the
  // expirer and /metrics stop. (The Redis store's reaper runs until the
  // server is destroyed, then deregisters, so the other replicas take its
  // partitions over at their next heartbeat.) When the grace ends, the calls left are
  // cancelled; if they have not ended 500 ms later, the connections this
  // server accepted are shut down (shutdown(2)), so a client that stopped
  // reading its socket cannot hold it up: returns within about `grace` +
  // 0.5 s (tests allow it 5 s more on a loaded machine). Idempotent.
  void Shutdown(absl::Duration grace);

  Store& store() { return *store_; }
  WatchHub& watch_hub() { return *hub_; }
  GroupHub& group_hub() { return *group_hub_; }
  // REQUIRES: the embedded store serves (no ServerOptions::redis_cluster).
  EmbeddedStore& embedded_store();
  // Null unless ServerOptions::redis_cluster is set.
  redis::RedisClusterStore* redis_store() { return redis_; }
  // Null without ServerOptions::auth_file. Tests with auth_poll_interval zero
  // call its ReloadIfChanged() instead of waiting for a poll.
  AuthFile* auth_file() { return auth_.get(); }
  // The port /metrics is served on; 0 without ServerOptions::metrics_listen.
  int metrics_port() const { return metrics_port_; }
  // The plaintext health port; 0 without ServerOptions::health_listen.
  int health_port() const { return health_port_; }

 private:
  // The store's WritableListener: sets the service's health.
  void OnWritableChanged(const absl::Status& status);

  // Constant after construction.
  const ServerOptions options_;

  // State below is protected by health_mu_; declared before the store, whose
  // log thread reports here until the store is gone.
  Mutex health_mu_;
  // The health services of server_ and health_server_, from Start until
  // Shutdown; empty otherwise.
  std::vector<grpc::HealthCheckServiceInterface*> health_ ABSL_GUARDED_BY(health_mu_);
  // The store's last word on writes.
  absl::Status writable_ ABSL_GUARDED_BY(health_mu_);

  // Built by Start(), in this order; destroyed in the reverse one: the hub
  // outlives the store that tells it about new events, the metrics outlive
  // the store and the server that feed them (and stop serving, in Shutdown,
  // before the store they read goes).
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<GroupHub> group_hub_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Store> store_;
  // store_ as what it is: exactly one is set once Start has opened it.
  EmbeddedStore* embedded_ = nullptr;
  redis::RedisClusterStore* redis_ = nullptr;
  std::unique_ptr<AuthFile> auth_;
  std::unique_ptr<LapseServiceImpl> service_;
  // Set with options_.park_callback_thread; outlives server_, which calls it.
  std::unique_ptr<CallbackThreadParking> parking_;
  // Lets parking_'s thread go while the process is busy; stopped in Shutdown.
  std::unique_ptr<ParkingGovernor> parking_governor_;
  std::unique_ptr<grpc::Server> server_;
  // Serves health_listen; null without it.
  std::unique_ptr<grpc::Server> health_server_;
  int metrics_port_ = 0;
  int health_port_ = 0;
  // The port Start() bound.
  int port_ = 0;
  bool shut_down_ = false;

  // Gives the message arenas' pooled blocks back to the kernel once the
  // requests that used them stop (server/service/operation.h); from Start
  // until Shutdown.
  std::unique_ptr<BlockReleaser> memory_release_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_LAPSE_SERVER_H_

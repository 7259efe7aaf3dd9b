// ServerMetrics: lapsed's Prometheus metrics, served as text on
// http://ADDRESS/metrics (prometheus-cpp's pull exposer, on civetweb).
//
// Three sources feed it:
// - RPCs, through a gRPC server interceptor (rpc_interceptor.h): a latency
//   histogram by method and status code, the calls in flight by method
//   (watch streams are the in-flight WatchExpirations calls), and the calls
//   the auth file refused.
// - Hooks the store calls as things happen: every expiry event appended
//   (OnExpiryEvent: events emitted, expiry lag = expired_at - deadline) and
//   every write and fsync of the write-ahead log (OnWalIo).
// - The store's state, read on each scrape through its accessors. The
//   embedded store's: members, collections, pending deadlines, the event
//   log's retained events, bytes and oldest sequence, each consumer group's
//   lag, pending events, dead letters and lost sequences, WAL totals, the last
//   snapshot, the recovery. The Redis Cluster store's: its reaper's figures
//   (passes, members reaped, partitions owned and taken on, live replicas).
//
//   lapse::ServerMetrics metrics;
//   options.on_event = [&metrics](const ExpiryEvent& e) { metrics.OnExpiryEvent(e); };
//   options.on_wal_io = [&metrics](WalIo io, absl::Duration d) { metrics.OnWalIo(io, d); };
//   ... open the store; builder.experimental().SetInterceptorCreators(...InterceptorFactory())
//   absl::StatusOr<int> port = metrics.Serve("0.0.0.0:9090", store.get());
//   ...
//   metrics.StopServing();  // before the store goes
//
// Every name starts with lapse_; docs/metrics.md lists them. Sequence
// numbers are exported as Prometheus' float64, exact up to 2^53.
//
// Thread-safe. The hooks may run on any thread. Serve and StopServing must
// not run concurrently with each other; the object must outlive the store
// whose hooks call it and every RPC of the server its interceptors watch.
#ifndef LAPSE_SERVER_METRICS_SERVER_METRICS_H_
#define LAPSE_SERVER_METRICS_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/engine/expiry_event.h"
#include "server/storage/embedded_store.h"
#include "server/storage/redis/redis_cluster_store.h"
#include "server/storage/wal.h"

namespace lapse {

class ServerMetrics final {
 public:
  ServerMetrics();
  // Stops serving.
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // The store's hooks (EmbeddedStore::Options::on_event, on_wal_io).
  void OnExpiryEvent(const ExpiryEvent& event);
  void OnWalIo(WalIo io, absl::Duration took);

  // A factory for grpc::ServerBuilder's interceptors that records every RPC
  // into these metrics.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Starts serving /metrics on `address` ("host:port"; port 0 picks a free
  // one) with `store`'s state read on each scrape. Returns the bound port;
  // UNAVAILABLE when the address cannot be listened on. `store` must stay
  // valid until StopServing. Call at most once.
  absl::StatusOr<int> Serve(const std::string& address, EmbeddedStore* store);
  absl::StatusOr<int> Serve(const std::string& address, redis::RedisClusterStore* store);
  // Stops the HTTP server; returns once no scrape is running. Idempotent.
  void StopServing();

 private:
  // Constant after construction. The registry holds the metrics the hooks
  // and the interceptors update; the families below are owned by it.
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter& expiry_events_;
  prometheus::Histogram& expiry_lag_;
  prometheus::Histogram& wal_write_;
  prometheus::Histogram& wal_fsync_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Family<prometheus::Gauge>& rpcs_in_flight_;
  prometheus::Family<prometheus::Counter>& auth_denied_;

  // Serves the registry and `store_gauges`; see Serve.
  absl::StatusOr<int> ServeWith(const std::string& address,
                                std::shared_ptr<prometheus::Collectable> store_gauges);

  // Set by Serve, reset by StopServing. The store's gauges are collected by
  // store_gauges_, which the exposer holds only weakly.
  std::shared_ptr<prometheus::Collectable> store_gauges_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_METRICS_SERVER_METRICS_H_

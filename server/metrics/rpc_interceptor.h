// RpcMetricsFactory: a gRPC server interceptor factory that times every RPC.
//
// Each call is observed once in `duration` (a histogram family labelled
// method, code) when its status is sent, or as CANCELLED when it ends without
// one; `in_flight` (a gauge family labelled method) counts the calls started
// and not yet ended. A streaming call's duration is the stream's lifetime.
//
//   builder.experimental().SetInterceptorCreators(
//       {std::make_unique<RpcMetricsFactory>(duration_family, in_flight_family,
//                                            denied_family)});
//
// Calls to methods under kUnobservedPrefix are the server's own (the call
// that parks a callback thread, server/callback_threads.h), not clients':
// they are not observed.
//
// Method labels are bounded: after kMaxMethods distinct names (a server has
// a few dozen), further ones are labelled "other", so a client sending
// made-up method names cannot grow the metrics without bound.
//
// Thread-safe; the families must outlive every call of the server.
#ifndef LAPSE_SERVER_METRICS_RPC_INTERCEPTOR_H_
#define LAPSE_SERVER_METRICS_RPC_INTERCEPTOR_H_

#include <array>
#include <cstddef>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "server/base/mutex.h"

namespace lapse {

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  static constexpr size_t kMaxMethods = 64;
  static constexpr char kUnobservedPrefix[] = "/lapse.internal.";

  RpcMetricsFactory(prometheus::Family<prometheus::Histogram>& duration,
                    prometheus::Family<prometheus::Gauge>& in_flight,
                    prometheus::Family<prometheus::Counter>& denied);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // One method's series, made on its first call.
  struct Method {
    std::string name;
    // Set when made, constant after.
    prometheus::Gauge* in_flight = nullptr;
    // Indexed by grpc::StatusCode (0..16); each made on its code's first
    // use, under the factory's mu_.
    std::array<prometheus::Histogram*, 17> by_code{};
  };
  // For the interceptors this factory makes: the series of `name` (or of
  // "other"), and its histogram for `code`.
  Method& MethodNamed(absl::string_view name);
  prometheus::Histogram& DurationOf(Method& method, int code);
  // Counts a call refused with `code` if it is UNAUTHENTICATED or
  // PERMISSION_DENIED.
  void CountIfDenied(grpc::StatusCode code);

 private:
  // Constant after construction.
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& in_flight_;
  prometheus::Counter& unauthenticated_;
  prometheus::Counter& permission_denied_;

  // State below is protected by mu_.
  Mutex mu_;
  // Node-based: a Method's address is stable for the interceptors using it.
  absl::node_hash_map<std::string, Method> methods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lapse

#endif  // LAPSE_SERVER_METRICS_RPC_INTERCEPTOR_H_

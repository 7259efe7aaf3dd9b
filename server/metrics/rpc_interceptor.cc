#include "server/metrics/rpc_interceptor.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lapse {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Times one call: from its creation (the call's start) to its status being
// sent, or to its end when no status is sent.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(RpcMetricsFactory* factory, RpcMetricsFactory::Method* method)
      : factory_(factory), method_(method), start_(absl::Now()) {
    method_->in_flight->Increment();
  }

  ~RpcMetricsInterceptor() override {
    if (!observed_) Observe(grpc::StatusCode::CANCELLED);
    method_->in_flight->Decrement();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!observed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Observe(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Observe(grpc::StatusCode code) {
    observed_ = true;
    factory_->CountIfDenied(code);
    factory_->DurationOf(*method_, code).Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  }

  RpcMetricsFactory* const factory_;
  RpcMetricsFactory::Method* const method_;
  const absl::Time start_;
  // gRPC runs a call's interception points one at a time.
  bool observed_ = false;
};

// Buckets from 100 µs to 10 s, for unary calls; watch streams last longer
// and land in +Inf.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

}  // namespace

RpcMetricsFactory::RpcMetricsFactory(prometheus::Family<prometheus::Histogram>& duration,
                                     prometheus::Family<prometheus::Gauge>& in_flight,
                                     prometheus::Family<prometheus::Counter>& denied)
    : duration_(duration),
      in_flight_(in_flight),
      unauthenticated_(denied.Add({{"code", "UNAUTHENTICATED"}})),
      permission_denied_(denied.Add({{"code", "PERMISSION_DENIED"}})) {}

void RpcMetricsFactory::CountIfDenied(grpc::StatusCode code) {
  if (code == grpc::StatusCode::UNAUTHENTICATED) unauthenticated_.Increment();
  if (code == grpc::StatusCode::PERMISSION_DENIED) permission_denied_.Increment();
}

grpc::experimental::Interceptor* RpcMetricsFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (absl::StartsWith(info->method(), kUnobservedPrefix)) return nullptr;
  return new RpcMetricsInterceptor(this, &MethodNamed(info->method()));
}

RpcMetricsFactory::Method& RpcMetricsFactory::MethodNamed(absl::string_view name) {
  MutexLock lock(&mu_);
  auto it = methods_.find(name);
  if (it != methods_.end()) return it->second;
  if (methods_.size() >= kMaxMethods) name = "other";
  auto [made, inserted] = methods_.try_emplace(name);
  if (inserted) {
    made->second.name = std::string(name);
    made->second.in_flight = &in_flight_.Add({{"method", made->second.name}});
  }
  return made->second;
}

prometheus::Histogram& RpcMetricsFactory::DurationOf(Method& method, int code) {
  const size_t index = code >= 0 && static_cast<size_t>(code) < method.by_code.size()
                           ? static_cast<size_t>(code)
                           : static_cast<size_t>(grpc::StatusCode::UNKNOWN);
  MutexLock lock(&mu_);
  prometheus::Histogram*& histogram = method.by_code[index];
  if (histogram == nullptr) {
    const std::string code_name =
        absl::StatusCodeToString(static_cast<absl::StatusCode>(static_cast<int>(index)));
    histogram = &duration_.Add({{"method", method.name}, {"code", code_name}}, DurationBuckets());
  }
  return *histogram;
}

}  // namespace lapse

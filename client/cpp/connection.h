// Connection: the gRPC channel and stub behind a Client, and the deadline and
// retry loop of its unary calls.
//
//   absl::StatusOr<v1::GetMembersResponse> response =
//       connection.Call<v1::GetMembersResponse>(
//           Idempotency::kIdempotent, call,
//           [&](grpc::ClientContext* context, v1::GetMembersResponse* out) {
//             return connection.stub().GetMembers(context, request, out);
//           });
//
// Shared (shared_ptr) by a Client and its Subscriptions, which may outlive it.
// Thread-safe.
#ifndef LAPSE_CLIENT_CPP_CONNECTION_H_
#define LAPSE_CLIENT_CPP_CONNECTION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cpp/backoff.h"
#include "client/cpp/convert.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.grpc.pb.h"

namespace lapse::client::internal {

// Whether a call may be repeated after UNAVAILABLE. UNAVAILABLE does not say
// whether the server applied the call, so only calls whose repetition cannot
// change the outcome are retried.
enum class Idempotency { kIdempotent, kNotIdempotent };

class Connection final {
 public:
  Connection(const std::string& target,
             std::shared_ptr<grpc::ChannelCredentials> credentials,
             const ClientOptions& options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  v1::LapseService::Stub& stub() { return *stub_; }

  // Runs `attempt(context, response)` with the call's deadline until it
  // succeeds, fails with anything but UNAVAILABLE, was not idempotent, used
  // up max_attempts, or the next backoff would end past the deadline; returns
  // the last status.
  template <typename Response, typename Attempt>
  absl::StatusOr<Response> Call(Idempotency idempotency,
                                const CallOptions& call, Attempt attempt);

 private:
  // Constant after construction.
  const ClientOptions options_;
  const std::unique_ptr<v1::LapseService::Stub> stub_;
};

template <typename Response, typename Attempt>
absl::StatusOr<Response> Connection::Call(Idempotency idempotency,
                                          const CallOptions& call,
                                          Attempt attempt) {
  const absl::Time deadline =
      absl::Now() + call.timeout.value_or(options_.default_timeout);
  Backoff backoff(options_.retry_backoff);
  for (int attempts = 1;; ++attempts) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    Response response;
    const grpc::Status status = attempt(&context, &response);
    if (status.ok()) return response;
    if (idempotency == Idempotency::kNotIdempotent ||
        status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        attempts >= options_.max_attempts) {
      return FromGrpcStatus(status);
    }
    absl::BitGen random;
    const absl::Duration delay = backoff.Next(random);
    if (absl::Now() + delay >= deadline) return FromGrpcStatus(status);
    absl::SleepFor(delay);
  }
}

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_CONNECTION_H_

// Connection: the gRPC channel and stub behind a Client, and the one path of
// its unary calls: deadline, credentials, retries, and the response as the
// client's type. Channels are made here too (NewChannel in lapse/client.h,
// ChannelWith). PutMembers calls take the channel's write stream
// (write_stream.h) instead while another PutMembers is in flight: many
// callers then share one stream. PutMembersAsync calls always take it.
//
//   absl::StatusOr<CollectionInfo> info = connection.Call<CollectionInfo>(
//       &v1::LapseService::Stub::GetCollection,
//       GetCollectionRequestToProto(name), Idempotency::kIdempotent, call);
//
// Shared (shared_ptr) by a Client and its Subscriptions, which may outlive it.
// Thread-safe.
#ifndef LAPSE_CLIENT_CPP_CONNECTION_H_
#define LAPSE_CLIENT_CPP_CONNECTION_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cpp/backoff.h"
#include "client/cpp/bearer_token.h"
#include "client/cpp/convert.h"
#include "client/cpp/write_stream.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.grpc.pb.h"

namespace lapse::client::internal {

// Whether a call may be repeated after UNAVAILABLE. UNAVAILABLE does not say
// whether the server applied the call, so only calls whose repetition cannot
// change the outcome are retried.
enum class Idempotency { kIdempotent, kNotIdempotent };

// Whether a stream (a watch, a consumer's) that ended with `status` is to
// be opened again: the server went away or is draining, a connection
// dropped, or something between us ended the stream (a stream the client
// cancelled itself is not asked about).
bool StreamResumable(const grpc::Status& status);

// A channel to `target` with `credentials` and the channel arguments of
// `options`, options.tls->server_name included.
std::shared_ptr<grpc::Channel> ChannelWith(const std::string& target,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const ClientOptions& options);

class Connection final {
 public:
  // Without a channel (NewChannel's error), every call fails with that error.
  Connection(absl::StatusOr<std::shared_ptr<grpc::Channel>> channel, const ClientOptions& options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // OK, or why there is no channel.
  const absl::Status& channel_status() const { return channel_status_; }
  // REQUIRES: channel_status() is OK.
  v1::LapseService::Stub& stub() { return *stub_; }
  // Adds the call credentials of ClientOptions to `context` (BearerToken).
  absl::Status AddCredentials(grpc::ClientContext* context) { return token_.AddTo(context); }

  // A unary method of the stub, e.g. &v1::LapseService::Stub::PutMembers.
  template <typename Request, typename Response>
  using StubMethod = grpc::Status (v1::LapseService::Stub::*)(grpc::ClientContext*, const Request&,
                                                              Response*);

  // Calls `method` with the call's deadline until it succeeds, fails with
  // anything but UNAVAILABLE, was not idempotent, used up max_attempts, or the
  // next backoff would end past the deadline. Returns the last status, or the
  // response as FromProto (convert.h) reads it.
  template <typename Result, typename Request, typename Response>
  absl::StatusOr<Result> Call(StubMethod<Request, Response> method, const Request& request,
                              Idempotency idempotency, const CallOptions& call);

  // A unary PutMembers, or, while another is in flight, an operation of the
  // write stream. Never retried.
  absl::StatusOr<std::vector<PutResult>> PutMembers(const v1::PutMembersRequest& request,
                                                    const CallOptions& call);
  // An operation of the write stream, encoded in place by `build`
  // (WriteStream::Build); `done` gets its outcome. Never retried.
  void PutMembersAsync(WriteStream::Build build, const CallOptions& call, PutCallback done);

 private:
  // Constant after construction.
  const ClientOptions options_;
  const absl::Status channel_status_;
  // Null without a channel.
  const std::unique_ptr<v1::LapseService::Stub> stub_;
  // The write stream's, on the same channel; null without a channel.
  const std::unique_ptr<grpc::GenericStub> generic_stub_;
  BearerToken token_;

  // PutMembers calls in progress.
  std::atomic<int> puts_in_flight_{0};
  // Declared after generic_stub_ and token_, which it uses: destroyed (its stream
  // ended) first.
  WriteStream writes_;
};

template <typename Result, typename Request, typename Response>
absl::StatusOr<Result> Connection::Call(StubMethod<Request, Response> method,
                                        const Request& request, Idempotency idempotency,
                                        const CallOptions& call) {
  if (!channel_status_.ok()) return channel_status_;
  const absl::Time deadline = absl::Now() + call.timeout.value_or(options_.default_timeout);
  Backoff backoff(options_.retry_backoff);
  for (int attempts = 1;; ++attempts) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    if (absl::Status added = token_.AddTo(&context); !added.ok()) return added;
    Response response;
    const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (status.ok()) return FromProto(response);
    if (idempotency == Idempotency::kNotIdempotent ||
        status.error_code() != grpc::StatusCode::UNAVAILABLE || attempts >= options_.max_attempts) {
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

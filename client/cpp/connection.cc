#include "client/cpp/connection.h"

#include <climits>
#include <cstdint>
#include <utility>

#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace lapse::client::internal {
namespace {

// A duration as a channel argument in milliseconds; infinite is INT_MAX,
// which gRPC reads as "never".
int Milliseconds(absl::Duration d) {
  const int64_t ms = absl::ToInt64Milliseconds(d);
  if (ms >= INT_MAX) return INT_MAX;
  return ms < 1 ? 1 : static_cast<int>(ms);
}

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              Milliseconds(options.reconnect_backoff_initial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Milliseconds(options.reconnect_backoff_max));
  return args;
}

}  // namespace

Connection::Connection(const std::string& target,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       const ClientOptions& options)
    : options_(options),
      stub_(v1::LapseService::NewStub(
          grpc::CreateCustomChannel(target, std::move(credentials), ChannelArgs(options)))),
      writes_(stub_.get()) {}

absl::StatusOr<std::vector<PutResult>> Connection::PutMembers(const v1::PutMembersRequest& request,
                                                              const CallOptions& call) {
  const bool shared = puts_in_flight_.fetch_add(1, std::memory_order_relaxed) > 0;
  absl::StatusOr<std::vector<PutResult>> result;
  if (shared) {
    const absl::Time deadline = absl::Now() + call.timeout.value_or(options_.default_timeout);
    absl::StatusOr<v1::PutMembersResponse> response = writes_.Put(request, deadline);
    result = response.ok() ? FromProto(*response) : response.status();
  } else {
    result = Call<std::vector<PutResult>>(&v1::LapseService::Stub::PutMembers, request,
                                          Idempotency::kNotIdempotent, call);
  }
  puts_in_flight_.fetch_sub(1, std::memory_order_relaxed);
  return result;
}

}  // namespace lapse::client::internal

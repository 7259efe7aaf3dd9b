// Conversions between lapse/client.h's plain types and the lapse.v1 messages,
// shared by the Client's calls and its watch loop.
//
//   v1::WatchExpirationsRequest request = WatchRequest(options, position);
//   ExpiryEvent event = EventFromProto(response.events(0));
//
// All functions are pure and thread-safe.
#ifndef LAPSE_CLIENT_CPP_CONVERT_H_
#define LAPSE_CLIENT_CPP_CONVERT_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.pb.h"

namespace lapse::client::internal {

// gRPC and Abseil share the canonical codes.
absl::Status FromGrpcStatus(const grpc::Status& status);

absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp);
void TimeToProto(absl::Time time, google::protobuf::Timestamp* out);
void DurationToProto(absl::Duration duration, google::protobuf::Duration* out);

// Unset on output means persistent (or none).
template <typename Message>
std::optional<absl::Time> ExpireTimeFromProto(const Message& message) {
  if (!message.has_expire_time()) return std::nullopt;
  return TimeFromProto(message.expire_time());
}

ExpiryEvent EventFromProto(const v1::ExpiryEvent& event);

// The request that starts (no `resume_after`) or resumes (right after
// `resume_after`) a subscription with `options`.
v1::WatchExpirationsRequest WatchRequest(const WatchOptions& options,
                                         std::optional<uint64_t> resume_after);

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_CONVERT_H_

#include "client/cpp/convert.h"

#include <cstdint>

namespace lapse::client::internal {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

void TimeToProto(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(time);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
}

void DurationToProto(absl::Duration duration, google::protobuf::Duration* out) {
  // Truncation toward zero keeps seconds and nanos of the same sign, as the
  // Duration message requires.
  absl::Duration remainder;
  const int64_t seconds =
      absl::IDivDuration(duration, absl::Seconds(1), &remainder);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(remainder)));
}

ExpiryEvent EventFromProto(const v1::ExpiryEvent& event) {
  ExpiryEvent out;
  out.sequence = event.sequence();
  out.collection = event.collection();
  out.key = event.key();
  out.value = event.value();
  out.expire_time = TimeFromProto(event.expire_time());
  out.expired_at = TimeFromProto(event.expired_at());
  return out;
}

v1::WatchExpirationsRequest WatchRequest(const WatchOptions& options,
                                         std::optional<uint64_t> resume_after) {
  v1::WatchExpirationsRequest request;
  for (const std::string& collection : options.collections) {
    request.add_collections(collection);
  }
  request.set_collection_prefix(options.collection_prefix);
  request.set_include_values(options.include_values);
  if (resume_after.has_value()) {
    request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
    request.set_after_sequence(*resume_after);
    return request;
  }
  switch (options.start) {
    case StartPosition::kNew:
      request.set_start_position(v1::START_POSITION_NEW);
      break;
    case StartPosition::kOldest:
      request.set_start_position(v1::START_POSITION_OLDEST);
      break;
    case StartPosition::kAfterSequence:
      request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
      request.set_after_sequence(options.after_sequence);
      break;
  }
  return request;
}

}  // namespace lapse::client::internal

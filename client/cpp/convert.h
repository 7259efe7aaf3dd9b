// Conversions between lapse/client.h's plain types and the lapse.v1 messages:
// every request the Client, its watch loop and its consumers send, and every response they
// read. The client's counterpart of server/service/proto_convert.h.
//
//   v1::GetMembersRequest request = GetMembersRequestToProto(collection, keys,
//                                                            options);
//   absl::StatusOr<std::vector<GetResult>> results = FromProto(response);
//   ExpiryEvent event = EventFromProto(response.events(0));
//
// A response this client cannot read (an outcome it predates) is UNKNOWN,
// naming the RPC. All functions are pure and thread-safe.
#ifndef LAPSE_CLIENT_CPP_CONVERT_H_
#define LAPSE_CLIENT_CPP_CONVERT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.pb.h"

namespace lapse::client::internal {

// gRPC and Abseil share the canonical codes.
absl::Status FromGrpcStatus(const grpc::Status& status);
// An error sent as a code and a message (a write operation's result): a code
// outside the canonical ones (1-16) is UNKNOWN, as gRPC reads a call's status
// code it does not know.
absl::Status FromResultCode(int32_t code, absl::string_view message);

// ---- Time -------------------------------------------------------------------

// A Timestamp's or a Duration's two fields.
struct SecondsAndNanos {
  int64_t seconds;
  int32_t nanos;
};
SecondsAndNanos TimeFields(absl::Time time);
// Truncated toward zero: seconds and nanos of the same sign, as the Duration
// message requires.
SecondsAndNanos DurationFields(absl::Duration duration);
absl::Time TimeFromFields(int64_t seconds, int32_t nanos);

absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp);
void TimeToProto(absl::Time time, google::protobuf::Timestamp* out);
void DurationToProto(absl::Duration duration, google::protobuf::Duration* out);

// Unset on output means persistent (or none).
template <typename Message>
std::optional<absl::Time> ExpireTimeFromProto(const Message& message) {
  if (!message.has_expire_time()) return std::nullopt;
  return TimeFromProto(message.expire_time());
}

// ---- Requests ---------------------------------------------------------------

v1::PutMembersRequest PutMembersRequestToProto(const std::string& collection,
                                               const std::vector<MemberWrite>& members,
                                               const PutOptions& options);
v1::PutCondition PutConditionToProto(PutCondition condition);
v1::GetMembersRequest GetMembersRequestToProto(const std::string& collection,
                                               const std::vector<std::string>& keys,
                                               const GetOptions& options);
v1::RemoveMembersRequest RemoveMembersRequestToProto(const std::string& collection,
                                                     const std::vector<std::string>& keys);
v1::ExpireMembersRequest ExpireMembersRequestToProto(const std::string& collection,
                                                     const std::vector<std::string>& keys,
                                                     const Expiration& expiration,
                                                     ExpireCondition condition);
v1::PersistMembersRequest PersistMembersRequestToProto(const std::string& collection,
                                                       const std::vector<std::string>& keys);
v1::ListMembersRequest ListMembersRequestToProto(const std::string& collection,
                                                 const ListMembersOptions& options);
v1::GetCollectionRequest GetCollectionRequestToProto(const std::string& name);
v1::ListCollectionsRequest ListCollectionsRequestToProto(const ListCollectionsOptions& options);
v1::DeleteCollectionRequest DeleteCollectionRequestToProto(const std::string& name);

// The request that starts a subscription with `options`, or resumes it:
// from `resume_token` when not empty, else right after `resume_after` when
// set.
v1::WatchExpirationsRequest WatchRequest(const WatchOptions& options,
                                         std::optional<uint64_t> resume_after,
                                         const std::string& resume_token);

// Consumer groups.
v1::StartPosition StartPositionToProto(StartPosition start);
v1::CreateConsumerGroupRequest CreateConsumerGroupRequestToProto(
    const ConsumerGroupOptions& options);
v1::ResetConsumerGroupRequest ResetConsumerGroupRequestToProto(const std::string& name,
                                                               StartPosition start,
                                                               uint64_t after_sequence);
v1::PollRequest PollRequestToProto(const std::string& group, const std::string& consumer,
                                   const PollOptions& options);
// The first request of a Consume stream.
v1::ConsumeRequest ConsumeStartToProto(const std::string& group, const std::string& consumer,
                                       uint32_t max_in_flight, uint32_t max_batch);
// The leases of an Ack, Nack or ExtendLeases request, or of a ConsumeRequest.
void LeasesToProto(const std::vector<LeaseRef>& leases,
                   google::protobuf::RepeatedPtrField<v1::LeaseRef>* out);

// ---- Responses --------------------------------------------------------------
//
// What each Client method returns for its RPC's response.

absl::StatusOr<std::vector<PutResult>> FromProto(const v1::PutMembersResponse& response);
std::vector<GetResult> FromProto(const v1::GetMembersResponse& response);
std::vector<RemoveResult> FromProto(const v1::RemoveMembersResponse& response);
absl::StatusOr<std::vector<ExpireResult>> FromProto(const v1::ExpireMembersResponse& response);
absl::StatusOr<std::vector<PersistResult>> FromProto(const v1::PersistMembersResponse& response);
MemberPage FromProto(const v1::ListMembersResponse& response);
CollectionInfo FromProto(const v1::GetCollectionResponse& response);
CollectionPage FromProto(const v1::ListCollectionsResponse& response);
// How many live members the collection had.
uint64_t FromProto(const v1::DeleteCollectionResponse& response);

ConsumerGroupInfo FromProto(const v1::CreateConsumerGroupResponse& response);
ConsumerGroupInfo FromProto(const v1::GetConsumerGroupResponse& response);
ConsumerGroupPage FromProto(const v1::ListConsumerGroupsResponse& response);
ConsumerGroupInfo FromProto(const v1::DeleteConsumerGroupResponse& response);
ConsumerGroupInfo FromProto(const v1::ResetConsumerGroupResponse& response);
PollResult FromProto(const v1::PollResponse& response);
std::vector<LeaseResult> FromProto(const v1::AckResponse& response);
std::vector<LeaseResult> FromProto(const v1::NackResponse& response);
std::vector<LeaseResult> FromProto(const v1::ExtendLeasesResponse& response);
DeadLetterPage FromProto(const v1::ListDeadLettersResponse& response);
// How many dead letters were made pending again.
uint64_t FromProto(const v1::RedriveDeadLettersResponse& response);

ExpiryEvent EventFromProto(const v1::ExpiryEvent& event);
// The same into `out`, whose strings keep their buffers.
void EventFromProto(const v1::ExpiryEvent& event, ExpiryEvent* out);
Delivery DeliveryFromProto(const v1::Delivery& delivery);
// The status of one lease's ack, nack or extension.
LeaseResult LeaseResultFromProto(const v1::LeaseResult& result);

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_CONVERT_H_

// Proto <-> engine conversions for the gRPC service layer.
//
// Everything the service needs to turn a lapse.v1 request into engine types
// and engine results back into lapse.v1 messages: validated Timestamp and
// Duration conversion, enum mapping, opaque page tokens (AIP-158) and the
// absl::Status -> grpc::Status mapping at the edge.
//
//   absl::StatusOr<absl::Time> t =
//       lapse::TimeFromProto(write.expire_time(), "members[2].expire_time");
//   if (!t.ok()) return lapse::ToGrpcStatus(t.status());
//
// Errors are INVALID_ARGUMENT and their message starts with the offending
// field ("members[2].expire_time: nanos out of range"). All functions are
// pure and thread-safe.
#ifndef LAPSE_SERVER_SERVICE_PROTO_CONVERT_H_
#define LAPSE_SERVER_SERVICE_PROTO_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/deadline.h"
#include "server/engine/engine.h"
#include "server/engine/expiry_event.h"
#include "server/engine/limits.h"

namespace lapse {

// ---- Time ------------------------------------------------------------------

// A Timestamp within 0001-01-01 .. 9999-12-31 with nanos in [0, 1e9).
absl::StatusOr<absl::Time> TimeFromProto(const google::protobuf::Timestamp& ts,
                                         absl::string_view field);
// A Duration within +-10000 years whose seconds and nanos agree in sign.
absl::StatusOr<absl::Duration> DurationFromProto(const google::protobuf::Duration& d,
                                                 absl::string_view field);
// std::nullopt for NoDeadline(): output leaves the field unset.
std::optional<google::protobuf::Timestamp> TimeToProto(absl::Time t);
// Fills `*out` in place (no temporary message to copy, as the form above
// needs: a put's answer does this per member). `t` is not NoDeadline().
void TimeToProto(absl::Time t, google::protobuf::Timestamp* out);

// The two arms of an AIP-214 `oneof expiration`.
absl::StatusOr<Expiration> ExpirationAt(const google::protobuf::Timestamp& ts,
                                        absl::string_view field);
absl::StatusOr<Expiration> ExpirationTtl(const google::protobuf::Duration& d,
                                         absl::string_view field);

// The same from a Timestamp's or Duration's two fields, for a request read
// without its generated message (request_parser.h, PutMembersView).
absl::StatusOr<Expiration> ExpirationAt(int64_t seconds, int32_t nanos, absl::string_view field);
absl::StatusOr<Expiration> ExpirationTtl(int64_t seconds, int32_t nanos, absl::string_view field);

// ---- Enums -----------------------------------------------------------------

// Unknown values (proto3 enums are open) are INVALID_ARGUMENT naming `field`.
absl::StatusOr<PutCondition> PutConditionFromProto(v1::PutCondition c, absl::string_view field);
absl::StatusOr<ExpireCondition> ExpireConditionFromProto(v1::ExpireCondition c,
                                                         absl::string_view field);
absl::StatusOr<MemberOrder> MemberOrderFromProto(v1::MemberOrder o, absl::string_view field);

v1::PutOutcome PutOutcomeToProto(PutOutcome o);
v1::ExpireOutcome ExpireOutcomeToProto(ExpireOutcome o);
v1::PersistOutcome PersistOutcomeToProto(PersistOutcome o);

// ---- Messages --------------------------------------------------------------

void MemberToProto(const ListedMember& member, v1::Member* out);
void CollectionInfoToProto(const CollectionInfo& info, v1::CollectionInfo* out);
// The value is copied only when `include_value`.
void ExpiryEventToProto(const ExpiryEvent& event, bool include_value, v1::ExpiryEvent* out);
// Appends `event` (value included when it has one) with `sequence` to `out`
// as one element of WatchExpirationsResponse.events: the bytes protobuf
// serializes for that element, made without building the message. A
// response is its events appended in order, then the serialized response
// holding the other fields (a message's fields may follow one another
// in any order; these come in field order, as protobuf writes them).
void AppendWatchEvent(uint64_t sequence, const ExpiryEventView& event, std::string* out);

// A PutMembersResponse written as it is filled, into the bytes protobuf
// serializes for it (no message built): a write stream's answer to a put.
// Results come in order; the other fields may be set at any time.
class PutMembersBytes {
 public:
  explicit PutMembersBytes(std::string* out) : out_(out) {}

  // Room for `results` results of short keys.
  void Reserve(int results) { out_->reserve(out_->size() + 40 * static_cast<size_t>(results)); }

  // Appends one element of `results`; `expire_time` NoDeadline() leaves it unset.
  void AddResult(absl::string_view key, v1::PutOutcome outcome, absl::Time expire_time);
  void set_created_count(uint32_t count) { created_count_ = count; }
  bool has_default_expire_time() const { return default_expire_time_ != NoDeadline(); }
  // `t` is not NoDeadline().
  void set_default_expire_time(absl::Time t) { default_expire_time_ = t; }
  // Appends the fields after `results`; call once, last.
  void Finish();

 private:
  std::string* const out_;
  uint32_t created_count_ = 0;
  absl::Time default_expire_time_ = NoDeadline();
};

// One operation's answer on a StreamWrites stream: `put_members` (a
// serialized PutMembersResponse) when `code` is 0 (OK), otherwise the code
// and its message.
struct WriteResultView {
  int32_t code = 0;
  absl::string_view message;
  absl::string_view put_members;
};
// The bytes protobuf serializes for a StreamWritesResponse of `results`, in
// one slice, made without building the response or its results.
grpc::ByteBuffer EncodeStreamWritesResponse(absl::Span<const WriteResultView> results);

// ---- Page tokens -----------------------------------------------------------
//
// Opaque to clients: web-safe base64 of a small versioned encoding. A token
// remembers what it was issued for, so using it with another collection,
// order or prefix is INVALID_ARGUMENT naming `page_token`, as is garbage.

std::string EncodeMemberPageToken(absl::string_view collection, MemberOrder order,
                                  const MemberCursor& cursor);
absl::StatusOr<MemberCursor> DecodeMemberPageToken(absl::string_view token,
                                                   absl::string_view collection, MemberOrder order);

std::string EncodeCollectionPageToken(absl::string_view prefix, absl::string_view after);
// Returns the name to continue after.
absl::StatusOr<std::string> DecodeCollectionPageToken(absl::string_view token,
                                                      absl::string_view prefix);
// The name a List request's page starts after: "" without a token (the first
// page), else DecodeCollectionPageToken's.
absl::StatusOr<std::string> CollectionPageAfter(absl::string_view token, absl::string_view prefix);

// The most bytes a next_page_token takes in a ListMembers or ListCollections
// response under `limits`, its field's tag and length included: the part of
// a response that Limits::max_response_bytes does not count.
size_t MaxPageTokenBytes(const Limits& limits);

// ---- Status ----------------------------------------------------------------

// Same canonical code, same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_PROTO_CONVERT_H_

#include "server/service/proto_convert.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "grpc/slice.h"
#include "grpcpp/support/slice.h"
#include "server/base/coding.h"
#include "server/base/wire_format.h"

namespace lapse {
namespace {

// google/protobuf/timestamp.proto: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
constexpr int64_t kMinTimestampSeconds = -62'135'596'800;
constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;
// google/protobuf/duration.proto: about +-10000 years.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int32_t kMaxNanos = 999'999'999;

// Page tokens: a version byte, a kind byte, then the fields below. Bumping
// the version invalidates tokens held by clients, which then restart paging.
constexpr uint8_t kTokenVersion = 1;
constexpr uint8_t kMemberToken = 'm';
constexpr uint8_t kCollectionToken = 'c';
// The cursor's time in a member token: finite, or NoDeadline().
constexpr uint8_t kFiniteTime = 0;
constexpr uint8_t kNoDeadline = 1;

// A time as a Timestamp's two fields.
struct UnixTime {
  int64_t seconds;
  int32_t nanos;
};

// A Timestamp's fields, or none for NoDeadline() (the field left unset).
std::optional<UnixTime> TimestampOf(absl::Time t) {
  if (t == NoDeadline()) return std::nullopt;
  const int64_t seconds = absl::ToUnixSeconds(t);
  return UnixTime{
      seconds, static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds)))};
}

// ---- Wire format (server/base/wire_format.h) ----
// What AppendWatchEvent, PutMembersBytes and EncodeStreamWritesResponse write.

using wire::DelimitedSize;
using wire::Signed;
using wire::StringFieldSize;
using wire::VarintFieldSize;
using wire::WriteDelimitedHeader;
using wire::WriteStringField;
using wire::WriteVarintField;

// The bytes of a Timestamp message's fields.
size_t TimestampBodySize(UnixTime t) {
  return VarintFieldSize(Signed(t.seconds)) + VarintFieldSize(Signed(t.nanos));
}

size_t TimestampFieldSize(const std::optional<UnixTime>& t) {
  return t.has_value() ? DelimitedSize(TimestampBodySize(*t)) : 0;
}

uint8_t* WriteTimestampField(int field, const std::optional<UnixTime>& t, uint8_t* p) {
  if (!t.has_value()) return p;
  p = WriteDelimitedHeader(field, TimestampBodySize(*t), p);
  p = WriteVarintField(google::protobuf::Timestamp::kSecondsFieldNumber, Signed(t->seconds), p);
  return WriteVarintField(google::protobuf::Timestamp::kNanosFieldNumber, Signed(t->nanos), p);
}

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status UnknownEnum(absl::string_view field, int value) {
  return FieldError(field, absl::StrCat("unknown value ", value));
}

absl::Status MalformedToken() {
  return FieldError("page_token", "malformed; use a next_page_token as returned");
}

bool GetString(absl::string_view* in, std::string* out) {
  absl::string_view s;
  if (!GetLengthPrefixed(in, &s)) return false;
  out->assign(s.data(), s.size());
  return true;
}

// Unescapes `token` and checks its version and kind.
absl::StatusOr<std::string> OpenToken(absl::string_view token, uint8_t kind) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw) || raw.size() < 2 ||
      static_cast<uint8_t>(raw[0]) != kTokenVersion || static_cast<uint8_t>(raw[1]) != kind) {
    return MalformedToken();
  }
  return raw.substr(2);
}

std::string SealToken(uint8_t kind, const std::string& body) {
  std::string raw;
  raw.push_back(static_cast<char>(kTokenVersion));
  raw.push_back(static_cast<char>(kind));
  raw.append(body);
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<absl::Time> TimeFromFields(int64_t seconds, int32_t nanos, absl::string_view field) {
  if (seconds < kMinTimestampSeconds || seconds > kMaxTimestampSeconds) {
    return FieldError(field, "seconds out of range");
  }
  if (nanos < 0 || nanos > kMaxNanos) {
    return FieldError(field, "nanos out of range");
  }
  return absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos);
}

absl::StatusOr<absl::Duration> DurationFromFields(int64_t seconds, int32_t nanos,
                                                  absl::string_view field) {
  if (seconds < -kMaxDurationSeconds || seconds > kMaxDurationSeconds) {
    return FieldError(field, "seconds out of range");
  }
  if (nanos < -kMaxNanos || nanos > kMaxNanos) {
    return FieldError(field, "nanos out of range");
  }
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return FieldError(field, "seconds and nanos must have the same sign");
  }
  return absl::Seconds(seconds) + absl::Nanoseconds(nanos);
}

}  // namespace

absl::StatusOr<absl::Time> TimeFromProto(const google::protobuf::Timestamp& ts,
                                         absl::string_view field) {
  return TimeFromFields(ts.seconds(), ts.nanos(), field);
}

absl::StatusOr<absl::Duration> DurationFromProto(const google::protobuf::Duration& d,
                                                 absl::string_view field) {
  return DurationFromFields(d.seconds(), d.nanos(), field);
}

std::optional<google::protobuf::Timestamp> TimeToProto(absl::Time t) {
  if (t == NoDeadline()) return std::nullopt;
  google::protobuf::Timestamp ts;
  TimeToProto(t, &ts);
  return ts;
}

void TimeToProto(absl::Time t, google::protobuf::Timestamp* out) {
  const std::optional<UnixTime> unix = TimestampOf(t);
  out->set_seconds(unix->seconds);
  out->set_nanos(unix->nanos);
}

absl::StatusOr<Expiration> ExpirationAt(const google::protobuf::Timestamp& ts,
                                        absl::string_view field) {
  absl::StatusOr<absl::Time> t = TimeFromProto(ts, field);
  if (!t.ok()) return t.status();
  return Expiration::At(*t);
}

absl::StatusOr<Expiration> ExpirationTtl(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  absl::StatusOr<absl::Duration> ttl = DurationFromProto(d, field);
  if (!ttl.ok()) return ttl.status();
  return Expiration::Ttl(*ttl);
}

absl::StatusOr<Expiration> ExpirationAt(int64_t seconds, int32_t nanos, absl::string_view field) {
  absl::StatusOr<absl::Time> t = TimeFromFields(seconds, nanos, field);
  if (!t.ok()) return t.status();
  return Expiration::At(*t);
}

absl::StatusOr<Expiration> ExpirationTtl(int64_t seconds, int32_t nanos, absl::string_view field) {
  absl::StatusOr<absl::Duration> ttl = DurationFromFields(seconds, nanos, field);
  if (!ttl.ok()) return ttl.status();
  return Expiration::Ttl(*ttl);
}

absl::StatusOr<PutCondition> PutConditionFromProto(v1::PutCondition c, absl::string_view field) {
  switch (c) {
    case v1::PUT_CONDITION_UNSPECIFIED:
      return PutCondition::kAlways;
    case v1::PUT_CONDITION_IF_ABSENT:
      return PutCondition::kIfAbsent;
    case v1::PUT_CONDITION_IF_PRESENT:
      return PutCondition::kIfPresent;
    default:
      return UnknownEnum(field, c);
  }
}

absl::StatusOr<ExpireCondition> ExpireConditionFromProto(v1::ExpireCondition c,
                                                         absl::string_view field) {
  switch (c) {
    case v1::EXPIRE_CONDITION_UNSPECIFIED:
      return ExpireCondition::kAlways;
    case v1::EXPIRE_CONDITION_IF_NO_EXPIRATION:
      return ExpireCondition::kIfNoExpiration;
    case v1::EXPIRE_CONDITION_IF_HAS_EXPIRATION:
      return ExpireCondition::kIfHasExpiration;
    case v1::EXPIRE_CONDITION_IF_LATER:
      return ExpireCondition::kIfLater;
    case v1::EXPIRE_CONDITION_IF_EARLIER:
      return ExpireCondition::kIfEarlier;
    default:
      return UnknownEnum(field, c);
  }
}

absl::StatusOr<MemberOrder> MemberOrderFromProto(v1::MemberOrder o, absl::string_view field) {
  switch (o) {
    case v1::MEMBER_ORDER_UNSPECIFIED:
    case v1::MEMBER_ORDER_KEY:
      return MemberOrder::kKey;
    case v1::MEMBER_ORDER_EXPIRE_TIME:
      return MemberOrder::kExpireTime;
    default:
      return UnknownEnum(field, o);
  }
}

v1::PutOutcome PutOutcomeToProto(PutOutcome o) {
  switch (o) {
    case PutOutcome::kCreated:
      return v1::PUT_OUTCOME_CREATED;
    case PutOutcome::kReplaced:
      return v1::PUT_OUTCOME_REPLACED;
    case PutOutcome::kSkipped:
      return v1::PUT_OUTCOME_SKIPPED;
  }
  return v1::PUT_OUTCOME_UNSPECIFIED;
}

v1::ExpireOutcome ExpireOutcomeToProto(ExpireOutcome o) {
  switch (o) {
    case ExpireOutcome::kUpdated:
      return v1::EXPIRE_OUTCOME_UPDATED;
    case ExpireOutcome::kConditionNotMet:
      return v1::EXPIRE_OUTCOME_CONDITION_NOT_MET;
    case ExpireOutcome::kNotFound:
      return v1::EXPIRE_OUTCOME_NOT_FOUND;
    case ExpireOutcome::kExpired:
      return v1::EXPIRE_OUTCOME_EXPIRED;
  }
  return v1::EXPIRE_OUTCOME_UNSPECIFIED;
}

v1::PersistOutcome PersistOutcomeToProto(PersistOutcome o) {
  switch (o) {
    case PersistOutcome::kPersisted:
      return v1::PERSIST_OUTCOME_PERSISTED;
    case PersistOutcome::kNoExpiration:
      return v1::PERSIST_OUTCOME_NO_EXPIRATION;
    case PersistOutcome::kNotFound:
      return v1::PERSIST_OUTCOME_NOT_FOUND;
  }
  return v1::PERSIST_OUTCOME_UNSPECIFIED;
}

void MemberToProto(const ListedMember& member, v1::Member* out) {
  out->set_key(member.key);
  out->set_value(member.value);
  if (std::optional<google::protobuf::Timestamp> ts = TimeToProto(member.expire_time)) {
    *out->mutable_expire_time() = *std::move(ts);
  }
}

void CollectionInfoToProto(const CollectionInfo& info, v1::CollectionInfo* out) {
  out->set_name(info.name);
  out->set_member_count(info.member_count);
  out->set_expiring_count(info.expiring_count);
  if (std::optional<google::protobuf::Timestamp> ts = TimeToProto(info.next_expire_time)) {
    *out->mutable_next_expire_time() = *std::move(ts);
  }
}

namespace {}  // namespace

void ExpiryEventToProto(const ExpiryEvent& event, bool include_value, v1::ExpiryEvent* out) {
  out->set_sequence(event.sequence);
  out->set_collection(event.collection);
  out->set_key(event.key);
  if (include_value) out->set_value(event.value);
  if (std::optional<google::protobuf::Timestamp> ts = TimeToProto(event.expire_time)) {
    *out->mutable_expire_time() = *std::move(ts);
  }
  if (std::optional<google::protobuf::Timestamp> ts = TimeToProto(event.expired_at)) {
    *out->mutable_expired_at() = *std::move(ts);
  }
}

void AppendWatchEvent(uint64_t sequence, const ExpiryEventView& event, std::string* out) {
  using Event = v1::ExpiryEvent;
  const std::optional<UnixTime> expire_time = TimestampOf(event.expire_time);
  const std::optional<UnixTime> expired_at = TimestampOf(event.expired_at);
  const size_t body = VarintFieldSize(sequence) + StringFieldSize(event.collection) +
                      StringFieldSize(event.key) + StringFieldSize(event.value) +
                      TimestampFieldSize(expire_time) + TimestampFieldSize(expired_at);
  const size_t start = out->size();
  out->resize(start + DelimitedSize(body));
  uint8_t* p = reinterpret_cast<uint8_t*>(out->data() + start);
  p = WriteDelimitedHeader(v1::WatchExpirationsResponse::kEventsFieldNumber, body, p);
  p = WriteVarintField(Event::kSequenceFieldNumber, sequence, p);
  p = WriteStringField(Event::kCollectionFieldNumber, event.collection, p);
  p = WriteStringField(Event::kKeyFieldNumber, event.key, p);
  p = WriteStringField(Event::kValueFieldNumber, event.value, p);
  p = WriteTimestampField(Event::kExpireTimeFieldNumber, expire_time, p);
  p = WriteTimestampField(Event::kExpiredAtFieldNumber, expired_at, p);
  assert(reinterpret_cast<char*>(p) == out->data() + out->size());
}

void PutMembersBytes::AddResult(absl::string_view key, v1::PutOutcome outcome,
                                absl::Time expire_time) {
  using Result = v1::PutMemberResult;
  const std::optional<UnixTime> t = TimestampOf(expire_time);
  const size_t body =
      StringFieldSize(key) + VarintFieldSize(Signed(outcome)) + TimestampFieldSize(t);
  const size_t start = out_->size();
  out_->resize(start + DelimitedSize(body));
  uint8_t* p = reinterpret_cast<uint8_t*>(out_->data() + start);
  p = WriteDelimitedHeader(v1::PutMembersResponse::kResultsFieldNumber, body, p);
  p = WriteStringField(Result::kKeyFieldNumber, key, p);
  p = WriteVarintField(Result::kOutcomeFieldNumber, Signed(outcome), p);
  p = WriteTimestampField(Result::kExpireTimeFieldNumber, t, p);
  assert(reinterpret_cast<char*>(p) == out_->data() + out_->size());
}

void PutMembersBytes::Finish() {
  using Response = v1::PutMembersResponse;
  const std::optional<UnixTime> t = TimestampOf(default_expire_time_);
  const size_t start = out_->size();
  out_->resize(start + VarintFieldSize(created_count_) + TimestampFieldSize(t));
  uint8_t* p = reinterpret_cast<uint8_t*>(out_->data() + start);
  p = WriteVarintField(Response::kCreatedCountFieldNumber, created_count_, p);
  p = WriteTimestampField(Response::kDefaultExpireTimeFieldNumber, t, p);
  assert(reinterpret_cast<char*>(p) == out_->data() + out_->size());
}

grpc::ByteBuffer EncodeStreamWritesResponse(absl::Span<const WriteResultView> results) {
  using Result = v1::WriteOperationResult;
  // Each result's body, then its bytes within the response.
  absl::InlinedVector<size_t, 16> bodies(results.size());
  size_t total = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const WriteResultView& result = results[i];
    size_t body = VarintFieldSize(Signed(result.code)) + StringFieldSize(result.message);
    // An OK result's put_members is set, even when empty.
    if (result.code == 0) body += DelimitedSize(result.put_members.size());
    bodies[i] = body;
    total += DelimitedSize(body);
  }
  grpc::Slice slice(grpc_slice_malloc(total), grpc::Slice::STEAL_REF);
  uint8_t* p = const_cast<uint8_t*>(slice.begin());
  for (size_t i = 0; i < results.size(); ++i) {
    const WriteResultView& result = results[i];
    p = WriteDelimitedHeader(v1::StreamWritesResponse::kResultsFieldNumber, bodies[i], p);
    p = WriteVarintField(Result::kCodeFieldNumber, Signed(result.code), p);
    p = WriteStringField(Result::kMessageFieldNumber, result.message, p);
    if (result.code == 0) {
      p = WriteDelimitedHeader(Result::kPutMembersFieldNumber, result.put_members.size(), p);
      if (!result.put_members.empty()) {
        std::memcpy(p, result.put_members.data(), result.put_members.size());
        p += result.put_members.size();
      }
    }
  }
  assert(p == slice.end());
  return grpc::ByteBuffer(&slice, 1);
}

std::string EncodeMemberPageToken(absl::string_view collection, MemberOrder order,
                                  const MemberCursor& cursor) {
  std::string body;
  PutLengthPrefixed(&body, collection);
  body.push_back(static_cast<char>(order));
  if (cursor.expire_time == NoDeadline()) {
    body.push_back(static_cast<char>(kNoDeadline));
  } else {
    const int64_t seconds = absl::ToUnixSeconds(cursor.expire_time);
    const int64_t nanos =
        absl::ToInt64Nanoseconds(cursor.expire_time - absl::FromUnixSeconds(seconds));
    body.push_back(static_cast<char>(kFiniteTime));
    PutFixed64(&body, static_cast<uint64_t>(seconds));
    PutFixed32(&body, static_cast<uint32_t>(nanos));
  }
  PutLengthPrefixed(&body, cursor.key);
  return SealToken(kMemberToken, body);
}

absl::StatusOr<MemberCursor> DecodeMemberPageToken(absl::string_view token,
                                                   absl::string_view collection,
                                                   MemberOrder order) {
  absl::StatusOr<std::string> body = OpenToken(token, kMemberToken);
  if (!body.ok()) return body.status();
  absl::string_view in = *body;
  std::string token_collection;
  uint8_t token_order;
  uint8_t time_kind;
  if (!GetString(&in, &token_collection) || !GetByte(&in, &token_order) ||
      !GetByte(&in, &time_kind)) {
    return MalformedToken();
  }
  MemberCursor cursor;
  if (time_kind == kNoDeadline) {
    cursor.expire_time = NoDeadline();
  } else if (time_kind == kFiniteTime) {
    uint64_t seconds;
    uint32_t nanos;
    if (!GetFixed64(&in, &seconds) || !GetFixed32(&in, &nanos) ||
        nanos > static_cast<uint32_t>(kMaxNanos)) {
      return MalformedToken();
    }
    cursor.expire_time = absl::FromUnixSeconds(static_cast<int64_t>(seconds)) +
                         absl::Nanoseconds(static_cast<int64_t>(nanos));
  } else {
    return MalformedToken();
  }
  if (!GetString(&in, &cursor.key) || !in.empty()) return MalformedToken();
  if (token_collection != collection || token_order != static_cast<uint8_t>(order)) {
    return FieldError("page_token", "issued for another collection or order_by");
  }
  return cursor;
}

std::string EncodeCollectionPageToken(absl::string_view prefix, absl::string_view after) {
  std::string body;
  PutLengthPrefixed(&body, prefix);
  PutLengthPrefixed(&body, after);
  return SealToken(kCollectionToken, body);
}

absl::StatusOr<std::string> DecodeCollectionPageToken(absl::string_view token,
                                                      absl::string_view prefix) {
  absl::StatusOr<std::string> body = OpenToken(token, kCollectionToken);
  if (!body.ok()) return body.status();
  absl::string_view in = *body;
  std::string token_prefix;
  std::string after;
  if (!GetString(&in, &token_prefix) || !GetString(&in, &after) || !in.empty()) {
    return MalformedToken();
  }
  if (token_prefix != prefix) {
    return FieldError("page_token", "issued for another prefix");
  }
  return after;
}

absl::StatusOr<std::string> CollectionPageAfter(absl::string_view token, absl::string_view prefix) {
  if (token.empty()) return std::string();
  return DecodeCollectionPageToken(token, prefix);
}

size_t MaxPageTokenBytes(const Limits& limits) {
  constexpr size_t kMaxVarint = 10;
  const size_t name = limits.max_collection_name_bytes;
  // A member token: collection, order, time kind, seconds, nanos, key.
  const size_t member = kMaxVarint + name + 1 + 1 + 8 + 4 + kMaxVarint + limits.max_key_bytes;
  // A collection token: prefix, name.
  const size_t collection = 2 * (kMaxVarint + name);
  // Version and kind, then the longer body.
  const size_t raw = 2 + std::max(member, collection);
  // Unpadded base64, then the field's tag and length.
  return (raw + 2) / 3 * 4 + 1 + kMaxVarint;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace lapse

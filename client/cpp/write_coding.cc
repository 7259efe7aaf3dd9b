#include "client/cpp/write_coding.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include "client/cpp/convert.h"
#include "grpcpp/support/status.h"
#include "server/base/wire_format.h"

namespace lapse::client::internal {
namespace {

// ---- Encoding ---------------------------------------------------------------
// Fields in field-number order, proto3 defaults (0, false, "") left out, a
// message field written when set even if empty: as protobuf serializes.
// Every field number here is below 16, so each tag is one byte.

using wire::DelimitedSize;
using wire::Signed;
using wire::StringFieldSize;
using wire::VarintFieldSize;
using wire::WireType;
using wire::WriteDelimitedHeader;
using wire::WriteStringField;
using wire::WriteVarintField;

size_t SecondsAndNanosSize(SecondsAndNanos fields) {
  return VarintFieldSize(Signed(fields.seconds)) + VarintFieldSize(Signed(fields.nanos));
}

// An Expiration as the oneof's fields: a Timestamp (kAt) at `time_field`,
// a Duration (kTtl) at `ttl_field`, or nothing.
struct ExpirationField {
  explicit ExpirationField(const Expiration& expiration, int time_field, int ttl_field) {
    switch (expiration.kind()) {
      case Expiration::Kind::kNone:
        return;
      case Expiration::Kind::kTtl:
        field = ttl_field;
        fields = DurationFields(expiration.ttl());
        break;
      case Expiration::Kind::kAt:
        field = time_field;
        fields = TimeFields(expiration.time());
        break;
    }
    body = SecondsAndNanosSize(fields);
  }
  size_t Size() const { return field == 0 ? 0 : DelimitedSize(body); }
  uint8_t* Write(uint8_t* p) const {
    if (field == 0) return p;
    p = WriteDelimitedHeader(field, body, p);
    p = WriteVarintField(google::protobuf::Timestamp::kSecondsFieldNumber, Signed(fields.seconds),
                         p);
    return WriteVarintField(google::protobuf::Timestamp::kNanosFieldNumber, Signed(fields.nanos),
                            p);
  }

  int field = 0;  // 0: none.
  SecondsAndNanos fields{};
  size_t body = 0;
};

static_assert(int{google::protobuf::Timestamp::kSecondsFieldNumber} ==
                      int{google::protobuf::Duration::kSecondsFieldNumber} &&
                  int{google::protobuf::Timestamp::kNanosFieldNumber} ==
                      int{google::protobuf::Duration::kNanosFieldNumber},
              "Timestamp and Duration share their fields' numbers");

ExpirationField MemberExpiration(const MemberWrite& member) {
  return ExpirationField(member.expiration, v1::MemberWrite::kExpireTimeFieldNumber,
                         v1::MemberWrite::kTtlFieldNumber);
}

size_t MemberBodySize(const MemberWrite& member, const ExpirationField& expiration) {
  return StringFieldSize(member.key) + StringFieldSize(member.value) + expiration.Size() +
         VarintFieldSize(Signed(PutConditionToProto(member.condition))) +
         VarintFieldSize(member.keep_expiration ? 1 : 0);
}

uint8_t* WriteMember(const MemberWrite& member, const ExpirationField& expiration, uint8_t* p) {
  p = WriteStringField(v1::MemberWrite::kKeyFieldNumber, member.key, p);
  p = WriteStringField(v1::MemberWrite::kValueFieldNumber, member.value, p);
  p = expiration.Write(p);
  p = WriteVarintField(v1::MemberWrite::kConditionFieldNumber,
                       Signed(PutConditionToProto(member.condition)), p);
  return WriteVarintField(v1::MemberWrite::kKeepExpirationFieldNumber,
                          member.keep_expiration ? 1 : 0, p);
}

// Appends to `request` one operation, a WriteOperation whose put_members
// `write_put` writes (exactly `put_bytes`).
template <typename WritePut>
void AppendOperation(size_t put_bytes, std::string* request, WritePut write_put) {
  const size_t operation_bytes = DelimitedSize(put_bytes);
  const size_t old_size = request->size();
  request->resize(old_size + DelimitedSize(operation_bytes));
  uint8_t* p = reinterpret_cast<uint8_t*>(request->data()) + old_size;
  p = WriteDelimitedHeader(v1::StreamWritesRequest::kOperationsFieldNumber, operation_bytes, p);
  p = WriteDelimitedHeader(v1::WriteOperation::kPutMembersFieldNumber, put_bytes, p);
  write_put(p);
}

// ---- Reading ----------------------------------------------------------------
// Accepts only what it reads exactly as protobuf would: each field once
// (a repeated one in a run), in field-number order, with its declared wire
// type; varints of at most 10 bytes whose last carries no lost bits; ASCII
// strings (protobuf checks proto3 strings for UTF-8); known outcomes. Anything
// else is left to protobuf.

using wire::Reader;

bool Ascii(absl::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

// Reads a message's fields in order: `field(number, wire_type, reader)`
// reads one field's payload (false: leave the message to protobuf); a field
// number may repeat only if `repeated` says so.
template <typename Field, typename Repeated>
bool ReadFields(absl::string_view body, Repeated repeated, Field field) {
  Reader in(body);
  int last = 0;
  while (!in.done()) {
    int number;
    WireType wire_type;
    if (!in.OneByteTag(&number, &wire_type)) return false;
    if (number < last || (number == last && !repeated(number))) return false;
    last = number;
    if (!field(number, wire_type, in)) return false;
  }
  return true;
}

bool NotRepeated(int) { return false; }

bool ReadVarintField(WireType wire_type, Reader& in, uint64_t* value) {
  return wire_type == WireType::kVarint && in.Varint(value);
}

bool ReadDelimitedField(WireType wire_type, Reader& in, absl::string_view* body) {
  return wire_type == WireType::kLengthDelimited && in.Delimited(body);
}

// `time` may be null: the Timestamp is only checked.
bool ReadTimestamp(absl::string_view body, absl::Time* time) {
  int64_t seconds = 0;
  int32_t nanos = 0;
  const bool read = ReadFields(body, NotRepeated, [&](int number, auto wire_type, Reader& in) {
    uint64_t value;
    if (!ReadVarintField(wire_type, in, &value)) return false;
    switch (number) {
      case google::protobuf::Timestamp::kSecondsFieldNumber:
        seconds = static_cast<int64_t>(value);
        return true;
      case google::protobuf::Timestamp::kNanosFieldNumber:
        nanos = static_cast<int32_t>(value);
        return true;
    }
    return false;
  });
  if (read && time != nullptr) *time = TimeFromFields(seconds, nanos);
  return read;
}

bool ReadPutResult(absl::string_view body, PutResult* result) {
  std::optional<PutOutcome> outcome;
  const bool read = ReadFields(body, NotRepeated, [&](int number, auto wire_type, Reader& in) {
    absl::string_view bytes;
    uint64_t value;
    switch (number) {
      case v1::PutMemberResult::kKeyFieldNumber:
        if (!ReadDelimitedField(wire_type, in, &bytes) || !Ascii(bytes)) return false;
        result->key.assign(bytes.data(), bytes.size());
        return true;
      case v1::PutMemberResult::kOutcomeFieldNumber:
        if (!ReadVarintField(wire_type, in, &value)) return false;
        switch (static_cast<int32_t>(value)) {
          case v1::PUT_OUTCOME_CREATED:
            outcome = PutOutcome::kCreated;
            return true;
          case v1::PUT_OUTCOME_REPLACED:
            outcome = PutOutcome::kReplaced;
            return true;
          case v1::PUT_OUTCOME_SKIPPED:
            outcome = PutOutcome::kSkipped;
            return true;
        }
        return false;
      case v1::PutMemberResult::kExpireTimeFieldNumber: {
        absl::Time time;
        if (!ReadDelimitedField(wire_type, in, &bytes) || !ReadTimestamp(bytes, &time)) {
          return false;
        }
        result->expire_time = time;
        return true;
      }
    }
    return false;
  });
  // An absent outcome is UNSPECIFIED, which FromProto refuses.
  if (!read || !outcome.has_value()) return false;
  result->outcome = *outcome;
  return true;
}

bool ReadPutMembersResponse(absl::string_view body, std::vector<PutResult>* results) {
  return ReadFields(
      body, [](int number) { return number == v1::PutMembersResponse::kResultsFieldNumber; },
      [&](int number, auto wire_type, Reader& in) {
        absl::string_view bytes;
        uint64_t value;
        switch (number) {
          case v1::PutMembersResponse::kResultsFieldNumber:
            return ReadDelimitedField(wire_type, in, &bytes) &&
                   ReadPutResult(bytes, &results->emplace_back());
          case v1::PutMembersResponse::kCreatedCountFieldNumber:
            return ReadVarintField(wire_type, in, &value);
          case v1::PutMembersResponse::kDefaultExpireTimeFieldNumber:
            return ReadDelimitedField(wire_type, in, &bytes) && ReadTimestamp(bytes, nullptr);
        }
        return false;
      });
}

bool ReadOperationResult(absl::string_view body, std::vector<PutAnswer>* answers) {
  int32_t code = 0;
  absl::string_view message;
  std::vector<PutResult> results;
  const bool read = ReadFields(body, NotRepeated, [&](int number, auto wire_type, Reader& in) {
    uint64_t value;
    absl::string_view bytes;
    switch (number) {
      case v1::WriteOperationResult::kCodeFieldNumber:
        if (!ReadVarintField(wire_type, in, &value)) return false;
        code = static_cast<int32_t>(value);
        return true;
      case v1::WriteOperationResult::kMessageFieldNumber:
        return ReadDelimitedField(wire_type, in, &message) && Ascii(message);
      case v1::WriteOperationResult::kPutMembersFieldNumber:
        return ReadDelimitedField(wire_type, in, &bytes) && ReadPutMembersResponse(bytes, &results);
    }
    return false;
  });
  if (!read) return false;
  if (code == 0) {
    answers->emplace_back(std::move(results));
  } else {
    answers->emplace_back(FromResultCode(code, message));
  }
  return true;
}

}  // namespace

void AppendPutMembers(const std::string& collection, const std::vector<MemberWrite>& members,
                      const PutOptions& options, std::string* request) {
  const ExpirationField default_expiration(options.default_expiration,
                                           v1::PutMembersRequest::kDefaultExpireTimeFieldNumber,
                                           v1::PutMembersRequest::kDefaultTtlFieldNumber);
  size_t put_bytes = StringFieldSize(collection) + VarintFieldSize(options.max_members) +
                     default_expiration.Size() +
                     VarintFieldSize(options.omit_created_results ? 1 : 0);
  for (const MemberWrite& member : members) {
    put_bytes += DelimitedSize(MemberBodySize(member, MemberExpiration(member)));
  }
  AppendOperation(put_bytes, request, [&](uint8_t* p) {
    p = WriteStringField(v1::PutMembersRequest::kCollectionFieldNumber, collection, p);
    for (const MemberWrite& member : members) {
      const ExpirationField expiration = MemberExpiration(member);
      p = WriteDelimitedHeader(v1::PutMembersRequest::kMembersFieldNumber,
                               MemberBodySize(member, expiration), p);
      p = WriteMember(member, expiration, p);
    }
    p = WriteVarintField(v1::PutMembersRequest::kMaxMembersFieldNumber, options.max_members, p);
    p = default_expiration.Write(p);
    WriteVarintField(v1::PutMembersRequest::kOmitCreatedResultsFieldNumber,
                     options.omit_created_results ? 1 : 0, p);
  });
}

void AppendPutMembers(const v1::PutMembersRequest& put, std::string* request) {
  const size_t put_bytes = put.ByteSizeLong();
  AppendOperation(put_bytes, request, [&](uint8_t* p) { put.SerializeWithCachedSizesToArray(p); });
}

bool ReadStreamWritesResponseInPlace(absl::string_view response, std::vector<PutAnswer>* answers) {
  const size_t old_size = answers->size();
  const bool read = ReadFields(
      response, [](int number) { return number == v1::StreamWritesResponse::kResultsFieldNumber; },
      [&](int number, auto wire_type, Reader& in) {
        absl::string_view bytes;
        return number == v1::StreamWritesResponse::kResultsFieldNumber &&
               ReadDelimitedField(wire_type, in, &bytes) && ReadOperationResult(bytes, answers);
      });
  if (!read)
    answers->erase(answers->begin() + static_cast<std::ptrdiff_t>(old_size), answers->end());
  return read;
}

bool ReadStreamWritesResponse(absl::string_view response, std::vector<PutAnswer>* answers) {
  if (ReadStreamWritesResponseInPlace(response, answers)) return true;
  v1::StreamWritesResponse parsed;
  if (!parsed.ParseFromArray(response.data(), static_cast<int>(response.size()))) return false;
  for (const v1::WriteOperationResult& result : parsed.results()) {
    if (result.code() == 0) {
      answers->push_back(FromProto(result.put_members()));
    } else {
      answers->push_back(FromResultCode(result.code(), result.message()));
    }
  }
  return true;
}

}  // namespace lapse::client::internal

#include "server/service/request_parser.h"

#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/base/log.h"
#include "server/base/utf8.h"
#include "server/base/wire_format.h"

namespace lapse {
namespace {

// Where protobuf's complaints go while this thread parses a request; nullptr
// the rest of the time.
thread_local std::string* t_parse_complaints = nullptr;

LogLevel LapseLevel(google::protobuf::LogLevel level) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      return LogLevel::kInfo;
    case google::protobuf::LOGLEVEL_WARNING:
      return LogLevel::kWarning;
    default:
      return LogLevel::kError;
  }
}

void OnProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                   const std::string& message) {
  if (t_parse_complaints != nullptr) {
    if (!t_parse_complaints->empty()) t_parse_complaints->append("; ");
    t_parse_complaints->append(message);
    return;
  }
  static RateLimitedLog* const log = new RateLimitedLog(kProtobufLinesPerMinute, absl::Minutes(1));
  log->Log(LapseLevel(level), "protobuf (%s:%d): %s", filename, line, message);
}

// "String field 'lapse.v1.MemberWrite.key' contains invalid UTF-8 data when
// parsing a protocol buffer. ..." (protobuf 3.21) becomes "field
// lapse.v1.MemberWrite.key is not valid UTF-8"; other complaints stay as they
// are.
std::string Explain(absl::string_view complaint) {
  constexpr absl::string_view kPrefix = "String field '";
  constexpr absl::string_view kUtf8 = "' contains invalid UTF-8";
  const size_t end = complaint.find(kUtf8);
  if (complaint.substr(0, kPrefix.size()) != kPrefix || end == absl::string_view::npos) {
    return std::string(complaint);
  }
  return absl::StrCat("field ", complaint.substr(kPrefix.size(), end - kPrefix.size()),
                      " is not valid UTF-8 (string fields must be UTF-8)");
}

// ---- PutMembersView's reader (https://protobuf.dev/programming-guides/encoding/) ----

constexpr wire::WireType kVarint = wire::WireType::kVarint;
constexpr wire::WireType kDelimited = wire::WireType::kLengthDelimited;

// wire::Reader, with the field types a PutMembersView holds.
class WireReader : public wire::Reader {
 public:
  using wire::Reader::Reader;

  // An int32 field (protobuf keeps the low 32 bits; only values that fit are
  // read here).
  bool Int32(int32_t* value) {
    uint64_t v;
    if (!Varint(&v)) return false;
    const auto wide = static_cast<int64_t>(v);
    if (wide < std::numeric_limits<int32_t>::min() || wide > std::numeric_limits<int32_t>::max()) {
      return false;
    }
    *value = static_cast<int32_t>(wide);
    return true;
  }

  // A bool field: any non-zero varint is true.
  bool Bool(bool* value) {
    uint64_t v;
    if (!Varint(&v)) return false;
    *value = v != 0;
    return true;
  }

  // A proto3 `string`: valid UTF-8 by protobuf's own test.
  bool Utf8(absl::string_view* s) {
    return Delimited(s) && (PrintableAsciiPrefix(*s) == s->size() ||
                            google::protobuf::internal::IsStructurallyValidUTF8(
                                s->data(), static_cast<int>(s->size())));
  }
};

// A Timestamp's or Duration's fields (both: seconds = 1, nanos = 2).
bool ReadExpiry(WireReader& field, PutMembersView::Expiry::Kind kind,
                PutMembersView::Expiry* expiry) {
  absl::string_view body;
  if (!field.Delimited(&body)) return false;
  WireReader in(body);
  bool seconds = false;
  bool nanos = false;
  expiry->kind = kind;
  while (!in.done()) {
    uint64_t tag;
    uint64_t value;
    if (!in.Varint(&tag)) return false;
    if (tag == wire::Tag(1, kVarint) && !seconds) {
      if (!in.Varint(&value)) return false;
      expiry->seconds = static_cast<int64_t>(value);
      seconds = true;
    } else if (tag == wire::Tag(2, kVarint) && !nanos) {
      if (!in.Int32(&expiry->nanos)) return false;
      nanos = true;
    } else {
      return false;
    }
  }
  return true;
}

// Reads the next tag of a message of fields 1 to 6 read at most once each,
// but for `repeated` (0: none); `oneof_first` and `oneof_second` are one
// oneof, read once between them. `seen` has bit n set once field n is read.
// False where protobuf might read otherwise.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool NextTag(WireReader& in, uint32_t repeated,
                                                 uint32_t oneof_first, uint32_t oneof_second,
                                                 uint32_t* seen, uint64_t* tag) {
  if (!in.Varint(tag)) return false;
  const uint32_t field = static_cast<uint32_t>(*tag >> 3);
  if (field == 0 || field > 6) return false;
  const uint32_t bit = field == repeated ? 0 : 1u << (field == oneof_second ? oneof_first : field);
  if ((*seen & bit) != 0) return false;
  *seen |= bit;
  return true;
}

bool ReadMember(absl::string_view body, PutMembersView::Member* member) {
  using Kind = PutMembersView::Expiry::Kind;
  WireReader in(body);
  uint32_t seen = 0;
  uint64_t tag;
  while (!in.done()) {
    // expire_time (3) and ttl (4) are the oneof expiration.
    if (!NextTag(in, /*repeated=*/0, 3, 4, &seen, &tag)) return false;
    switch (tag) {
      case wire::Tag(1, kDelimited):
        if (!in.Utf8(&member->key)) return false;
        break;
      case wire::Tag(2, kDelimited):
        if (!in.Delimited(&member->value)) return false;
        break;
      case wire::Tag(3, kDelimited):
        if (!ReadExpiry(in, Kind::kTime, &member->expiration)) return false;
        break;
      case wire::Tag(4, kDelimited):
        if (!ReadExpiry(in, Kind::kTtl, &member->expiration)) return false;
        break;
      case wire::Tag(5, kVarint):
        if (!in.Int32(&member->condition)) return false;
        break;
      case wire::Tag(6, kVarint):
        if (!in.Bool(&member->keep_expiration)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

PutMembersView::Expiry ExpiryOf(const google::protobuf::Timestamp& t) {
  return {PutMembersView::Expiry::Kind::kTime, t.seconds(), t.nanos()};
}

PutMembersView::Expiry ExpiryOf(const google::protobuf::Duration& d) {
  return {PutMembersView::Expiry::Kind::kTtl, d.seconds(), d.nanos()};
}

}  // namespace

void RouteProtobufLogs() {
  static std::once_flag routed;
  std::call_once(routed, [] { google::protobuf::SetLogHandler(&OnProtobufLog); });
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
  // A copy shares the slices; the reader consumes the copy.
  grpc::ByteBuffer copy(bytes);
  std::string complaints = "no message";
  {
    grpc::ProtoBufferReader reader(&copy);
    if (reader.status().ok()) {
      complaints.clear();
      t_parse_complaints = &complaints;
      const bool parsed = request->ParseFromZeroCopyStream(&reader);
      t_parse_complaints = nullptr;
      if (parsed) return absl::OkStatus();
    }
  }
  const std::string why = complaints.empty()
                              ? "malformed protobuf wire format (truncated, or an invalid tag "
                                "or wire type)"
                              : Explain(complaints);
  return absl::InvalidArgumentError(absl::StrCat("request: not a valid ",
                                                 request->GetDescriptor()->full_name(), ": ", why,
                                                 "; send the message generated from lapse.proto"));
}

bool ReadPutMembersInPlace(absl::string_view bytes, PutMembersView* request) {
  using Kind = PutMembersView::Expiry::Kind;
  WireReader in(bytes);
  uint32_t seen = 0;
  uint64_t tag;
  while (!in.done()) {
    // members (2) repeats; default_expire_time (4) and default_ttl (5) are
    // the oneof default_expiration.
    if (!NextTag(in, /*repeated=*/2, 4, 5, &seen, &tag)) return false;
    absl::string_view sub;
    uint64_t value;
    switch (tag) {
      case wire::Tag(1, kDelimited):
        if (!in.Utf8(&request->collection)) return false;
        break;
      case wire::Tag(2, kDelimited):
        if (!in.Delimited(&sub) || !ReadMember(sub, &request->members.emplace_back())) return false;
        break;
      case wire::Tag(3, kVarint):
        if (!in.Varint(&value) || value > std::numeric_limits<uint32_t>::max()) return false;
        request->max_members = static_cast<uint32_t>(value);
        break;
      case wire::Tag(4, kDelimited):
        if (!ReadExpiry(in, Kind::kTime, &request->default_expiration)) return false;
        break;
      case wire::Tag(5, kDelimited):
        if (!ReadExpiry(in, Kind::kTtl, &request->default_expiration)) return false;
        break;
      case wire::Tag(6, kVarint):
        if (!in.Bool(&request->omit_created_results)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, PutMembersView* request) {
  if (bytes.DumpToSingleSlice(&request->bytes).ok() &&
      ReadPutMembersInPlace(absl::string_view(reinterpret_cast<const char*>(request->bytes.begin()),
                                              request->bytes.size()),
                            request)) {
    return absl::OkStatus();
  }
  request->parsed = std::make_unique<v1::PutMembersRequest>();
  if (absl::Status parsed = ParseRequest(bytes, request->parsed.get()); !parsed.ok()) return parsed;
  request->Read(*request->parsed);
  return absl::OkStatus();
}

bool ReadStreamWritesInPlace(absl::string_view bytes, StreamWritesView* request) {
  uint64_t tag;
  absl::string_view operation;
  absl::string_view put_members;
  // Counted first, so the operations are not moved as they are read.
  size_t count = 0;
  for (WireReader scan(bytes); !scan.done(); ++count) {
    if (!scan.Varint(&tag) || tag != wire::Tag(1, kDelimited) || !scan.Delimited(&operation)) {
      return false;
    }
  }
  request->operations.reserve(count);
  WireReader in(bytes);
  while (!in.done()) {
    // operations (1) repeats; a WriteOperation's only field is put_members (1).
    if (!in.Varint(&tag) || tag != wire::Tag(1, kDelimited) || !in.Delimited(&operation))
      return false;
    StreamWritesView::Operation& read = request->operations.emplace_back();
    WireReader fields(operation);
    if (fields.done()) continue;
    if (!fields.Varint(&tag) || tag != wire::Tag(1, kDelimited) ||
        !fields.Delimited(&put_members) || !fields.done() ||
        !ReadPutMembersInPlace(put_members, &read.put_members)) {
      return false;
    }
    read.has_put_members = true;
  }
  return true;
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, StreamWritesView* request) {
  if (bytes.DumpToSingleSlice(&request->bytes).ok() &&
      ReadStreamWritesInPlace(
          absl::string_view(reinterpret_cast<const char*>(request->bytes.begin()),
                            request->bytes.size()),
          request)) {
    return absl::OkStatus();
  }
  request->operations.clear();
  request->parsed = std::make_unique<v1::StreamWritesRequest>();
  if (absl::Status parsed = ParseRequest(bytes, request->parsed.get()); !parsed.ok()) return parsed;
  request->operations.resize(static_cast<size_t>(request->parsed->operations_size()));
  for (int i = 0; i < request->parsed->operations_size(); ++i) {
    const v1::WriteOperation& operation = request->parsed->operations(i);
    StreamWritesView::Operation& read = request->operations[static_cast<size_t>(i)];
    read.has_put_members = operation.has_put_members();
    if (read.has_put_members) read.put_members.Read(operation.put_members());
  }
  return absl::OkStatus();
}

void PutMembersView::Read(const v1::PutMembersRequest& request) {
  collection = request.collection();
  members.clear();
  members.reserve(request.members_size());
  for (const v1::MemberWrite& write : request.members()) {
    Member& member = members.emplace_back();
    member.key = write.key();
    member.value = write.value();
    switch (write.expiration_case()) {
      case v1::MemberWrite::kExpireTime:
        member.expiration = ExpiryOf(write.expire_time());
        break;
      case v1::MemberWrite::kTtl:
        member.expiration = ExpiryOf(write.ttl());
        break;
      case v1::MemberWrite::EXPIRATION_NOT_SET:
        break;
    }
    member.condition = write.condition();
    member.keep_expiration = write.keep_expiration();
  }
  max_members = request.max_members();
  default_expiration = Expiry();
  switch (request.default_expiration_case()) {
    case v1::PutMembersRequest::kDefaultExpireTime:
      default_expiration = ExpiryOf(request.default_expire_time());
      break;
    case v1::PutMembersRequest::kDefaultTtl:
      default_expiration = ExpiryOf(request.default_ttl());
      break;
    case v1::PutMembersRequest::DEFAULT_EXPIRATION_NOT_SET:
      break;
  }
  omit_created_results = request.omit_created_results();
}

}  // namespace lapse

// ParseRequest: a request's wire bytes into its message, or INVALID_ARGUMENT
// saying what is wrong with them.
//
// gRPC's generated handlers parse requests themselves, and when parsing fails
// (a truncated message, an invalid tag or wire type, a proto3 string field
// that is not UTF-8) they answer UNIMPLEMENTED with an empty message, while
// protobuf writes an ERROR line to stderr for each invalid string: a log flood
// any client can cause. LapseServiceImpl therefore takes each request as raw
// bytes and parses it here. What protobuf reports while parsing on this
// thread goes into the status (naming the field when protobuf does), not into
// the log; what it reports at any other time is written to lapse's log, at
// most kProtobufLinesPerMinute lines a minute (server/base/log.h,
// RateLimitedLog).
//
//   absl::Status parsed = lapse::ParseRequest(bytes, &request);
//   // INVALID_ARGUMENT: "request: not a valid lapse.v1.PutMembersRequest:
//   //   field lapse.v1.MemberWrite.key is not valid UTF-8 ..."
//
// Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_REQUEST_PARSER_H_
#define LAPSE_SERVER_SERVICE_REQUEST_PARSER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "lapse/v1/lapse.pb.h"

namespace lapse {

inline constexpr int kProtobufLinesPerMinute = 10;

// Routes protobuf's log into lapse's, for the rest of the process. Call before
// threads that may parse start (LapseServiceImpl's constructor does);
// idempotent.
void RouteProtobufLogs();

// Parses `bytes` into `request` (cleared first).
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request);

// A PutMembersRequest read in place: its strings are views into the request's
// bytes, which it holds. Parsed into the generated message, 1000 members cost
// two string allocations, two copies and their arena cleanups each, a third
// of lapsed's instructions per batched put (docs/benchmarks.md, perfbatch2).
// A request outside the shape read here (an unknown field, a singular field
// twice, a string that is not UTF-8, a truncated or malformed one...) is
// parsed by protobuf instead and read from its message, so every request
// means, and every error says, what the generated message would.
struct PutMembersView {
  // An `oneof expiration`: a Timestamp's or a Duration's two fields.
  struct Expiry {
    enum class Kind { kNone, kTime, kTtl };
    Kind kind = Kind::kNone;
    int64_t seconds = 0;
    int32_t nanos = 0;
  };
  struct Member {
    absl::string_view key;
    absl::string_view value;
    Expiry expiration;
    int32_t condition = 0;  // a v1::PutCondition, maybe unknown
    bool keep_expiration = false;
  };

  // Views into `request`, which must outlive them.
  void Read(const v1::PutMembersRequest& request);

  absl::string_view collection;
  // One inline: a single put (most of a write stream's) allocates nothing.
  absl::InlinedVector<Member, 1> members;
  uint32_t max_members = 0;
  Expiry default_expiration;
  bool omit_created_results = false;

  // What the views point into.
  grpc::Slice bytes;
  std::unique_ptr<v1::PutMembersRequest> parsed;
};

// Reads `bytes` into `request` (empty before), as ParseRequest would parse a
// v1::PutMembersRequest, errors included.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, PutMembersView* request);

// The in-place reader alone: false, with `request` partly filled, when
// `bytes` is outside its shape. For tests.
bool ReadPutMembersInPlace(absl::string_view bytes, PutMembersView* request);

// A StreamWritesRequest read the same way: each operation's put_members is a
// PutMembersView into the request's bytes, which it holds; a request outside
// the shape read here (PutMembersView's, and each operation at most one
// put_members) is parsed by protobuf and read from its message.
struct StreamWritesView {
  struct Operation {
    // False when the operation's oneof is not set.
    bool has_put_members = false;
    PutMembersView put_members;
  };

  std::vector<Operation> operations;

  // What the views point into.
  grpc::Slice bytes;
  std::unique_ptr<v1::StreamWritesRequest> parsed;
};

// Reads `bytes` into `request` (empty before), as ParseRequest would parse a
// v1::StreamWritesRequest, errors included.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, StreamWritesView* request);

// The in-place reader alone, as ReadPutMembersInPlace. For tests.
bool ReadStreamWritesInPlace(absl::string_view bytes, StreamWritesView* request);

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_REQUEST_PARSER_H_

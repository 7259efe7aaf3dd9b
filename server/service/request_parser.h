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

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace lapse {

inline constexpr int kProtobufLinesPerMinute = 10;

// Routes protobuf's log into lapse's, for the rest of the process. Call before
// threads that may parse start (LapseServiceImpl's constructor does);
// idempotent.
void RouteProtobufLogs();

// Parses `bytes` into `request` (cleared first).
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request);

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_REQUEST_PARSER_H_

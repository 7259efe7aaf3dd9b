// WriteCoding: the write stream's messages as bytes, without a protobuf
// message in between. A put is encoded straight into the bytes of the
// StreamWritesRequest it goes in, byte for byte what protobuf would serialize
// from PutMembersRequestToProto's message; an answer is read in place from
// the StreamWritesResponse's bytes, to what FromProto and FromGrpcStatus make
// of the message protobuf parses from them. lapse.proto is the format
// (https://protobuf.dev/programming-guides/encoding/).
//
//   std::string request;
//   AppendPutMembers("orders", members, options, &request);  // one operation
//   AppendPutMembers(proto_request, &request);               // a second
//   ... written as one StreamWritesRequest ...
//   std::vector<PutAnswer> answers;
//   if (!ReadStreamWritesResponse(response_bytes, &answers)) { ... not one ... }
//
// Pure functions; safe to call from any thread.
#ifndef LAPSE_CLIENT_CPP_WRITE_CODING_H_
#define LAPSE_CLIENT_CPP_WRITE_CODING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.pb.h"

namespace lapse::client::internal {

// Appends to `request`, the bytes of a StreamWritesRequest, one operation:
// the PutMembersRequest PutMembersRequestToProto(collection, members,
// options) builds.
void AppendPutMembers(const std::string& collection, const std::vector<MemberWrite>& members,
                      const PutOptions& options, std::string* request);
// The same for a request already built (serialized by protobuf).
void AppendPutMembers(const v1::PutMembersRequest& put, std::string* request);

// One operation's answer: its results, or its error.
using PutAnswer = absl::StatusOr<std::vector<PutResult>>;

// Appends to `answers` one answer per result of the StreamWritesResponse
// `response`, in order: FromProto of the result's put_members when its code
// is 0, else FromGrpcStatus of its code and message. Read in place when
// `response` holds only what a lapsed writes (each field once, in field
// order, ASCII keys and messages, known outcomes), parsed by protobuf
// otherwise. False, with `answers` unchanged, when `response` is not a
// StreamWritesResponse.
bool ReadStreamWritesResponse(absl::string_view response, std::vector<PutAnswer>* answers);
// The in-place reader alone: false, with `answers` unchanged, for anything
// it leaves to protobuf (tests check that it agrees with protobuf).
bool ReadStreamWritesResponseInPlace(absl::string_view response, std::vector<PutAnswer>* answers);

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_WRITE_CODING_H_

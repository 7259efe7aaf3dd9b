#include "server/service/request_parser.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

// Everything a PutMembersView says, as text to compare.
std::string Describe(const PutMembersView& v) {
  auto expiry = [](const PutMembersView::Expiry& e) {
    return absl::StrCat(static_cast<int>(e.kind), "/", e.seconds, "/", e.nanos);
  };
  std::string out =
      absl::StrCat("collection=", v.collection, " max=", v.max_members,
                   " default=", expiry(v.default_expiration), " omit=", v.omit_created_results);
  for (const PutMembersView::Member& m : v.members) {
    absl::StrAppend(&out, " [", m.key, "|", m.value, "|", expiry(m.expiration), "|", m.condition,
                    "|", m.keep_expiration, "]");
  }
  return out;
}

// What protobuf makes of `bytes`: the generated message read into a view, or
// the parse error.
std::string ProtobufReads(const std::string& bytes) {
  v1::PutMembersRequest request;
  if (!request.ParseFromString(bytes)) return "error";
  PutMembersView view;
  view.Read(request);
  return Describe(view);
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// One of each: a TTL, a time, neither, a condition, keep_expiration, a
// negative Duration, a default TTL, non-ASCII text.
v1::PutMembersRequest EveryField() {
  v1::PutMembersRequest request;
  request.set_collection("orders.eu");
  request.set_max_members(70000);
  request.mutable_default_ttl()->set_seconds(30);
  request.mutable_default_ttl()->set_nanos(5);
  request.set_omit_created_results(true);
  v1::MemberWrite* a = request.add_members();
  a->set_key("k0000000000000001");
  a->set_value(std::string("v\0\xff", 3));
  a->mutable_ttl()->set_seconds(-1);
  a->mutable_ttl()->set_nanos(-7);
  v1::MemberWrite* b = request.add_members();
  b->set_key("caf\xc3\xa9");
  b->mutable_expire_time()->set_seconds(1'800'000'000);
  b->mutable_expire_time()->set_nanos(999'999'999);
  b->set_condition(v1::PUT_CONDITION_IF_ABSENT);
  v1::MemberWrite* c = request.add_members();
  c->set_key("c");
  c->set_keep_expiration(true);
  c->set_condition(static_cast<v1::PutCondition>(9));
  return request;
}

TEST(PutMembersView, ReadsInPlaceWhatProtobufParses) {
  const std::string bytes = EveryField().SerializeAsString();
  PutMembersView view;
  ASSERT_TRUE(ReadPutMembersInPlace(bytes, &view));
  EXPECT_EQ(Describe(view), ProtobufReads(bytes));
  EXPECT_EQ(view.members.size(), 3u);
  // The strings are views into the bytes, not copies.
  EXPECT_GE(view.members[0].key.data(), bytes.data());
  EXPECT_LT(view.members[0].key.data(), bytes.data() + bytes.size());
}

TEST(PutMembersView, ReadsADefaultExpireTimeAndAnEmptyRequest) {
  v1::PutMembersRequest request;
  request.mutable_default_expire_time()->set_seconds(1'900'000'000);
  const std::string bytes = request.SerializeAsString();
  PutMembersView view;
  ASSERT_TRUE(ReadPutMembersInPlace(bytes, &view));
  EXPECT_EQ(Describe(view), ProtobufReads(bytes));
  PutMembersView empty;
  ASSERT_TRUE(ReadPutMembersInPlace("", &empty));
  EXPECT_EQ(Describe(empty), ProtobufReads(""));
}

TEST(PutMembersView, LeavesOtherShapesToProtobuf) {
  const std::string valid = EveryField().SerializeAsString();
  const std::string cases[] = {
      valid + std::string("\x38\x01", 2),          // unknown field 7
      valid + std::string("\x0a\x01x", 3),         // collection twice: the last wins
      valid + std::string("\x18\x05", 2),          // max_members twice
      valid + std::string("\x22\x00", 2),          // default_expire_time after default_ttl
      std::string("\x12\x04\x0a\x02\xc3\x28", 6),  // a key that is not UTF-8
      std::string("\x12\x05\x22\x00\x1a\x00", 6),  // truncated member
      std::string("\x12\x04\x22\x00\x1a\x00", 6),  // ttl then expire_time in one member
      std::string("\x18\x80\x80\x80\x80\x10", 6),  // max_members past uint32
      std::string("\x1b\x1c", 2),                  // field 3 as a group
  };
  for (const std::string& bytes : cases) {
    PutMembersView view;
    EXPECT_FALSE(ReadPutMembersInPlace(bytes, &view)) << absl::CEscape(bytes);
  }
}

std::string Describe(const StreamWritesView& v);

// Every truncation and every one-byte change of `valid`: whatever the
// in-place reader `read` accepts, protobuf (`protobuf_reads`) must read the
// same. Returns how many were accepted.
template <typename View>
int AcceptedOfEveryChange(const std::string& valid, bool (*read)(absl::string_view, View*),
                          std::string (*protobuf_reads)(const std::string&)) {
  int accepted = 0;
  auto check = [&](const std::string& bytes) {
    View view;
    if (!read(bytes, &view)) return;
    ++accepted;
    EXPECT_EQ(Describe(view), protobuf_reads(bytes)) << absl::CEscape(bytes);
  };
  for (size_t n = 0; n <= valid.size(); ++n) check(valid.substr(0, n));
  for (size_t i = 0; i < valid.size(); ++i) {
    for (int byte = 0; byte < 256; ++byte) {
      std::string changed = valid;
      changed[i] = static_cast<char>(byte);
      check(changed);
    }
  }
  return accepted;
}

TEST(PutMembersView, AcceptsOnlyWhatProtobufReadsTheSame) {
  // The mutations must have exercised the reader, not only its refusals.
  EXPECT_GT(AcceptedOfEveryChange(EveryField().SerializeAsString(), &ReadPutMembersInPlace,
                                  &ProtobufReads),
            1000);
}

TEST(PutMembersView, ParseRequestReadsInPlaceOrAsProtobufWould) {
  RouteProtobufLogs();  // as the service does: complaints go into the status
  PutMembersView fast;
  ASSERT_TRUE(ParseRequest(Buffer(EveryField().SerializeAsString()), &fast).ok());
  EXPECT_EQ(fast.parsed, nullptr);
  EXPECT_EQ(Describe(fast), ProtobufReads(EveryField().SerializeAsString()));

  // Outside the shape but valid: protobuf's reading, the last collection.
  const std::string twice = EveryField().SerializeAsString() + std::string("\x0a\x01x", 3);
  PutMembersView slow;
  ASSERT_TRUE(ParseRequest(Buffer(twice), &slow).ok());
  EXPECT_NE(slow.parsed, nullptr);
  EXPECT_EQ(slow.collection, "x");
  EXPECT_EQ(Describe(slow), ProtobufReads(twice));

  // Invalid: protobuf's error, naming the field.
  PutMembersView bad;
  const absl::Status status =
      ParseRequest(Buffer(std::string("\x12\x04\x0a\x02\xc3\x28", 6)), &bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("lapse.v1.PutMembersRequest"), absl::string_view::npos);
  EXPECT_NE(status.message().find("lapse.v1.MemberWrite.key is not valid UTF-8"),
            absl::string_view::npos)
      << status.message();
}

// Everything a StreamWritesView says, as text to compare.
std::string Describe(const StreamWritesView& v) {
  std::string out;
  for (const StreamWritesView::Operation& operation : v.operations) {
    absl::StrAppend(&out, "{",
                    operation.has_put_members ? Describe(operation.put_members) : "unset", "}");
  }
  return out;
}

std::string ProtobufReadsStream(const std::string& bytes) {
  v1::StreamWritesRequest request;
  if (!request.ParseFromString(bytes)) return "error";
  StreamWritesView view;
  for (const v1::WriteOperation& operation : request.operations()) {
    StreamWritesView::Operation& read = view.operations.emplace_back();
    read.has_put_members = operation.has_put_members();
    if (read.has_put_members) read.put_members.Read(operation.put_members());
  }
  return Describe(view);
}

// Three operations: every field of a put, an unset one, an empty put.
v1::StreamWritesRequest EveryOperation() {
  v1::StreamWritesRequest request;
  *request.add_operations()->mutable_put_members() = EveryField();
  request.add_operations();
  request.add_operations()->mutable_put_members();
  return request;
}

TEST(StreamWritesView, ReadsInPlaceWhatProtobufParses) {
  const std::string bytes = EveryOperation().SerializeAsString();
  StreamWritesView view;
  ASSERT_TRUE(ReadStreamWritesInPlace(bytes, &view));
  EXPECT_EQ(Describe(view), ProtobufReadsStream(bytes));
  ASSERT_EQ(view.operations.size(), 3u);
  EXPECT_TRUE(view.operations[0].has_put_members);
  EXPECT_FALSE(view.operations[1].has_put_members);
  EXPECT_TRUE(view.operations[2].has_put_members);
  StreamWritesView empty;
  ASSERT_TRUE(ReadStreamWritesInPlace("", &empty));
  EXPECT_TRUE(empty.operations.empty());
}

TEST(StreamWritesView, LeavesOtherShapesToProtobuf) {
  const std::string valid = EveryOperation().SerializeAsString();
  const std::string cases[] = {
      valid + std::string("\x10\x01", 2),          // unknown field 2
      std::string("\x0a\x04\x0a\x00\x0a\x00", 6),  // put_members twice: merged
      std::string("\x0a\x02\x10\x01", 4),          // unknown field 2 of an operation
      std::string("\x0a\x04\x0a\x02\x38\x01", 6),  // unknown field 7 of a put
      std::string("\x0a\x03\x0a\x02", 4),          // truncated operation
  };
  for (const std::string& bytes : cases) {
    StreamWritesView view;
    EXPECT_FALSE(ReadStreamWritesInPlace(bytes, &view)) << absl::CEscape(bytes);
  }
}

TEST(StreamWritesView, AcceptsOnlyWhatProtobufReadsTheSame) {
  EXPECT_GT(AcceptedOfEveryChange(EveryOperation().SerializeAsString(), &ReadStreamWritesInPlace,
                                  &ProtobufReadsStream),
            1000);
}

TEST(StreamWritesView, ParseRequestReadsInPlaceOrAsProtobufWould) {
  RouteProtobufLogs();
  StreamWritesView fast;
  ASSERT_TRUE(ParseRequest(Buffer(EveryOperation().SerializeAsString()), &fast).ok());
  EXPECT_EQ(fast.parsed, nullptr);
  EXPECT_EQ(Describe(fast), ProtobufReadsStream(EveryOperation().SerializeAsString()));

  // Outside the shape but valid: protobuf's reading, the two put_members merged.
  const std::string twice("\x0a\x0a\x0a\x03\x0a\x01x\x0a\x03\x0a\x01y", 12);
  StreamWritesView slow;
  ASSERT_TRUE(ParseRequest(Buffer(twice), &slow).ok());
  EXPECT_NE(slow.parsed, nullptr);
  ASSERT_EQ(slow.operations.size(), 1u);
  EXPECT_EQ(slow.operations[0].put_members.collection, "y");
  EXPECT_EQ(Describe(slow), ProtobufReadsStream(twice));

  StreamWritesView bad;
  const absl::Status status =
      ParseRequest(Buffer(std::string("\x0a\x08\x0a\x06\x12\x04\x0a\x02\xc3\x28", 10)), &bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("lapse.v1.StreamWritesRequest"), absl::string_view::npos);
  EXPECT_NE(status.message().find("lapse.v1.MemberWrite.key is not valid UTF-8"),
            absl::string_view::npos)
      << status.message();
}

}  // namespace
}  // namespace lapse

// The write stream's hand encoding against protobuf's own: every request
// shape the client sends encodes to the bytes protobuf serializes, and the
// in-place answer reader agrees with protobuf's parse on lapsed's answers,
// on every truncation of them and on every one-byte change.
#include "client/cpp/write_coding.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cpp/convert.h"
#include "gtest/gtest.h"

namespace lapse::client::internal {
namespace {

const absl::Time kExpireTime =
    absl::FromUnixSeconds(1'700'000'000) + absl::Nanoseconds(123'456'789);

// What protobuf serializes for the operations PutMembersRequestToProto
// builds.
std::string Serialized(const std::vector<v1::PutMembersRequest>& puts) {
  v1::StreamWritesRequest request;
  for (const v1::PutMembersRequest& put : puts) {
    *request.add_operations()->mutable_put_members() = put;
  }
  return request.SerializeAsString();
}

std::vector<Expiration> Expirations() {
  return {Expiration(),
          Expiration::Ttl(absl::Seconds(1)),
          Expiration::Ttl(absl::Nanoseconds(1)),
          Expiration::Ttl(absl::Milliseconds(-1500)),
          Expiration::Ttl(absl::ZeroDuration()),
          Expiration::Ttl(absl::Hours(24 * 365 * 100) + absl::Nanoseconds(999'999'999)),
          Expiration::At(absl::UnixEpoch()),
          Expiration::At(absl::UnixEpoch() - absl::Milliseconds(1500)),
          Expiration::At(kExpireTime),
          Expiration::At(absl::FromUnixSeconds(253'402'300'799))};
}

void ExpectEncodedAsProtobuf(const std::string& collection, const std::vector<MemberWrite>& members,
                             const PutOptions& options) {
  std::string bytes;
  AppendPutMembers(collection, members, options, &bytes);
  const v1::PutMembersRequest proto = PutMembersRequestToProto(collection, members, options);
  ASSERT_EQ(bytes, Serialized({proto})) << proto.DebugString();
  // A second operation after it, and the same from the message.
  AppendPutMembers(proto, &bytes);
  ASSERT_EQ(bytes, Serialized({proto, proto})) << proto.DebugString();
}

TEST(WriteStreamCodingTest, EveryMemberShapeEncodesAsProtobufSerializesIt) {
  const std::string long_key(200, 'k');
  std::string binary_value(300, '\0');
  for (size_t i = 0; i < binary_value.size(); ++i) binary_value[i] = static_cast<char>(i * 7);
  int cases = 0;
  for (const std::string& key : {std::string(), std::string("k"), long_key}) {
    for (const std::string& value : {std::string(), std::string("v"), binary_value}) {
      for (const Expiration& expiration : Expirations()) {
        for (PutCondition condition :
             {PutCondition::kAlways, PutCondition::kIfAbsent, PutCondition::kIfPresent}) {
          for (bool keep : {false, true}) {
            MemberWrite member{key, value, expiration, condition, keep};
            ExpectEncodedAsProtobuf("orders", {member}, PutOptions());
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 3 * 10 * 3 * 2);
}

TEST(WriteStreamCodingTest, EveryRequestShapeEncodesAsProtobufSerializesIt) {
  std::vector<MemberWrite> many;
  for (int i = 0; i < 2000; ++i) {
    many.push_back(MemberWrite{absl::StrCat("key-", i), std::string(i % 40, 'v'),
                               Expirations()[static_cast<size_t>(i) % Expirations().size()]});
  }
  const std::vector<std::vector<MemberWrite>> member_lists = {
      {},
      {MemberWrite{"k", "v", Expiration()}},
      {MemberWrite{"a", "1", Expiration()},
       MemberWrite{"b", "2", Expiration::Ttl(absl::Seconds(1))}},
      many};
  for (const std::string& collection : {std::string(), std::string("c"), std::string(300, 'c')}) {
    for (uint32_t max_members : {0u, 1u, 300u, UINT32_MAX}) {
      for (const Expiration& default_expiration : Expirations()) {
        for (bool omit : {false, true}) {
          for (const std::vector<MemberWrite>& members : member_lists) {
            PutOptions options;
            options.max_members = max_members;
            options.default_expiration = default_expiration;
            options.omit_created_results = omit;
            ExpectEncodedAsProtobuf(collection, members, options);
          }
        }
      }
    }
  }
}

// ---- Answers ----------------------------------------------------------------

std::string Describe(const std::vector<PutAnswer>& answers) {
  std::string out;
  for (const PutAnswer& answer : answers) {
    if (!answer.ok()) {
      absl::StrAppend(&out, "[", answer.status().ToString(), "]");
      continue;
    }
    absl::StrAppend(&out, "[ok");
    for (const PutResult& result : *answer) {
      absl::StrAppend(&out, " {", result.key, " ", static_cast<int>(result.outcome), " ",
                      result.expire_time.has_value() ? absl::FormatTime(*result.expire_time) : "-",
                      "}");
    }
    absl::StrAppend(&out, "]");
  }
  return out;
}

// The answers FromProto and FromGrpcStatus make of what protobuf parses from
// `bytes`, or "unparsable".
std::string Expected(const std::string& bytes) {
  v1::StreamWritesResponse parsed;
  if (!parsed.ParseFromString(bytes)) return "unparsable";
  std::vector<PutAnswer> answers;
  for (const v1::WriteOperationResult& result : parsed.results()) {
    if (result.code() == 0) {
      answers.push_back(FromProto(result.put_members()));
    } else {
      answers.push_back(FromResultCode(result.code(), result.message()));
    }
  }
  return Describe(answers);
}

// Answers lapsed writes: created puts with a shared TTL (results omitted),
// per-member results of every outcome, errors, an empty response.
std::vector<std::string> LapsedAnswers() {
  std::vector<std::string> out;
  v1::StreamWritesResponse shared_ttl;
  for (int i = 0; i < 3; ++i) {
    TimeToProto(kExpireTime + absl::Milliseconds(i),
                shared_ttl.add_results()->mutable_put_members()->mutable_default_expire_time());
  }
  out.push_back(shared_ttl.SerializeAsString());

  v1::StreamWritesResponse per_member;
  v1::PutMembersResponse* put = per_member.add_results()->mutable_put_members();
  put->set_created_count(1);
  v1::PutMemberResult* created = put->add_results();
  created->set_key("k1");
  created->set_outcome(v1::PUT_OUTCOME_CREATED);
  TimeToProto(kExpireTime, created->mutable_expire_time());
  v1::PutMemberResult* replaced = put->add_results();
  replaced->set_key("k2");
  replaced->set_outcome(v1::PUT_OUTCOME_REPLACED);
  v1::PutMemberResult* skipped = put->add_results();
  skipped->set_key(std::string(130, 's'));
  skipped->set_outcome(v1::PUT_OUTCOME_SKIPPED);
  TimeToProto(absl::UnixEpoch() - absl::Milliseconds(1500), skipped->mutable_expire_time());
  TimeToProto(kExpireTime, put->mutable_default_expire_time());
  out.push_back(per_member.SerializeAsString());

  v1::StreamWritesResponse errors;
  v1::WriteOperationResult* full = errors.add_results();
  full->set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  full->set_message("orders: would hold more than max_members");
  errors.add_results()->mutable_put_members();
  errors.add_results()->set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  out.push_back(errors.SerializeAsString());

  out.emplace_back();
  return out;
}

TEST(WriteStreamCodingTest, LapsedsAnswersAreReadInPlaceAsProtobufParsesThem) {
  for (const std::string& bytes : LapsedAnswers()) {
    std::vector<PutAnswer> answers;
    ASSERT_TRUE(ReadStreamWritesResponseInPlace(bytes, &answers)) << Expected(bytes);
    EXPECT_EQ(Describe(answers), Expected(bytes));
  }
}

// Checks both readers on `bytes`: the in-place one declines or agrees with
// protobuf, the full one agrees; a response protobuf cannot parse is read
// by neither, and leaves the answers as they were. Counts the in-place reads.
void ExpectReadAsProtobufParses(const std::string& bytes, int* in_place) {
  const std::string expected = Expected(bytes);
  const std::vector<PutAnswer> before = {absl::CancelledError("before")};
  std::vector<PutAnswer> answers = before;
  if (ReadStreamWritesResponseInPlace(bytes, &answers)) {
    ++*in_place;
    answers.erase(answers.begin());
    ASSERT_EQ(Describe(answers), expected) << absl::CEscape(bytes);
  } else {
    ASSERT_EQ(Describe(answers), Describe(before)) << absl::CEscape(bytes);
  }
  answers = before;
  const bool read = ReadStreamWritesResponse(bytes, &answers);
  if (expected == "unparsable") {
    ASSERT_FALSE(read) << absl::CEscape(bytes);
    ASSERT_EQ(Describe(answers), Describe(before)) << absl::CEscape(bytes);
  } else {
    ASSERT_TRUE(read) << absl::CEscape(bytes);
    answers.erase(answers.begin());
    ASSERT_EQ(Describe(answers), expected) << absl::CEscape(bytes);
  }
}

TEST(WriteStreamCodingTest, EveryTruncationOfAnAnswerIsReadAsProtobufParsesIt) {
  int in_place = 0;
  int cases = 0;
  for (const std::string& bytes : LapsedAnswers()) {
    for (size_t size = 0; size < bytes.size(); ++size) {
      ExpectReadAsProtobufParses(bytes.substr(0, size), &in_place);
      ++cases;
    }
  }
  // Cut between its results, an answer is still one, and read in place.
  EXPECT_GT(in_place, 0);
  EXPECT_LT(in_place, cases);
}

TEST(WriteStreamCodingTest, EveryOneByteChangeOfAnAnswerIsReadAsProtobufParsesIt) {
  int in_place = 0;
  int cases = 0;
  for (const std::string& bytes : LapsedAnswers()) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int value = 0; value < 256; ++value) {
        if (static_cast<uint8_t>(bytes[i]) == value) continue;
        std::string changed = bytes;
        changed[i] = static_cast<char>(value);
        ExpectReadAsProtobufParses(changed, &in_place);
        ++cases;
      }
    }
  }
  EXPECT_GT(in_place, 0);
  EXPECT_LT(in_place, cases);
}

}  // namespace
}  // namespace lapse::client::internal

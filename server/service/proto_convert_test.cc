#include "server/service/proto_convert.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

google::protobuf::Timestamp Ts(int64_t seconds, int32_t nanos) {
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(nanos);
  return ts;
}

google::protobuf::Duration Dur(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

void ExpectInvalid(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(TimeFromProto, ConvertsValidTimestamps) {
  EXPECT_EQ(*TimeFromProto(Ts(1000, 500), "t"),
            absl::FromUnixSeconds(1000) + absl::Nanoseconds(500));
  EXPECT_EQ(*TimeFromProto(Ts(-62'135'596'800, 0), "t"), absl::FromUnixSeconds(-62'135'596'800));
  EXPECT_EQ(*TimeFromProto(Ts(253'402'300'799, 999'999'999), "t"),
            absl::FromUnixSeconds(253'402'300'799) + absl::Nanoseconds(999'999'999));
}

TEST(TimeFromProto, RejectsOutOfRangeFieldsNamingTheField) {
  ExpectInvalid(TimeFromProto(Ts(1, -1), "members[2].expire_time").status(),
                "members[2].expire_time: nanos out of range");
  ExpectInvalid(TimeFromProto(Ts(1, 1'000'000'000), "expire_time").status(),
                "expire_time: nanos out of range");
  ExpectInvalid(TimeFromProto(Ts(-62'135'596'801, 0), "expire_time").status(),
                "expire_time: seconds out of range");
  ExpectInvalid(TimeFromProto(Ts(253'402'300'800, 0), "expire_time").status(),
                "expire_time: seconds out of range");
}

TEST(DurationFromProto, ConvertsValidDurations) {
  EXPECT_EQ(*DurationFromProto(Dur(30, 0), "ttl"), absl::Seconds(30));
  EXPECT_EQ(*DurationFromProto(Dur(-1, -500), "ttl"), -absl::Seconds(1) - absl::Nanoseconds(500));
  EXPECT_EQ(*DurationFromProto(Dur(0, -5), "ttl"), -absl::Nanoseconds(5));
  EXPECT_EQ(*DurationFromProto(Dur(315'576'000'000, 999'999'999), "ttl"),
            absl::Seconds(315'576'000'000) + absl::Nanoseconds(999'999'999));
}

TEST(DurationFromProto, RejectsOutOfRangeAndMixedSigns) {
  ExpectInvalid(DurationFromProto(Dur(315'576'000'001, 0), "ttl").status(),
                "ttl: seconds out of range");
  ExpectInvalid(DurationFromProto(Dur(-315'576'000'001, 0), "ttl").status(),
                "ttl: seconds out of range");
  ExpectInvalid(DurationFromProto(Dur(0, 1'000'000'000), "members[0].ttl").status(),
                "members[0].ttl: nanos out of range");
  ExpectInvalid(DurationFromProto(Dur(1, -1), "ttl").status(),
                "ttl: seconds and nanos must have the same sign");
  ExpectInvalid(DurationFromProto(Dur(-1, 1), "ttl").status(),
                "ttl: seconds and nanos must have the same sign");
}

TEST(TimeToProto, LeavesNoDeadlineUnset) { EXPECT_FALSE(TimeToProto(NoDeadline()).has_value()); }

TEST(TimeToProto, RoundTripsFiniteTimes) {
  for (absl::Time t : {absl::UnixEpoch(), absl::FromUnixMillis(1'700'000'000'123),
                       absl::FromUnixSeconds(-10) + absl::Nanoseconds(7)}) {
    std::optional<google::protobuf::Timestamp> ts = TimeToProto(t);
    ASSERT_TRUE(ts.has_value());
    EXPECT_GE(ts->nanos(), 0);
    EXPECT_EQ(*TimeFromProto(*ts, "t"), t);
  }
  std::optional<google::protobuf::Timestamp> ts = TimeToProto(absl::FromUnixMillis(-1));
  EXPECT_EQ(ts->seconds(), -1);
  EXPECT_EQ(ts->nanos(), 999'000'000);
}

TEST(Expiration, BuildsEachArm) {
  absl::StatusOr<Expiration> at = ExpirationAt(Ts(50, 0), "expire_time");
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->kind, Expiration::Kind::kTime);
  EXPECT_EQ(at->time, absl::FromUnixSeconds(50));
  absl::StatusOr<Expiration> ttl = ExpirationTtl(Dur(5, 0), "ttl");
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(ttl->kind, Expiration::Kind::kTtl);
  EXPECT_EQ(ttl->ttl, absl::Seconds(5));
  ExpectInvalid(ExpirationTtl(Dur(1, -1), "refresh_ttl").status(),
                "refresh_ttl: seconds and nanos must have the same sign");
}

TEST(Enums, MapKnownValues) {
  EXPECT_EQ(*PutConditionFromProto(v1::PUT_CONDITION_UNSPECIFIED, "c"), PutCondition::kAlways);
  EXPECT_EQ(*PutConditionFromProto(v1::PUT_CONDITION_IF_ABSENT, "c"), PutCondition::kIfAbsent);
  EXPECT_EQ(*PutConditionFromProto(v1::PUT_CONDITION_IF_PRESENT, "c"), PutCondition::kIfPresent);
  EXPECT_EQ(*ExpireConditionFromProto(v1::EXPIRE_CONDITION_UNSPECIFIED, "c"),
            ExpireCondition::kAlways);
  EXPECT_EQ(*ExpireConditionFromProto(v1::EXPIRE_CONDITION_IF_EARLIER, "c"),
            ExpireCondition::kIfEarlier);
  EXPECT_EQ(*ExpireConditionFromProto(v1::EXPIRE_CONDITION_IF_LATER, "c"),
            ExpireCondition::kIfLater);
  EXPECT_EQ(*MemberOrderFromProto(v1::MEMBER_ORDER_UNSPECIFIED, "o"), MemberOrder::kKey);
  EXPECT_EQ(*MemberOrderFromProto(v1::MEMBER_ORDER_EXPIRE_TIME, "o"), MemberOrder::kExpireTime);
  EXPECT_EQ(PutOutcomeToProto(PutOutcome::kSkipped), v1::PUT_OUTCOME_SKIPPED);
  EXPECT_EQ(ExpireOutcomeToProto(ExpireOutcome::kExpired), v1::EXPIRE_OUTCOME_EXPIRED);
  EXPECT_EQ(PersistOutcomeToProto(PersistOutcome::kNoExpiration),
            v1::PERSIST_OUTCOME_NO_EXPIRATION);
}

TEST(Enums, RejectUnknownValuesNamingTheField) {
  ExpectInvalid(
      PutConditionFromProto(static_cast<v1::PutCondition>(9), "members[1].condition").status(),
      "members[1].condition: unknown value 9");
  ExpectInvalid(
      ExpireConditionFromProto(static_cast<v1::ExpireCondition>(-3), "condition").status(),
      "condition: unknown value -3");
  ExpectInvalid(MemberOrderFromProto(static_cast<v1::MemberOrder>(7), "order_by").status(),
                "order_by: unknown value 7");
}

TEST(Messages, ExpiryEventCarriesTheValueOnlyWhenAsked) {
  ExpiryEvent event;
  event.sequence = 42;
  event.collection = "c";
  event.key = "k";
  event.value = "v";
  event.expire_time = absl::FromUnixMillis(1000);
  event.expired_at = absl::FromUnixMillis(1500);
  v1::ExpiryEvent with_value;
  ExpiryEventToProto(event, true, &with_value);
  EXPECT_EQ(with_value.sequence(), 42u);
  EXPECT_EQ(with_value.collection(), "c");
  EXPECT_EQ(with_value.key(), "k");
  EXPECT_EQ(with_value.value(), "v");
  EXPECT_EQ(with_value.expire_time().seconds(), 1);
  EXPECT_EQ(with_value.expired_at().nanos(), 500'000'000);
  v1::ExpiryEvent without_value;
  ExpiryEventToProto(event, false, &without_value);
  EXPECT_TRUE(without_value.value().empty());
}

TEST(Messages, AppendedWatchEventsAreTheBytesProtobufSerializes) {
  // Lengths across one- and two-byte varints, sequences and times at the
  // edges of their encodings, and NoDeadline (the field left unset).
  const std::vector<std::string> values = {"",
                                           "v",
                                           std::string(127, 'x'),
                                           std::string(128, 'y'),
                                           std::string(16383, 'z'),
                                           std::string(16384, 'w'),
                                           std::string(300000, 'u')};
  const std::vector<uint64_t> sequences = {0, 1, 127, 128, uint64_t{1} << 63, ~uint64_t{0}};
  const std::vector<absl::Time> times = {absl::UnixEpoch(),
                                         absl::FromUnixSeconds(1) - absl::Nanoseconds(1),
                                         absl::FromUnixSeconds(-62'135'596'800),
                                         absl::FromUnixMillis(1'790'000'000'123),
                                         absl::FromUnixSeconds(253'402'300'799),
                                         NoDeadline()};
  v1::WatchExpirationsResponse expected;
  std::string encoded;
  for (size_t i = 0; i < values.size() * sequences.size(); ++i) {
    ExpiryEvent event;
    event.sequence = sequences[i % sequences.size()];
    event.collection = i % 5 == 0 ? "" : absl::StrCat("collection-", i);
    event.key = i % 7 == 0 ? "" : std::string(i * 11, 'k');
    event.value = values[i % values.size()];
    event.expire_time = times[i % times.size()];
    event.expired_at = times[(i / times.size()) % times.size()];
    ExpiryEventToProto(event, /*include_value=*/true, expected.add_events());
    AppendWatchEvent(event.sequence, ViewOf(event), &encoded);
  }
  EXPECT_EQ(encoded, expected.SerializeAsString());
  v1::WatchExpirationsResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(encoded));
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
}

TEST(Messages, AResponseIsItsEventsThenItsOtherFields) {
  ExpiryEvent event;
  event.sequence = 9;
  event.collection = "c";
  event.key = "k";
  event.expire_time = absl::FromUnixMillis(1000);
  event.expired_at = absl::FromUnixMillis(1001);
  std::string encoded;
  AppendWatchEvent(event.sequence, ViewOf(event), &encoded);
  v1::WatchExpirationsResponse rest;
  rest.set_examined_sequence(12);
  rest.set_resume_token("token");
  rest.set_store_id("store");
  rest.AppendToString(&encoded);
  v1::WatchExpirationsResponse expected = rest;
  ExpiryEventToProto(event, /*include_value=*/false, expected.add_events());
  EXPECT_EQ(encoded, expected.SerializeAsString());
}

// Results with and without a deadline (the epoch too), an empty key, every
// outcome; with and without the other fields.
TEST(Messages, APutsAnswerWrittenAsBytesIsWhatProtobufWrites) {
  struct Result {
    std::string key;
    v1::PutOutcome outcome;
    absl::Time expire_time;
  };
  const std::vector<Result> results = {
      {"k\xc3\xa9", v1::PUT_OUTCOME_CREATED, absl::FromUnixNanos(1'800'000'000'123'456'789)},
      {"", v1::PUT_OUTCOME_REPLACED, NoDeadline()},
      {std::string(200, 'k'), v1::PUT_OUTCOME_SKIPPED, absl::UnixEpoch()},
      {"z", v1::PUT_OUTCOME_UNSPECIFIED, absl::FromUnixSeconds(-5)},
  };
  for (uint32_t created : {0u, 1u, 300u}) {
    for (bool with_default : {false, true}) {
      for (size_t n = 0; n <= results.size(); ++n) {
        std::string bytes;
        PutMembersBytes answer(&bytes);
        v1::PutMembersResponse expected;
        for (size_t i = 0; i < n; ++i) {
          answer.AddResult(results[i].key, results[i].outcome, results[i].expire_time);
          v1::PutMemberResult* result = expected.add_results();
          result->set_key(results[i].key);
          result->set_outcome(results[i].outcome);
          if (results[i].expire_time != NoDeadline()) {
            TimeToProto(results[i].expire_time, result->mutable_expire_time());
          }
        }
        EXPECT_FALSE(answer.has_default_expire_time());
        if (with_default) {
          answer.set_default_expire_time(absl::FromUnixMillis(1'900'000'000'001));
          TimeToProto(absl::FromUnixMillis(1'900'000'000'001),
                      expected.mutable_default_expire_time());
          EXPECT_TRUE(answer.has_default_expire_time());
        }
        answer.set_created_count(created);
        expected.set_created_count(created);
        answer.Finish();
        EXPECT_EQ(bytes, expected.SerializeAsString())
            << created << " " << with_default << " " << n;
      }
    }
  }
}

// Results of each kind: a put's response, an empty one, an error.
TEST(Messages, AStreamWritesResponseIsTheBytesProtobufWrites) {
  v1::PutMembersResponse put;
  put.set_created_count(1);
  v1::PutMemberResult* result = put.add_results();
  result->set_key("k\xc3\xa9");
  result->set_outcome(v1::PUT_OUTCOME_CREATED);
  result->mutable_expire_time()->set_seconds(1'800'000'000);
  const std::string put_bytes = put.SerializeAsString();
  const std::string long_message(200, 'm');
  const WriteResultView results[] = {
      {0, "", put_bytes}, {0, "", ""}, {3, long_message, ""}, {14, "", ""}};

  v1::StreamWritesResponse expected;
  *expected.add_results()->mutable_put_members() = put;
  expected.add_results()->mutable_put_members();
  expected.add_results()->set_code(3);
  expected.mutable_results(2)->set_message(long_message);
  expected.add_results()->set_code(14);
  grpc::Slice slice;
  ASSERT_TRUE(EncodeStreamWritesResponse(results).DumpToSingleSlice(&slice).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(slice.begin()), slice.size()),
            expected.SerializeAsString());
  ASSERT_TRUE(EncodeStreamWritesResponse({}).DumpToSingleSlice(&slice).ok());
  EXPECT_EQ(slice.size(), 0u);
}

TEST(Messages, PersistentMembersHaveNoExpireTime) {
  v1::Member member;
  MemberToProto({"k", "v", NoDeadline()}, &member);
  EXPECT_EQ(member.key(), "k");
  EXPECT_EQ(member.value(), "v");
  EXPECT_FALSE(member.has_expire_time());
  v1::CollectionInfo info;
  CollectionInfo engine_info;
  engine_info.name = "c";
  engine_info.member_count = 3;
  engine_info.expiring_count = 1;
  engine_info.next_expire_time = absl::FromUnixSeconds(9);
  CollectionInfoToProto(engine_info, &info);
  EXPECT_EQ(info.name(), "c");
  EXPECT_EQ(info.member_count(), 3u);
  EXPECT_EQ(info.expiring_count(), 1u);
  EXPECT_EQ(info.next_expire_time().seconds(), 9);
}

TEST(MemberPageToken, RoundTrips) {
  const MemberCursor finite{absl::FromUnixMillis(1'700'000'000'123), std::string("key\0x", 5)};
  for (const MemberCursor& cursor : {finite, MemberCursor{NoDeadline(), "persistent"},
                                     MemberCursor{absl::FromUnixSeconds(-5), ""}}) {
    for (MemberOrder order : {MemberOrder::kKey, MemberOrder::kExpireTime}) {
      const std::string token = EncodeMemberPageToken("orders", order, cursor);
      absl::StatusOr<MemberCursor> decoded = DecodeMemberPageToken(token, "orders", order);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(decoded->expire_time, cursor.expire_time);
      EXPECT_EQ(decoded->key, cursor.key);
    }
  }
}

TEST(MemberPageToken, IsWebSafe) {
  const std::string token =
      EncodeMemberPageToken("c", MemberOrder::kKey, {absl::UnixEpoch(), std::string(100, '\xff')});
  EXPECT_EQ(token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno"
                                    "pqrstuvwxyz0123456789-_"),
            std::string::npos);
}

TEST(MemberPageToken, RejectsAnotherCollectionOrOrder) {
  const std::string token =
      EncodeMemberPageToken("orders", MemberOrder::kKey, {absl::UnixEpoch(), "k"});
  ExpectInvalid(DecodeMemberPageToken(token, "other", MemberOrder::kKey).status(),
                "page_token: issued for another collection or order_by");
  ExpectInvalid(DecodeMemberPageToken(token, "orders", MemberOrder::kExpireTime).status(),
                "page_token: issued for another collection or order_by");
}

TEST(MemberPageToken, RejectsGarbage) {
  const std::string valid =
      EncodeMemberPageToken("orders", MemberOrder::kExpireTime, {absl::FromUnixSeconds(1), "k"});
  std::string raw;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(valid, &raw));
  const std::string bad_version = absl::WebSafeBase64Escape("\x02" + raw.substr(1));
  const std::string truncated = absl::WebSafeBase64Escape(raw.substr(0, raw.size() - 1));
  const std::string trailing = absl::WebSafeBase64Escape(raw + "x");
  const std::string collection_token = EncodeCollectionPageToken("", "a");
  for (const std::string& token : {std::string("not base64!"), std::string("AAAA"), bad_version,
                                   truncated, trailing, collection_token}) {
    absl::Status status = DecodeMemberPageToken(token, "orders", MemberOrder::kExpireTime).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(std::string(status.message()), StartsWith("page_token: "));
  }
}

TEST(CollectionPageToken, RoundTripsAndChecksThePrefix) {
  const std::string token = EncodeCollectionPageToken("orders:", "orders:42");
  EXPECT_EQ(*DecodeCollectionPageToken(token, "orders:"), "orders:42");
  ExpectInvalid(DecodeCollectionPageToken(token, "carts:").status(),
                "page_token: issued for another prefix");
  absl::Status garbage = DecodeCollectionPageToken("%%%", "").status();
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(garbage.message()), HasSubstr("page_token"));
}

TEST(ToGrpcStatus, KeepsCodeAndMessage) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const grpc::Status s = ToGrpcStatus(absl::OutOfRangeError("gone"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(s.error_message(), "gone");
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// A Timestamp whose fields take the longest varints.
google::protobuf::Timestamp LongestTimestamp() { return Ts(-62'135'596'800, 999'999'999); }

// The size of a response with one result, which `fill` fills in.
template <typename Response, typename Fill>
size_t OneResultSize(Fill fill) {
  Response response;
  fill(response.add_results());
  return response.ByteSizeLong();
}

TEST(ResponseSizes, EachEntryTakesAtMostItsKeysValuesAndNamesPlusTheEntryOverhead) {
  // Lengths of 2 MiB take 4-byte varints.
  const std::string key(3000, 'k');
  const std::string value(size_t{2} << 20, 'v');
  const std::string name(3000, 'n');

  v1::ListMembersResponse list;
  v1::Member* member = list.add_members();
  member->set_key(key);
  member->set_value(value);
  *member->mutable_expire_time() = LongestTimestamp();
  EXPECT_LE(list.ByteSizeLong(), key.size() + value.size() + kResponseEntryOverhead);

  v1::GetMembersResponse get;
  v1::GetMemberResult* got = get.add_results();
  got->set_found(true);
  *got->mutable_member() = *member;
  EXPECT_LE(get.ByteSizeLong(), key.size() + value.size() + kResponseEntryOverhead);

  v1::ListCollectionsResponse collections;
  v1::CollectionInfo* info = collections.add_collections();
  info->set_name(name);
  info->set_member_count(UINT64_MAX);
  info->set_expiring_count(UINT64_MAX);
  *info->mutable_next_expire_time() = LongestTimestamp();
  EXPECT_LE(collections.ByteSizeLong(), name.size() + kResponseEntryOverhead);

  const size_t echo = key.size() + kResponseEntryOverhead;
  // Put and Expire results: the key, an outcome and an expire_time.
  const auto outcome_and_time = [&key](auto outcome) {
    return [&key, outcome](auto* r) {
      r->set_key(key);
      r->set_outcome(outcome);
      *r->mutable_expire_time() = LongestTimestamp();
    };
  };
  EXPECT_LE(OneResultSize<v1::PutMembersResponse>(outcome_and_time(v1::PutOutcome_MAX)), echo);
  EXPECT_LE(OneResultSize<v1::ExpireMembersResponse>(outcome_and_time(v1::ExpireOutcome_MAX)),
            echo);
  EXPECT_LE(OneResultSize<v1::PersistMembersResponse>([&](v1::PersistMemberResult* r) {
              r->set_key(key);
              r->set_outcome(v1::PersistOutcome_MAX);
            }),
            echo);
  EXPECT_LE(OneResultSize<v1::RemoveMembersResponse>([&](v1::RemoveMemberResult* r) {
              r->set_key(key);
              r->set_existed(true);
            }),
            echo);
}

TEST(ResponseSizes, TheLongestPageTokensFitInMaxPageTokenBytes) {
  Limits limits;
  limits.max_collection_name_bytes = 3000;
  limits.max_key_bytes = 5000;
  const std::string name(limits.max_collection_name_bytes, 'n');
  const std::string key(limits.max_key_bytes, 'k');
  const absl::Time latest = absl::FromUnixSeconds(253'402'300'799) + absl::Nanoseconds(999'999'999);

  v1::ListMembersResponse members;
  members.set_next_page_token(
      EncodeMemberPageToken(name, MemberOrder::kExpireTime, MemberCursor{latest, key}));
  EXPECT_LE(members.ByteSizeLong(), MaxPageTokenBytes(limits));

  v1::ListCollectionsResponse collections;
  collections.set_next_page_token(EncodeCollectionPageToken(name, name));
  EXPECT_LE(collections.ByteSizeLong(), MaxPageTokenBytes(limits));
}

}  // namespace
}  // namespace lapse

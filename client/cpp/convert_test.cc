// The client's proto conversions, without a server: requests carry every
// argument, responses come back as the client's types, and a response this
// client cannot read is UNKNOWN.
#include "client/cpp/convert.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lapse::client::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kTime = absl::FromUnixSeconds(1'700'000'000) + absl::Nanoseconds(5);

TEST(ConvertTime, RoundTripsTimestamps) {
  google::protobuf::Timestamp timestamp;
  TimeToProto(kTime, &timestamp);
  EXPECT_EQ(timestamp.seconds(), 1'700'000'000);
  EXPECT_EQ(timestamp.nanos(), 5);
  EXPECT_EQ(TimeFromProto(timestamp), kTime);
}

TEST(ConvertTime, NegativeDurationsKeepSecondsAndNanosOfOneSign) {
  google::protobuf::Duration duration;
  DurationToProto(-absl::Milliseconds(1500), &duration);
  EXPECT_EQ(duration.seconds(), -1);
  EXPECT_EQ(duration.nanos(), -500'000'000);
}

TEST(ConvertStatus, KeepsCodeAndMessage) {
  const absl::Status status = FromGrpcStatus(grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "gone"));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(), "gone");
}

// A write operation's result carries its code as a plain int: one outside
// the canonical codes (a newer or a broken server) is UNKNOWN, never an
// out-of-range enum.
TEST(ConvertStatus, AResultCodeOutsideTheCanonicalOnesIsUnknown) {
  EXPECT_EQ(FromResultCode(5, "no such member"), absl::NotFoundError("no such member"));
  EXPECT_EQ(FromResultCode(16, "who"), absl::UnauthenticatedError("who"));
  EXPECT_EQ(FromResultCode(17, "new"), absl::UnknownError("new"));
  EXPECT_EQ(FromResultCode(201, "x"), absl::UnknownError("x"));
  EXPECT_EQ(FromResultCode(-1, "x"), absl::UnknownError("x"));
}

TEST(ConvertRequests, PutCarriesEachWriteWithItsExpirationArm) {
  MemberWrite ttl;
  ttl.key = "a";
  ttl.value = "1";
  ttl.expiration = Expiration::Ttl(absl::Seconds(30));
  ttl.condition = PutCondition::kIfAbsent;
  MemberWrite at;
  at.key = "b";
  at.expiration = Expiration::At(kTime);
  at.condition = PutCondition::kIfPresent;
  MemberWrite keep;
  keep.key = "c";
  keep.keep_expiration = true;
  PutOptions options;
  options.max_members = 7;
  const v1::PutMembersRequest request =
      PutMembersRequestToProto("orders", {ttl, at, keep}, options);
  EXPECT_EQ(request.collection(), "orders");
  EXPECT_EQ(request.max_members(), 7u);
  ASSERT_EQ(request.members_size(), 3);
  EXPECT_EQ(request.members(0).value(), "1");
  EXPECT_EQ(request.members(0).ttl().seconds(), 30);
  EXPECT_EQ(request.members(0).condition(), v1::PUT_CONDITION_IF_ABSENT);
  EXPECT_EQ(TimeFromProto(request.members(1).expire_time()), kTime);
  EXPECT_EQ(request.members(1).condition(), v1::PUT_CONDITION_IF_PRESENT);
  EXPECT_EQ(request.members(2).expiration_case(), v1::MemberWrite::EXPIRATION_NOT_SET);
  EXPECT_EQ(request.members(2).condition(), v1::PUT_CONDITION_UNSPECIFIED);
  EXPECT_TRUE(request.members(2).keep_expiration());
}

TEST(ConvertRequests, KeyedRequestsCarryCollectionKeysAndOptions) {
  GetOptions refresh;
  refresh.refresh = Expiration::Ttl(absl::Minutes(1));
  const v1::GetMembersRequest get = GetMembersRequestToProto("c", {"k1", "k2"}, refresh);
  EXPECT_EQ(get.collection(), "c");
  EXPECT_THAT(get.keys(), ElementsAre("k1", "k2"));
  EXPECT_EQ(get.refresh_ttl().seconds(), 60);

  const v1::ExpireMembersRequest expire =
      ExpireMembersRequestToProto("c", {"k"}, Expiration::At(kTime), ExpireCondition::kIfLater);
  EXPECT_THAT(expire.keys(), ElementsAre("k"));
  EXPECT_EQ(TimeFromProto(expire.expire_time()), kTime);
  EXPECT_EQ(expire.condition(), v1::EXPIRE_CONDITION_IF_LATER);

  EXPECT_THAT(RemoveMembersRequestToProto("c", {"k"}).keys(), ElementsAre("k"));
  EXPECT_EQ(PersistMembersRequestToProto("c", {"k"}).collection(), "c");
}

TEST(ConvertRequests, ListAndCollectionRequestsCarryTheirOptions) {
  ListMembersOptions members;
  members.order_by = MemberOrder::kExpireTime;
  members.page_size = 3;
  members.page_token = "t";
  members.keys_only = true;
  const v1::ListMembersRequest list = ListMembersRequestToProto("c", members);
  EXPECT_EQ(list.order_by(), v1::MEMBER_ORDER_EXPIRE_TIME);
  EXPECT_EQ(list.page_size(), 3);
  EXPECT_EQ(list.page_token(), "t");
  EXPECT_TRUE(list.keys_only());

  ListCollectionsOptions collections;
  collections.prefix = "p";
  collections.page_size = 2;
  EXPECT_EQ(ListCollectionsRequestToProto(collections).prefix(), "p");
  EXPECT_EQ(GetCollectionRequestToProto("n").name(), "n");
  EXPECT_EQ(DeleteCollectionRequestToProto("n").name(), "n");
}

TEST(ConvertRequests, ResumingAWatchOverridesItsStartPosition) {
  WatchOptions options;
  options.collections = {"a", "b"};
  options.include_values = true;
  options.start = StartPosition::kOldest;
  EXPECT_EQ(WatchRequest(options, std::nullopt, "").start_position(), v1::START_POSITION_OLDEST);
  const v1::WatchExpirationsRequest resumed = WatchRequest(options, 41, "");
  EXPECT_EQ(resumed.start_position(), v1::START_POSITION_AFTER_SEQUENCE);
  EXPECT_EQ(resumed.after_sequence(), 41u);
  EXPECT_THAT(resumed.collections(), ElementsAre("a", "b"));
  EXPECT_TRUE(resumed.include_values());
  const v1::WatchExpirationsRequest by_token = WatchRequest(options, 41, "token");
  EXPECT_EQ(by_token.start_position(), v1::START_POSITION_AFTER_TOKEN);
  EXPECT_EQ(by_token.resume_token(), "token");
  EXPECT_EQ(by_token.after_sequence(), 0u);
  EXPECT_THAT(by_token.collections(), ElementsAre("a", "b"));
}

TEST(ConvertRequests, AWatchStartsFromTheTokenItIsGiven) {
  WatchOptions options;
  options.start = StartPosition::kAfterToken;
  options.resume_token = "token";
  const v1::WatchExpirationsRequest request = WatchRequest(options, std::nullopt, "");
  EXPECT_EQ(request.start_position(), v1::START_POSITION_AFTER_TOKEN);
  EXPECT_EQ(request.resume_token(), "token");
}

TEST(ConvertResponses, ReadOutcomesAndLeavePersistentDeadlinesUnset) {
  v1::PutMembersResponse put;
  v1::PutMemberResult* created = put.add_results();
  created->set_key("a");
  created->set_outcome(v1::PUT_OUTCOME_CREATED);
  TimeToProto(kTime, created->mutable_expire_time());
  v1::PutMemberResult* skipped = put.add_results();
  skipped->set_key("b");
  skipped->set_outcome(v1::PUT_OUTCOME_SKIPPED);
  absl::StatusOr<std::vector<PutResult>> results = FromProto(put);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[0].outcome, PutOutcome::kCreated);
  EXPECT_EQ((*results)[0].expire_time, kTime);
  EXPECT_EQ((*results)[1].outcome, PutOutcome::kSkipped);
  EXPECT_EQ((*results)[1].expire_time, std::nullopt);
}

TEST(ConvertResponses, AnOutcomeThisClientPredatesIsUnknownNamingTheRpc) {
  v1::ExpireMembersResponse expire;
  expire.add_results()->set_outcome(static_cast<v1::ExpireOutcome>(99));
  EXPECT_EQ(FromProto(expire).status().code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(FromProto(expire).status().message(),
              HasSubstr("ExpireMembers: unexpected outcome 99"));
  v1::PersistMembersResponse persist;
  persist.add_results()->set_outcome(static_cast<v1::PersistOutcome>(99));
  EXPECT_EQ(FromProto(persist).status().code(), absl::StatusCode::kUnknown);
}

TEST(ConvertResponses, PagesKeepTheirTokenAndCollectionsTheirNextDeadline) {
  v1::ListMembersResponse members;
  members.add_members()->set_key("k");
  members.set_next_page_token("next");
  const MemberPage page = FromProto(members);
  ASSERT_EQ(page.members.size(), 1u);
  EXPECT_EQ(page.members[0].key, "k");
  EXPECT_EQ(page.next_page_token, "next");

  v1::GetCollectionResponse collection;
  collection.mutable_collection()->set_name("c");
  collection.mutable_collection()->set_member_count(3);
  TimeToProto(kTime, collection.mutable_collection()->mutable_next_expire_time());
  const CollectionInfo info = FromProto(collection);
  EXPECT_EQ(info.name, "c");
  EXPECT_EQ(info.member_count, 3u);
  EXPECT_EQ(info.next_expire_time, kTime);

  v1::DeleteCollectionResponse deleted;
  deleted.set_removed_count(4);
  EXPECT_EQ(FromProto(deleted), 4u);
}

TEST(ConvertResponses, EventsCarryEveryField) {
  v1::ExpiryEvent proto;
  proto.set_sequence(9);
  proto.set_collection("c");
  proto.set_key("k");
  proto.set_value("v");
  TimeToProto(kTime, proto.mutable_expire_time());
  TimeToProto(kTime + absl::Seconds(1), proto.mutable_expired_at());
  const ExpiryEvent event = EventFromProto(proto);
  EXPECT_EQ(event.sequence, 9u);
  EXPECT_EQ(event.collection, "c");
  EXPECT_EQ(event.key, "k");
  EXPECT_EQ(event.value, "v");
  EXPECT_EQ(event.expire_time, kTime);
  EXPECT_EQ(event.expired_at, kTime + absl::Seconds(1));
}

}  // namespace
}  // namespace lapse::client::internal

// Every kind of bad input gets the right canonical code and a message that
// starts with the field at fault.
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/proto_convert.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

ServerOptions SmallLimits() {
  ServerOptions options = TestOptions();
  options.store.limits.max_key_bytes = 8;
  options.store.limits.max_members_per_request = 3;
  options.store.limits.max_watch_collections = 2;
  return options;
}

class BadInputTest : public ::testing::Test {
 protected:
  // Calls `method` and returns its status; the response is not wanted.
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::LapseService::Stub::*method)(grpc::ClientContext*,
                                                                   const Request&, Response*),
                    const Request& request) {
    Response response;
    return lapse::testing::Call(server_.stub(), method, request, &response);
  }

  grpc::Status Put(const v1::PutMembersRequest& request) {
    return Call(&v1::LapseService::Stub::PutMembers, request);
  }

  grpc::Status Watch(const v1::WatchExpirationsRequest& request) {
    Watcher watcher(server_.stub(), request);
    return watcher.WaitForEnd();
  }

  // A valid one-member request to spoil.
  static v1::PutMembersRequest GoodPut() {
    v1::PutMembersRequest request;
    request.set_collection("c");
    v1::MemberWrite* write = request.add_members();
    write->set_key("k");
    write->mutable_ttl()->set_seconds(10);
    return request;
  }

  TestServer server_{SmallLimits()};
};

void ExpectInvalid(const grpc::Status& status, const std::string& field) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), StartsWith(field + ": "));
}

TEST_F(BadInputTest, TheGoodRequestIsGood) { EXPECT_TRUE(Put(GoodPut()).ok()); }

TEST_F(BadInputTest, EmptyCollectionName) {
  v1::PutMembersRequest request = GoodPut();
  request.clear_collection();
  ExpectInvalid(Put(request), "collection");
  v1::GetCollectionRequest get;
  ExpectInvalid(Call(&v1::LapseService::Stub::GetCollection, get), "name");
}

TEST_F(BadInputTest, TooLongKey) {
  v1::PutMembersRequest request = GoodPut();
  request.mutable_members(0)->set_key("123456789");
  ExpectInvalid(Put(request), "members[0].key");
  const auto get = KeysRequest<v1::GetMembersRequest>("c", {"k", "123456789"});
  ExpectInvalid(Call(&v1::LapseService::Stub::GetMembers, get), "keys[1]");
}

TEST_F(BadInputTest, NegativeOrZeroTtl) {
  v1::PutMembersRequest negative = GoodPut();
  negative.mutable_members(0)->mutable_ttl()->set_seconds(-5);
  ExpectInvalid(Put(negative), "members[0].ttl");
  v1::PutMembersRequest zero = GoodPut();
  zero.mutable_members(0)->mutable_ttl()->set_seconds(0);
  ExpectInvalid(Put(zero), "members[0].ttl");
}

TEST_F(BadInputTest, InvalidDefaultExpirationNamesItsFieldAndWritesNothing) {
  v1::PutMembersRequest negative = GoodPut();
  negative.mutable_members(0)->clear_ttl();
  negative.mutable_default_ttl()->set_seconds(-5);
  ExpectInvalid(Put(negative), "default_ttl");
  v1::PutMembersRequest malformed = GoodPut();
  malformed.mutable_default_ttl()->set_nanos(-1);
  malformed.mutable_default_ttl()->set_seconds(1);
  ExpectInvalid(Put(malformed), "default_ttl");
  v1::PutMembersRequest past = GoodPut();
  *past.mutable_default_expire_time() = *TimeToProto(StartTime() - absl::Seconds(1));
  ExpectInvalid(Put(past), "default_expire_time");
  auto get = KeysRequest<v1::GetMembersRequest>("c", {"k"});
  v1::GetMembersResponse response;
  ASSERT_TRUE(
      lapse::testing::Call(server_.stub(), &v1::LapseService::Stub::GetMembers, get, &response)
          .ok());
  EXPECT_FALSE(response.results(0).found());
}

TEST_F(BadInputTest, MalformedTimestampAndDuration) {
  v1::PutMembersRequest request = GoodPut();
  v1::MemberWrite* second = request.add_members();
  second->set_key("k2");
  second->mutable_expire_time()->set_seconds(2'000'000'000);
  second->mutable_expire_time()->set_nanos(-1);
  const grpc::Status status = Put(request);
  ExpectInvalid(status, "members[1].expire_time");
  EXPECT_EQ(status.error_message(), "members[1].expire_time: nanos out of range");

  auto get = KeysRequest<v1::GetMembersRequest>("c", {"k"});
  get.mutable_refresh_ttl()->set_seconds(1);
  get.mutable_refresh_ttl()->set_nanos(-1);
  ExpectInvalid(Call(&v1::LapseService::Stub::GetMembers, get), "refresh_ttl");
}

TEST_F(BadInputTest, ExpireTimeInThePast) {
  v1::PutMembersRequest request = GoodPut();
  *request.mutable_members(0)->mutable_expire_time() = *TimeToProto(StartTime() - absl::Seconds(1));
  ExpectInvalid(Put(request), "members[0].expire_time");
}

TEST_F(BadInputTest, DuplicateKeys) {
  v1::PutMembersRequest request = GoodPut();
  *request.add_members() = request.members(0);
  ExpectInvalid(Put(request), "members[1].key");
  const auto remove = KeysRequest<v1::RemoveMembersRequest>("c", {"x", "x"});
  ExpectInvalid(Call(&v1::LapseService::Stub::RemoveMembers, remove), "keys[1]");
}

TEST_F(BadInputTest, TooManyMembers) {
  v1::PutMembersRequest request = GoodPut();
  for (const char* key : {"b", "c", "d"}) {
    *request.add_members() = request.members(0);
    request.mutable_members(request.members_size() - 1)->set_key(key);
  }
  ExpectInvalid(Put(request), "members");
}

TEST_F(BadInputTest, KeepExpirationWithATtl) {
  v1::PutMembersRequest request = GoodPut();
  request.mutable_members(0)->set_keep_expiration(true);
  ExpectInvalid(Put(request), "members[0].keep_expiration");
}

TEST_F(BadInputTest, UnknownEnumValues) {
  v1::PutMembersRequest put = GoodPut();
  put.mutable_members(0)->set_condition(static_cast<v1::PutCondition>(9));
  ExpectInvalid(Put(put), "members[0].condition");

  v1::ExpireMembersRequest expire;
  expire.set_collection("c");
  expire.add_keys("k");
  expire.mutable_ttl()->set_seconds(5);
  expire.set_condition(static_cast<v1::ExpireCondition>(99));
  ExpectInvalid(Call(&v1::LapseService::Stub::ExpireMembers, expire), "condition");

  v1::ListMembersRequest list;
  list.set_collection("c");
  list.set_order_by(static_cast<v1::MemberOrder>(5));
  ExpectInvalid(Call(&v1::LapseService::Stub::ListMembers, list), "order_by");

  v1::WatchExpirationsRequest watch;
  watch.set_start_position(static_cast<v1::StartPosition>(9));
  ExpectInvalid(Watch(watch), "start_position");
}

TEST_F(BadInputTest, ExpireWithoutAnExpiration) {
  v1::ExpireMembersRequest expire;
  expire.set_collection("c");
  expire.add_keys("k");
  ExpectInvalid(Call(&v1::LapseService::Stub::ExpireMembers, expire), "expiration");
}

TEST_F(BadInputTest, BadPageTokens) {
  v1::ListMembersRequest list;
  list.set_collection("c");
  list.set_page_token("definitely not a token");
  ExpectInvalid(Call(&v1::LapseService::Stub::ListMembers, list), "page_token");

  ASSERT_TRUE(Put(GoodPut()).ok());
  v1::PutMembersRequest more = GoodPut();
  more.mutable_members(0)->set_key("k2");
  ASSERT_TRUE(Put(more).ok());
  list.clear_page_token();
  list.set_page_size(1);
  v1::ListMembersResponse first;
  ASSERT_TRUE(
      lapse::testing::Call(server_.stub(), &v1::LapseService::Stub::ListMembers, list, &first)
          .ok());
  ASSERT_FALSE(first.next_page_token().empty());
  // The token belongs to collection "c" ordered by key.
  list.set_page_token(first.next_page_token());
  list.set_collection("other");
  ExpectInvalid(Call(&v1::LapseService::Stub::ListMembers, list), "page_token");
  list.set_collection("c");
  list.set_order_by(v1::MEMBER_ORDER_EXPIRE_TIME);
  ExpectInvalid(Call(&v1::LapseService::Stub::ListMembers, list), "page_token");

  v1::ListCollectionsRequest collections;
  collections.set_page_token("AAAA");
  ExpectInvalid(Call(&v1::LapseService::Stub::ListCollections, collections), "page_token");
}

TEST_F(BadInputTest, NegativePageSize) {
  v1::ListMembersRequest list;
  list.set_collection("c");
  list.set_page_size(-1);
  ExpectInvalid(Call(&v1::LapseService::Stub::ListMembers, list), "page_size");
  v1::ListCollectionsRequest collections;
  collections.set_page_size(-1);
  ExpectInvalid(Call(&v1::LapseService::Stub::ListCollections, collections), "page_size");
}

TEST_F(BadInputTest, WatchWithBothFilters) {
  v1::WatchExpirationsRequest request;
  request.add_collections("a");
  request.set_collection_prefix("a");
  ExpectInvalid(Watch(request), "collections");
}

TEST_F(BadInputTest, WatchWithTooManyCollections) {
  v1::WatchExpirationsRequest request;
  for (const char* name : {"a", "b", "c"}) request.add_collections(name);
  ExpectInvalid(Watch(request), "collections");
}

TEST_F(BadInputTest, WatchWithAnEmptyCollectionName) {
  v1::WatchExpirationsRequest request;
  request.add_collections("a");
  request.add_collections("");
  ExpectInvalid(Watch(request), "collections[1]");
}

TEST_F(BadInputTest, WatchAfterSequenceWithoutItsStartPosition) {
  v1::WatchExpirationsRequest request;
  request.set_after_sequence(5);
  ExpectInvalid(Watch(request), "after_sequence");
  request.set_start_position(v1::START_POSITION_OLDEST);
  ExpectInvalid(Watch(request), "after_sequence");
}

TEST_F(BadInputTest, WatchResumeTokenWithoutItsStartPosition) {
  v1::WatchExpirationsRequest request;
  request.set_resume_token("token");
  const grpc::Status status = Watch(request);
  ExpectInvalid(status, "resume_token");
  EXPECT_THAT(status.error_message(), HasSubstr("only allowed with START_POSITION_AFTER_TOKEN"));
}

TEST_F(BadInputTest, WatchAfterAMalformedResumeToken) {
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_AFTER_TOKEN);
  for (const auto& [token, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty"},
           {"not a token", "format version 110 is not known"},
           {std::string(1, '\x01') + std::string(7, 'x'), "truncated"}}) {
    request.set_resume_token(token);
    const grpc::Status status = Watch(request);
    ExpectInvalid(status, "resume_token");
    EXPECT_THAT(status.error_message(), HasSubstr(why));
  }
}

TEST_F(BadInputTest, WatchFromBeyondTheNewestSequence) {
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
  request.set_after_sequence(server_.server().store().events().last_sequence() + 1);
  const grpc::Status status = Watch(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(), HasSubstr("beyond the newest event"));
}

}  // namespace
}  // namespace lapse::testing

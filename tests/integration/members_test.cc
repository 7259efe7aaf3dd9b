// Member RPCs end to end: results, outcomes and expire_time round trips.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/proto_convert.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::ElementsAre;

google::protobuf::Duration Millis(int64_t ms) {
  google::protobuf::Duration d;
  d.set_seconds(ms / 1000);
  d.set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
  return d;
}

std::vector<std::string> Keys(const v1::ListMembersResponse& response) {
  std::vector<std::string> keys;
  for (const v1::Member& m : response.members()) keys.push_back(m.key());
  return keys;
}

class MembersTest : public ::testing::Test {
 protected:
  grpc::Status Put(const v1::PutMembersRequest& request, v1::PutMembersResponse* response) {
    return Call(server_.stub(), &v1::LapseService::Stub::PutMembers, request, response);
  }

  v1::GetMembersResponse Get(const v1::GetMembersRequest& request) {
    return CallOk(server_.stub(), &v1::LapseService::Stub::GetMembers, request);
  }

  v1::ListMembersResponse List(const v1::ListMembersRequest& request) {
    return CallOk(server_.stub(), &v1::LapseService::Stub::ListMembers, request);
  }

  struct Pages {
    std::vector<std::string> keys;  // Every page's keys, in order.
    int count = 0;                  // Pages read.
  };

  // Follows next_page_token from `request` to the end (at most 10 pages, so a
  // token that never ends fails instead of hanging), calling `check` on each member.
  Pages ListEveryPage(v1::ListMembersRequest request,
                      const std::function<void(const v1::Member&)>& check) {
    Pages pages;
    do {
      const v1::ListMembersResponse page = List(request);
      for (const v1::Member& m : page.members()) {
        pages.keys.push_back(m.key());
        check(m);
      }
      request.set_page_token(page.next_page_token());
      ++pages.count;
    } while (!request.page_token().empty() && pages.count < 10);
    return pages;
  }

  TestServer server_;
};

TEST_F(MembersTest, PutReportsOutcomesAndRoundsDeadlinesUpToTheMillisecond) {
  v1::PutMembersRequest request;
  request.set_collection("orders");
  v1::MemberWrite* ttl = request.add_members();
  ttl->set_key("ttl");
  ttl->set_value("1");
  ttl->mutable_ttl()->set_seconds(1);
  ttl->mutable_ttl()->set_nanos(500'000'001);
  v1::MemberWrite* at = request.add_members();
  at->set_key("at");
  at->set_value("2");
  *at->mutable_expire_time() = *TimeToProto(StartTime() + absl::Seconds(10) + absl::Nanoseconds(1));
  v1::MemberWrite* persistent = request.add_members();
  persistent->set_key("persistent");
  persistent->set_value("3");

  v1::PutMembersResponse response;
  ASSERT_TRUE(Put(request, &response).ok());
  ASSERT_EQ(response.results_size(), 3);
  EXPECT_EQ(response.results(0).key(), "ttl");
  EXPECT_EQ(response.results(0).outcome(), v1::PUT_OUTCOME_CREATED);
  EXPECT_EQ(TimeOf(response.results(0).expire_time()), StartTime() + absl::Milliseconds(1501));
  EXPECT_EQ(response.results(1).key(), "at");
  EXPECT_EQ(TimeOf(response.results(1).expire_time()), StartTime() + absl::Milliseconds(10'001));
  EXPECT_EQ(response.results(2).outcome(), v1::PUT_OUTCOME_CREATED);
  EXPECT_FALSE(response.results(2).has_expire_time());

  // Conditions: IF_ABSENT skips an existing member, IF_PRESENT a missing one.
  v1::PutMembersRequest again;
  again.set_collection("orders");
  v1::MemberWrite* absent = again.add_members();
  absent->set_key("ttl");
  absent->set_value("new");
  absent->set_condition(v1::PUT_CONDITION_IF_ABSENT);
  v1::MemberWrite* present = again.add_members();
  present->set_key("missing");
  present->set_condition(v1::PUT_CONDITION_IF_PRESENT);
  v1::MemberWrite* replace = again.add_members();
  replace->set_key("at");
  replace->set_value("2b");
  replace->set_keep_expiration(true);
  v1::PutMembersResponse again_response;
  ASSERT_TRUE(Put(again, &again_response).ok());
  EXPECT_EQ(again_response.results(0).outcome(), v1::PUT_OUTCOME_SKIPPED);
  EXPECT_EQ(TimeOf(again_response.results(0).expire_time()),
            StartTime() + absl::Milliseconds(1501));
  EXPECT_EQ(again_response.results(1).outcome(), v1::PUT_OUTCOME_SKIPPED);
  EXPECT_EQ(again_response.results(2).outcome(), v1::PUT_OUTCOME_REPLACED);
  EXPECT_EQ(TimeOf(again_response.results(2).expire_time()),
            StartTime() + absl::Milliseconds(10'001));
}

TEST_F(MembersTest, PutWithADefaultTtlAndOmittedCreatedResultsListsOnlyWhatWasNotCreated) {
  PutTtl(server_.stub(), "orders", {"old"}, absl::Seconds(60));
  v1::PutMembersRequest request;
  request.set_collection("orders");
  *request.mutable_default_ttl() = Millis(1500);
  request.set_omit_created_results(true);
  for (const char* key : {"new1", "old", "new2"}) {
    v1::MemberWrite* write = request.add_members();
    write->set_key(key);
    write->set_value("v");
  }
  v1::MemberWrite* own = request.add_members();
  own->set_key("own");
  *own->mutable_ttl() = Millis(9000);

  v1::PutMembersResponse response;
  ASSERT_TRUE(Put(request, &response).ok());
  EXPECT_EQ(response.created_count(), 3u);
  EXPECT_EQ(TimeOf(response.default_expire_time()), StartTime() + absl::Milliseconds(1500));
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).key(), "old");
  EXPECT_EQ(response.results(0).outcome(), v1::PUT_OUTCOME_REPLACED);
  EXPECT_EQ(TimeOf(response.results(0).expire_time()), StartTime() + absl::Milliseconds(1500));

  const v1::GetMembersResponse got =
      Get(KeysRequest<v1::GetMembersRequest>("orders", {"new1", "new2", "own"}));
  EXPECT_EQ(TimeOf(got.results(0).member().expire_time()), StartTime() + absl::Milliseconds(1500));
  EXPECT_EQ(TimeOf(got.results(1).member().expire_time()), StartTime() + absl::Milliseconds(1500));
  EXPECT_EQ(TimeOf(got.results(2).member().expire_time()), StartTime() + absl::Milliseconds(9000));
}

TEST_F(MembersTest, PutWithoutTheNewFieldsStillAnswersEveryMember) {
  v1::PutMembersRequest request;
  request.set_collection("orders");
  request.add_members()->set_key("a");
  request.add_members()->set_key("b");
  v1::PutMembersResponse response;
  ASSERT_TRUE(Put(request, &response).ok());
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_EQ(response.created_count(), 2u);
  EXPECT_FALSE(response.has_default_expire_time());
  EXPECT_FALSE(response.results(0).has_expire_time());
}

TEST_F(MembersTest, PutBeyondMaxMembersFailsAndWritesNothing) {
  PutTtl(server_.stub(), "capped", {"a", "b"}, absl::Seconds(60));
  v1::PutMembersRequest request;
  request.set_collection("capped");
  request.set_max_members(2);
  request.add_members()->set_key("a");
  request.add_members()->set_key("c");
  v1::PutMembersResponse response;
  EXPECT_EQ(Put(request, &response).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  const v1::GetMembersResponse got = Get(KeysRequest<v1::GetMembersRequest>("capped", {"a", "c"}));
  EXPECT_EQ(got.results(0).member().value(), "v:a");
  EXPECT_FALSE(got.results(1).found());
}

// max_total_members, on every store: a put that would pass the store's
// bound (the embedded store's total; the Redis store's share of it for the
// collection's partition, docs/redis-cluster.md) is refused, writing
// nothing, and every way a member goes makes room again.
TEST_F(MembersTest, AFullStoreRefusesNewMembersWritingNothingUntilRoomIsMade) {
  ServerOptions options = TestOptions();
  options.store.limits.max_total_members = 16;
  TestServer server(options);
  v1::LapseService::Stub& stub = server.stub();
  int held = 0;
  grpc::Status refused;
  for (; held <= 16; ++held) {
    refused = PutPersistent(stub, "full", absl::StrCat("k", held));
    if (!refused.ok()) break;
  }
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  ASSERT_GE(held, 2);
  auto found = [&](const std::string& key) {
    v1::GetMembersResponse got;
    EXPECT_TRUE(Call(stub, &v1::LapseService::Stub::GetMembers,
                     KeysRequest<v1::GetMembersRequest>("full", {key}), &got)
                    .ok());
    return got.results_size() == 1 && got.results(0).found();
  };
  EXPECT_FALSE(found(absl::StrCat("k", held))) << "a refused put writes nothing";
  EXPECT_TRUE(PutPersistent(stub, "full", "k0").ok()) << "replacing adds no member";

  v1::RemoveMembersResponse removed;
  ASSERT_TRUE(Call(stub, &v1::LapseService::Stub::RemoveMembers,
                   KeysRequest<v1::RemoveMembersRequest>("full", {"k0"}), &removed)
                  .ok());
  EXPECT_TRUE(PutPersistent(stub, "full", "after-remove").ok());
  EXPECT_EQ(PutPersistent(stub, "full", "one-too-many").error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  ExpireNow(stub, "full", {"k1"}, server.clock().Now());
  EXPECT_FALSE(found("k1"));
  EXPECT_TRUE(PutPersistent(stub, "full", "after-expiry").ok());
  EXPECT_EQ(PutPersistent(stub, "full", "one-too-many").error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  v1::DeleteCollectionRequest drop;
  drop.set_name("full");
  v1::DeleteCollectionResponse dropped;
  ASSERT_TRUE(Call(stub, &v1::LapseService::Stub::DeleteCollection, drop, &dropped).ok());
  for (int i = 0; i < held; ++i) {
    EXPECT_TRUE(PutPersistent(stub, "full", absl::StrCat("again", i)).ok()) << i;
  }
}

TEST_F(MembersTest, GetReturnsOneResultPerKeyAndSlidesDeadlines) {
  PutTtl(server_.stub(), "sessions", {"s1"}, absl::Seconds(5));
  auto request = KeysRequest<v1::GetMembersRequest>("sessions", {"s1", "nope"});
  v1::GetMembersResponse plain = Get(request);
  ASSERT_EQ(plain.results_size(), 2);
  EXPECT_TRUE(plain.results(0).found());
  EXPECT_EQ(plain.results(0).member().key(), "s1");
  EXPECT_EQ(plain.results(0).member().value(), "v:s1");
  EXPECT_EQ(TimeOf(plain.results(0).member().expire_time()), StartTime() + absl::Seconds(5));
  EXPECT_FALSE(plain.results(1).found());
  EXPECT_EQ(plain.results(1).member().key(), "nope");
  EXPECT_FALSE(plain.results(1).member().has_expire_time());

  server_.clock().Advance(absl::Seconds(4));
  *request.mutable_refresh_ttl() = Millis(30'000);
  v1::GetMembersResponse refreshed = Get(request);
  EXPECT_EQ(TimeOf(refreshed.results(0).member().expire_time()), StartTime() + absl::Seconds(34));

  // The old deadline has passed; the refreshed one holds.
  server_.clock().Advance(absl::Seconds(10));
  request.clear_refresh_ttl();
  EXPECT_TRUE(Get(request).results(0).found());
}

TEST_F(MembersTest, AnExpiredMemberIsNeverReturned) {
  PutTtl(server_.stub(), "short", {"k"}, absl::Milliseconds(100));
  server_.clock().Advance(absl::Milliseconds(100));
  EXPECT_FALSE(Get(KeysRequest<v1::GetMembersRequest>("short", {"k"})).results(0).found());
}

TEST_F(MembersTest, RemoveReportsWhichMembersExisted) {
  PutTtl(server_.stub(), "carts", {"a"}, absl::Seconds(60));
  const auto request = KeysRequest<v1::RemoveMembersRequest>("carts", {"a", "b"});
  v1::RemoveMembersResponse response;
  ASSERT_TRUE(
      Call(server_.stub(), &v1::LapseService::Stub::RemoveMembers, request, &response).ok());
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_EQ(response.results(0).key(), "a");
  EXPECT_TRUE(response.results(0).existed());
  EXPECT_EQ(response.results(1).key(), "b");
  EXPECT_FALSE(response.results(1).existed());
}

TEST_F(MembersTest, ExpireReportsEveryOutcome) {
  PutTtl(server_.stub(), "jobs", {"timed", "gone"}, absl::Seconds(60));
  ASSERT_TRUE(PutPersistent(server_.stub(), "jobs", "forever").ok());

  auto expire = [&](const std::vector<std::string>& keys, v1::ExpireCondition condition,
                    bool past) {
    auto request = KeysRequest<v1::ExpireMembersRequest>("jobs", keys);
    request.set_condition(condition);
    if (past) {
      *request.mutable_expire_time() = *TimeToProto(StartTime() - absl::Seconds(1));
    } else {
      *request.mutable_ttl() = Millis(120'000);
    }
    return CallOk(server_.stub(), &v1::LapseService::Stub::ExpireMembers, request);
  };

  v1::ExpireMembersResponse later =
      expire({"timed", "forever", "missing"}, v1::EXPIRE_CONDITION_IF_LATER, false);
  EXPECT_EQ(later.results(0).outcome(), v1::EXPIRE_OUTCOME_UPDATED);
  EXPECT_EQ(TimeOf(later.results(0).expire_time()), StartTime() + absl::Seconds(120));
  // A persistent member expires infinitely late: nothing is later.
  EXPECT_EQ(later.results(1).outcome(), v1::EXPIRE_OUTCOME_CONDITION_NOT_MET);
  EXPECT_FALSE(later.results(1).has_expire_time());
  EXPECT_EQ(later.results(2).outcome(), v1::EXPIRE_OUTCOME_NOT_FOUND);

  Watcher watcher(server_.stub(), AllEvents());
  v1::ExpireMembersResponse past = expire({"gone"}, v1::EXPIRE_CONDITION_UNSPECIFIED, true);
  EXPECT_EQ(past.results(0).outcome(), v1::EXPIRE_OUTCOME_EXPIRED);
  EXPECT_FALSE(past.results(0).has_expire_time());
  // One event for "gone": a sentinel expired after it proves no second one.
  ExpireNow(server_.stub(), "jobs", {"timed"}, StartTime());
  ASSERT_TRUE(watcher.WaitForEvents(2));
  const std::vector<v1::ExpiryEvent> events = watcher.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].key(), "gone");
  EXPECT_EQ(events[1].key(), "timed");
}

TEST_F(MembersTest, PersistReportsEveryOutcome) {
  PutTtl(server_.stub(), "p", {"timed"}, absl::Seconds(60));
  ASSERT_TRUE(PutPersistent(server_.stub(), "p", "forever").ok());

  const auto request = KeysRequest<v1::PersistMembersRequest>("p", {"timed", "forever", "missing"});
  v1::PersistMembersResponse response;
  ASSERT_TRUE(
      Call(server_.stub(), &v1::LapseService::Stub::PersistMembers, request, &response).ok());
  ASSERT_EQ(response.results_size(), 3);
  EXPECT_EQ(response.results(0).key(), "timed");
  EXPECT_EQ(response.results(0).outcome(), v1::PERSIST_OUTCOME_PERSISTED);
  EXPECT_EQ(response.results(1).outcome(), v1::PERSIST_OUTCOME_NO_EXPIRATION);
  EXPECT_EQ(response.results(2).outcome(), v1::PERSIST_OUTCOME_NOT_FOUND);

  server_.clock().Advance(absl::Seconds(120));
  EXPECT_TRUE(Get(KeysRequest<v1::GetMembersRequest>("p", {"timed"})).results(0).found());
}

TEST_F(MembersTest, ListPagesByKeyWithOpaqueTokens) {
  PutTtl(server_.stub(), "list", {"e", "a", "d", "b", "c"}, absl::Seconds(60));
  v1::ListMembersRequest request;
  request.set_collection("list");
  request.set_page_size(2);
  const Pages pages =
      ListEveryPage(request, [](const v1::Member& m) { EXPECT_EQ(m.value(), "v:" + m.key()); });
  EXPECT_THAT(pages.keys, ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_EQ(pages.count, 3);
}

TEST_F(MembersTest, ListPagesByExpireTimeWithPersistentMembersLast) {
  PutTtl(server_.stub(), "byexp", {"late"}, absl::Seconds(30));
  PutTtl(server_.stub(), "byexp", {"early"}, absl::Seconds(10));
  PutTtl(server_.stub(), "byexp", {"mid"}, absl::Seconds(20));
  ASSERT_TRUE(PutPersistent(server_.stub(), "byexp", "aaa-forever").ok());

  v1::ListMembersRequest request;
  request.set_collection("byexp");
  request.set_order_by(v1::MEMBER_ORDER_EXPIRE_TIME);
  request.set_page_size(1);
  request.set_keys_only(true);
  const Pages pages =
      ListEveryPage(request, [](const v1::Member& m) { EXPECT_TRUE(m.value().empty()); });
  EXPECT_THAT(pages.keys, ElementsAre("early", "mid", "late", "aaa-forever"));
}

TEST_F(MembersTest, ListOfAMissingCollectionIsEmpty) {
  v1::ListMembersRequest request;
  request.set_collection("missing");
  const v1::ListMembersResponse response = List(request);
  EXPECT_EQ(response.members_size(), 0);
  EXPECT_TRUE(response.next_page_token().empty());
}

TEST_F(MembersTest, PageSizeAboveTheMaximumIsCoerced) {
  ServerOptions options = TestOptions();
  options.store.limits.max_page_size = 3;
  TestServer small(options);
  PutTtl(small.stub(), "many", {"a", "b", "c", "d", "e"}, absl::Seconds(60));
  v1::ListMembersRequest request;
  request.set_collection("many");
  request.set_page_size(1000);
  v1::ListMembersResponse response;
  ASSERT_TRUE(Call(small.stub(), &v1::LapseService::Stub::ListMembers, request, &response).ok());
  EXPECT_THAT(Keys(response), ElementsAre("a", "b", "c"));
  EXPECT_FALSE(response.next_page_token().empty());
}

// A server whose messages hold three of the largest values it accepts.
ServerOptions SmallMessageOptions() {
  ServerOptions options = TestOptions();
  options.store.limits.max_value_bytes = 64 << 10;
  options.store.limits.max_members_per_request = 100;
  options.max_message_bytes = 200 << 10;
  return options;
}

// Puts `count` members "k0", "k1", ... with values of the largest size, one
// per request (a request is bounded by the message size too).
void PutLargest(TestServer& server, const std::string& collection, int count) {
  for (int i = 0; i < count; ++i) {
    v1::PutMembersRequest request;
    request.set_collection(collection);
    v1::MemberWrite* write = request.add_members();
    write->set_key(absl::StrCat("k", i));
    write->set_value(std::string(64 << 10, 'v'));
    write->mutable_ttl()->set_seconds(60);
    v1::PutMembersResponse response;
    const grpc::Status status =
        Call(server.stub(), &v1::LapseService::Stub::PutMembers, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
}

TEST(ResponseBoundsTest, LargeValuesListAtTheDefaultPageSizeInPagesCutByBytes) {
  TestServer server(SmallMessageOptions());
  PutLargest(server, "big", 10);
  v1::ListMembersRequest request;
  request.set_collection("big");
  std::vector<int> page_sizes;
  std::vector<std::string> keys;
  do {
    v1::ListMembersResponse page;
    const grpc::Status status =
        Call(server.stub(), &v1::LapseService::Stub::ListMembers, request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    page_sizes.push_back(page.members_size());
    for (const v1::Member& m : page.members()) {
      keys.push_back(m.key());
      EXPECT_EQ(m.value().size(), size_t{64} << 10);
    }
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty() && page_sizes.size() < 10);
  EXPECT_THAT(page_sizes, ElementsAre(3, 3, 3, 1));
  EXPECT_THAT(keys, ElementsAre("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"));

  request.clear_page_token();
  request.set_keys_only(true);
  v1::ListMembersResponse keys_only;
  ASSERT_TRUE(Call(server.stub(), &v1::LapseService::Stub::ListMembers, request, &keys_only).ok());
  EXPECT_EQ(keys_only.members_size(), 10);
  EXPECT_TRUE(keys_only.next_page_token().empty());
}

TEST(ResponseBoundsTest, GetMembersWhoseAnswerWouldNotFitIsResourceExhaustedAndRefreshesNothing) {
  TestServer server(SmallMessageOptions());
  PutLargest(server, "big", 4);
  auto request = KeysRequest<v1::GetMembersRequest>("big", {"k0", "k1", "k2", "k3"});
  *request.mutable_refresh_ttl() = Millis(3'600'000);
  v1::GetMembersResponse response;
  const grpc::Status status =
      Call(server.stub(), &v1::LapseService::Stub::GetMembers, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("get fewer keys per request"));

  auto three = KeysRequest<v1::GetMembersRequest>("big", {"k0", "k1", "k2"});
  ASSERT_TRUE(Call(server.stub(), &v1::LapseService::Stub::GetMembers, three, &response).ok());
  ASSERT_EQ(response.results_size(), 3);
  for (const v1::GetMemberResult& result : response.results()) {
    EXPECT_EQ(TimeOf(result.member().expire_time()), StartTime() + absl::Seconds(60))
        << "the refused refresh moved no deadline";
  }
}

}  // namespace
}  // namespace lapse::testing

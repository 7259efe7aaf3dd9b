// Collection RPCs end to end: GetCollection, ListCollections, DeleteCollection.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/proto_convert.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CollectionsTest : public ::testing::Test {
 protected:
  grpc::Status GetCollection(const std::string& name, v1::GetCollectionResponse* response) {
    v1::GetCollectionRequest request;
    request.set_name(name);
    return Call(server_.stub(), &v1::LapseService::Stub::GetCollection, request, response);
  }

  grpc::Status ListCollections(const v1::ListCollectionsRequest& request,
                               v1::ListCollectionsResponse* response) {
    return Call(server_.stub(), &v1::LapseService::Stub::ListCollections, request, response);
  }

  TestServer server_;
};

TEST_F(CollectionsTest, GetCollectionCountsMembersAndNextDeadline) {
  PutTtl(server_.stub(), "orders", {"a"}, absl::Seconds(20));
  PutTtl(server_.stub(), "orders", {"b"}, absl::Seconds(10));
  ASSERT_TRUE(PutPersistent(server_.stub(), "orders", "c").ok());

  v1::GetCollectionResponse response;
  ASSERT_TRUE(GetCollection("orders", &response).ok());
  EXPECT_EQ(response.collection().name(), "orders");
  EXPECT_EQ(response.collection().member_count(), 3u);
  EXPECT_EQ(response.collection().expiring_count(), 2u);
  EXPECT_EQ(*TimeFromProto(response.collection().next_expire_time(), "t"),
            StartTime() + absl::Seconds(10));
}

TEST_F(CollectionsTest, GetCollectionOfAMissingCollectionIsNotFound) {
  v1::GetCollectionResponse response;
  const grpc::Status status = GetCollection("nothing", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nothing"));
}

TEST_F(CollectionsTest, ACollectionIsGoneWithItsLastMember) {
  PutTtl(server_.stub(), "brief", {"k"}, absl::Seconds(1));
  server_.clock().Advance(absl::Seconds(1));
  v1::GetCollectionResponse response;
  EXPECT_EQ(GetCollection("brief", &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CollectionsTest, ListCollectionsPagesByPrefix) {
  for (const char* name : {"orders:3", "carts:1", "orders:1", "orders:2", "orders:4"}) {
    PutTtl(server_.stub(), name, {"k"}, absl::Seconds(60));
  }
  v1::ListCollectionsRequest request;
  request.set_prefix("orders:");
  request.set_page_size(3);
  std::vector<std::string> names;
  int pages = 0;
  do {
    v1::ListCollectionsResponse page;
    ASSERT_TRUE(ListCollections(request, &page).ok());
    for (const v1::CollectionInfo& info : page.collections()) {
      names.push_back(info.name());
      EXPECT_EQ(info.member_count(), 1u);
    }
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_THAT(names, ElementsAre("orders:1", "orders:2", "orders:3", "orders:4"));
  EXPECT_EQ(pages, 2);
}

TEST_F(CollectionsTest, AListTokenIsBoundToItsPrefix) {
  for (const char* name : {"a1", "a2", "a3"}) {
    PutTtl(server_.stub(), name, {"k"}, absl::Seconds(60));
  }
  v1::ListCollectionsRequest request;
  request.set_prefix("a");
  request.set_page_size(1);
  v1::ListCollectionsResponse first;
  ASSERT_TRUE(ListCollections(request, &first).ok());
  ASSERT_FALSE(first.next_page_token().empty());
  request.set_prefix("b");
  request.set_page_token(first.next_page_token());
  v1::ListCollectionsResponse second;
  const grpc::Status status = ListCollections(request, &second);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_token"));
}

TEST_F(CollectionsTest, DeleteCollectionRemovesEveryMemberWithoutEvents) {
  PutTtl(server_.stub(), "doomed", {"a", "b", "c"}, absl::Seconds(60));
  const uint64_t last = server_.server().store().events().last_sequence();
  auto remove = [&] {
    v1::DeleteCollectionRequest request;
    request.set_name("doomed");
    v1::DeleteCollectionResponse response;
    EXPECT_TRUE(
        Call(server_.stub(), &v1::LapseService::Stub::DeleteCollection, request, &response).ok());
    return response.removed_count();
  };
  EXPECT_EQ(remove(), 3u);
  EXPECT_EQ(remove(), 0u);
  EXPECT_EQ(server_.server().store().events().last_sequence(), last);
  v1::GetCollectionResponse response;
  EXPECT_EQ(GetCollection("doomed", &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace lapse::testing

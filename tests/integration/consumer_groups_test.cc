// Consumer groups end to end: several consumers sharing a group's events,
// several groups and a plain watcher reading the same events, redelivery to
// the others when a consumer dies, and polling from a client that
// reconnects between calls.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

v1::PollResponse Poll(v1::LapseService::Stub& stub, const std::string& group,
                      const std::string& consumer, uint32_t max_events) {
  v1::PollRequest request;
  request.set_group(group);
  request.set_consumer(consumer);
  request.set_max_events(max_events);
  v1::PollResponse response;
  grpc::Status status = Call(stub, &v1::LapseService::Stub::Poll, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

v1::AckResponse Ack(v1::LapseService::Stub& stub, const std::string& group,
                    const std::string& consumer, const v1::PollResponse& polled) {
  v1::AckRequest request;
  request.set_group(group);
  request.set_consumer(consumer);
  for (const v1::Delivery& d : polled.deliveries()) {
    v1::LeaseRef* lease = request.add_leases();
    lease->set_sequence(d.event().sequence());
    lease->set_delivery_count(d.delivery_count());
  }
  v1::AckResponse response;
  grpc::Status status = Call(stub, &v1::LapseService::Stub::Ack, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST(ConsumerGroupsTest, EachGroupAcksEveryEventOnceAndAPlainWatcherSeesThemAll) {
  constexpr int kEvents = 5000;
  TestServer server;
  CreateGroup(server.stub(), "billing");
  CreateGroup(server.stub(), "audit");
  Watcher watcher(server.stub(), AllEvents());
  const std::vector<std::string> keys = PutExpiring(server.stub(), kEvents);
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(kEvents));

  // Three consumers take turns on "billing", one consumes "audit" alone.
  std::map<std::string, int> billing_acks;
  std::map<std::string, std::string> handled_by;
  const std::string consumers[] = {"c1", "c2", "c3"};
  for (int turn = 0; billing_acks.size() < keys.size(); ++turn) {
    ASSERT_LT(turn, 3 * kEvents) << "the group stopped delivering";
    const std::string& consumer = consumers[turn % 3];
    v1::PollResponse polled = Poll(server.stub(), "billing", consumer, 97);
    for (const v1::Delivery& d : polled.deliveries()) {
      EXPECT_EQ(d.delivery_count(), 1u);
      ++billing_acks[d.event().key()];
      handled_by[d.event().key()] = consumer;
    }
    const v1::AckResponse acked = Ack(server.stub(), "billing", consumer, polled);
    for (const v1::LeaseResult& r : acked.results()) EXPECT_EQ(r.code(), 0) << r.message();
  }
  std::map<std::string, int> audit_acks;
  while (audit_acks.size() < keys.size()) {
    v1::PollResponse polled = Poll(server.stub(), "audit", "solo", 1000);
    ASSERT_GT(polled.deliveries_size(), 0) << "the group stopped delivering";
    for (const v1::Delivery& d : polled.deliveries()) ++audit_acks[d.event().key()];
    Ack(server.stub(), "audit", "solo", polled);
  }
  for (const std::string& key : keys) {
    EXPECT_EQ(billing_acks[key], 1) << key;
    EXPECT_EQ(audit_acks[key], 1) << key;
  }
  std::map<std::string, int> per_consumer;
  for (const auto& [key, consumer] : handled_by) ++per_consumer[consumer];
  EXPECT_EQ(per_consumer.size(), 3u) << "every consumer got a share";
  EXPECT_EQ(Poll(server.stub(), "billing", "c1", 100).deliveries_size(), 0);

  v1::GetConsumerGroupRequest get;
  get.set_name("billing");
  v1::GetConsumerGroupResponse info;
  ASSERT_TRUE(Call(server.stub(), &v1::LapseService::Stub::GetConsumerGroup, get, &info).ok());
  EXPECT_EQ(info.group().pending(), 0u);
  EXPECT_EQ(info.group().acked_total(), static_cast<uint64_t>(kEvents));
  EXPECT_EQ(info.group().lag(), 0u);
}

TEST(ConsumerGroupsTest, TheEventsOfAConsumerThatDiedGoToTheOthersAfterTheVisibilityTimeout) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  Watcher watcher(server.stub(), AllEvents());
  PutExpiring(server.stub(), 20);
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(20));

  v1::PollResponse dead = Poll(server.stub(), "g", "dies-mid-batch", 10);
  ASSERT_EQ(dead.deliveries_size(), 10);
  v1::PollResponse alive = Poll(server.stub(), "g", "survivor", 100);
  ASSERT_EQ(alive.deliveries_size(), 10) << "the leased half is not handed out again";
  Ack(server.stub(), "g", "survivor", alive);
  EXPECT_EQ(Poll(server.stub(), "g", "survivor", 100).deliveries_size(), 0);

  server.clock().Advance(kGroupVisibility);
  v1::PollResponse redelivered = Poll(server.stub(), "g", "survivor", 100);
  ASSERT_EQ(redelivered.deliveries_size(), 10);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(redelivered.deliveries(i).event().sequence(), dead.deliveries(i).event().sequence());
    EXPECT_EQ(redelivered.deliveries(i).delivery_count(), 2u);
  }
  // The dead consumer's late ack is refused: the event was handled again.
  v1::AckResponse late = Ack(server.stub(), "g", "dies-mid-batch", dead);
  ASSERT_EQ(late.results_size(), 10);
  EXPECT_EQ(late.results(0).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_THAT(late.results(0).message(), HasSubstr("handled more than once"));
}

TEST(ConsumerGroupsTest, AConsumerThatReconnectsBetweenCallsKeepsItsLeases) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  Watcher watcher(server.stub(), AllEvents());
  PutExpiring(server.stub(), 3);
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(3));

  v1::PollResponse polled;
  {
    std::unique_ptr<v1::LapseService::Stub> first = v1::LapseService::NewStub(server.NewChannel());
    polled = Poll(*first, "g", "worker-7", 10);
    ASSERT_EQ(polled.deliveries_size(), 3);
  }
  std::unique_ptr<v1::LapseService::Stub> second = v1::LapseService::NewStub(server.NewChannel());
  const v1::AckResponse acked = Ack(*second, "g", "worker-7", polled);
  ASSERT_EQ(acked.results_size(), 3);
  for (const v1::LeaseResult& r : acked.results()) EXPECT_EQ(r.code(), 0) << r.message();
  server.clock().Advance(kGroupVisibility);
  EXPECT_EQ(Poll(*second, "g", "worker-7", 10).deliveries_size(), 0);
}

TEST(ConsumerGroupsTest, BadRequestsAreInvalidArgumentNamingTheField) {
  TestServer server;
  v1::CreateConsumerGroupRequest create;
  create.set_name("g");
  create.mutable_visibility_timeout()->set_seconds(-1);
  v1::CreateConsumerGroupResponse created;
  grpc::Status status =
      Call(server.stub(), &v1::LapseService::Stub::CreateConsumerGroup, create, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("visibility_timeout"));
  create.clear_visibility_timeout();
  create.set_after_sequence(5);
  status = Call(server.stub(), &v1::LapseService::Stub::CreateConsumerGroup, create, &created);
  EXPECT_THAT(status.error_message(), HasSubstr("after_sequence"));

  v1::PollRequest poll;
  poll.set_group("missing");
  poll.set_consumer("c");
  v1::PollResponse polled;
  status = Call(server.stub(), &v1::LapseService::Stub::Poll, poll, &polled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  poll.set_consumer("");
  status = Call(server.stub(), &v1::LapseService::Stub::Poll, poll, &polled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("consumer"));
}

// Every call naming a group, by the field that names it, with `group` there
// (a consumer "c", one lease and a valid extension where the call needs
// them): its status.
std::vector<std::pair<std::string, grpc::Status>> CallsNamingGroup(v1::LapseService::Stub& stub,
                                                                   const std::string& group) {
  std::vector<std::pair<std::string, grpc::Status>> out;
  {
    v1::GetConsumerGroupRequest request;
    request.set_name(group);
    v1::GetConsumerGroupResponse response;
    out.emplace_back("GetConsumerGroup.name",
                     Call(stub, &v1::LapseService::Stub::GetConsumerGroup, request, &response));
  }
  {
    v1::ResetConsumerGroupRequest request;
    request.set_name(group);
    v1::ResetConsumerGroupResponse response;
    out.emplace_back("ResetConsumerGroup.name",
                     Call(stub, &v1::LapseService::Stub::ResetConsumerGroup, request, &response));
  }
  {
    v1::PollRequest request;
    request.set_group(group);
    request.set_consumer("c");
    request.set_max_events(1);
    v1::PollResponse response;
    out.emplace_back("Poll.group", Call(stub, &v1::LapseService::Stub::Poll, request, &response));
  }
  {
    v1::AckRequest request;
    request.set_group(group);
    request.set_consumer("c");
    request.add_leases()->set_sequence(1);
    v1::AckResponse response;
    out.emplace_back("Ack.group", Call(stub, &v1::LapseService::Stub::Ack, request, &response));
  }
  {
    v1::NackRequest request;
    request.set_group(group);
    request.set_consumer("c");
    request.add_leases()->set_sequence(1);
    v1::NackResponse response;
    out.emplace_back("Nack.group", Call(stub, &v1::LapseService::Stub::Nack, request, &response));
  }
  {
    v1::ExtendLeasesRequest request;
    request.set_group(group);
    request.set_consumer("c");
    request.add_leases()->set_sequence(1);
    request.mutable_extension()->set_seconds(10);
    v1::ExtendLeasesResponse response;
    out.emplace_back("ExtendLeases.group",
                     Call(stub, &v1::LapseService::Stub::ExtendLeases, request, &response));
  }
  {
    v1::ListDeadLettersRequest request;
    request.set_group(group);
    v1::ListDeadLettersResponse response;
    out.emplace_back("ListDeadLetters.group",
                     Call(stub, &v1::LapseService::Stub::ListDeadLetters, request, &response));
  }
  {
    v1::RedriveDeadLettersRequest request;
    request.set_group(group);
    v1::RedriveDeadLettersResponse response;
    out.emplace_back("RedriveDeadLetters.group",
                     Call(stub, &v1::LapseService::Stub::RedriveDeadLetters, request, &response));
  }
  {
    v1::DeleteConsumerGroupRequest request;
    request.set_name(group);
    v1::DeleteConsumerGroupResponse response;
    out.emplace_back("DeleteConsumerGroup.name",
                     Call(stub, &v1::LapseService::Stub::DeleteConsumerGroup, request, &response));
  }
  return out;
}

// No group can have a malformed name: the caller's mistake is the field, on
// every store; a well-formed name no group has is NOT_FOUND.
TEST(ConsumerGroupsTest, AMalformedGroupNameIsInvalidArgumentNamingTheFieldInEveryCall) {
  TestServer server;
  for (const std::string& bad : {std::string(), std::string("two words"), std::string(257, 'g')}) {
    for (const auto& [call, status] : CallsNamingGroup(server.stub(), bad)) {
      const std::string field = call.substr(call.find('.') + 1);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << call << " \"" << bad << "\": " << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(field)) << call;
    }
  }
  for (const auto& [call, status] : CallsNamingGroup(server.stub(), "missing")) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
        << call << ": " << status.error_message();
  }
}

}  // namespace
}  // namespace lapse::testing

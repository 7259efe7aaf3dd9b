// Every unary RPC through lapse::client::Client against a real in-process
// server (FakeClock, 127.0.0.1:0), and the per-call deadline.
#include "lapse/client.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "testing/auth_grants.h"
#include "testing/fake_lapse_service.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse::client {
namespace {

using ::lapse::testing::StartTime;
using ::lapse::testing::TestServer;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::Optional;

MemberWrite Write(const std::string& key, const std::string& value,
                  Expiration expiration = Expiration::None()) {
  MemberWrite write;
  write.key = key;
  write.value = value;
  write.expiration = expiration;
  return write;
}

std::vector<std::string> Keys(const std::vector<Member>& members) {
  std::vector<std::string> keys;
  for (const Member& member : members) keys.push_back(member.key);
  return keys;
}

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : client_(absl::StrCat("127.0.0.1:", server_.port())) {}

  // Puts `keys` with a TTL; expects success.
  void PutTtl(const std::string& collection, const std::vector<std::string>& keys,
              absl::Duration ttl) {
    std::vector<MemberWrite> writes;
    for (const std::string& key : keys) {
      writes.push_back(Write(key, "v:" + key, Expiration::Ttl(ttl)));
    }
    ASSERT_TRUE(client_.PutMembers(collection, writes).ok());
  }

  // Moves the clock by `d` and expires what came due in `collection` at once
  // (a read expires a collection's due members before it answers), so the
  // events are in the feed when this returns.
  void ExpireDue(const std::string& collection, absl::Duration d) {
    server_.ExpireAfter(d);
    client_.GetCollection(collection).IgnoreError();
  }

  TestServer server_;
  Client client_;
};

TEST_F(ClientTest, PutReportsEachOutcomeAndTheResultingDeadline) {
  absl::StatusOr<std::vector<PutResult>> created = client_.PutMembers(
      "orders", {Write("a", "1", Expiration::Ttl(absl::Seconds(30))),
                 Write("b", "2", Expiration::At(StartTime() + absl::Hours(1))), Write("c", "3")});
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_EQ(created->size(), 3u);
  EXPECT_EQ((*created)[0].key, "a");
  EXPECT_EQ((*created)[0].outcome, PutOutcome::kCreated);
  EXPECT_THAT((*created)[0].expire_time, Optional(Eq(StartTime() + absl::Seconds(30))));
  EXPECT_THAT((*created)[1].expire_time, Optional(Eq(StartTime() + absl::Hours(1))));
  EXPECT_EQ((*created)[2].expire_time, std::nullopt);

  MemberWrite absent = Write("a", "new");
  absent.condition = PutCondition::kIfAbsent;
  MemberWrite present = Write("b", "new");
  present.condition = PutCondition::kIfPresent;
  present.keep_expiration = true;
  absl::StatusOr<std::vector<PutResult>> second = client_.PutMembers("orders", {absent, present});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)[0].outcome, PutOutcome::kSkipped);
  EXPECT_EQ((*second)[1].outcome, PutOutcome::kReplaced);
  EXPECT_THAT((*second)[1].expire_time, Optional(Eq(StartTime() + absl::Hours(1))));
}

TEST_F(ClientTest, PutBeyondMaxMembersIsAFailedPrecondition) {
  PutOptions options;
  options.max_members = 1;
  absl::StatusOr<std::vector<PutResult>> put =
      client_.PutMembers("user-42", {Write("a", ""), Write("b", "")}, options);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_.GetCollection("user-42").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, ADefaultExpirationAppliesToMembersThatSetNone) {
  PutOptions options;
  options.default_expiration = Expiration::Ttl(absl::Seconds(30));
  MemberWrite own = Write("b", "2", Expiration::At(StartTime() + absl::Hours(1)));
  absl::StatusOr<std::vector<PutResult>> put =
      client_.PutMembers("orders", {Write("a", "1"), own}, options);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->size(), 2u);
  EXPECT_THAT((*put)[0].expire_time, Optional(Eq(StartTime() + absl::Seconds(30))));
  EXPECT_THAT((*put)[1].expire_time, Optional(Eq(StartTime() + absl::Hours(1))));

  options.default_expiration = Expiration::At(StartTime() + absl::Minutes(5));
  put = client_.PutMembers("orders", {Write("c", "3")}, options);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_THAT((*put)[0].expire_time, Optional(Eq(StartTime() + absl::Minutes(5))));
}

TEST_F(ClientTest, OmittingCreatedResultsListsOnlyMembersNotCreated) {
  PutTtl("orders", {"a"}, absl::Seconds(30));
  PutOptions options;
  options.omit_created_results = true;
  MemberWrite skipped = Write("a", "new");
  skipped.condition = PutCondition::kIfAbsent;
  absl::StatusOr<std::vector<PutResult>> put =
      client_.PutMembers("orders", {Write("b", "1"), skipped, Write("c", "2")}, options);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->size(), 1u);
  EXPECT_EQ((*put)[0].key, "a");
  EXPECT_EQ((*put)[0].outcome, PutOutcome::kSkipped);
  absl::StatusOr<CollectionInfo> info = client_.GetCollection("orders");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->member_count, 3u);
}

TEST_F(ClientTest, AnInvalidDefaultTtlIsInvalidArgumentNamingTheField) {
  PutOptions options;
  options.default_expiration = Expiration::Ttl(-absl::Seconds(1));
  absl::StatusOr<std::vector<PutResult>> put = client_.PutMembers("c", {Write("a", "")}, options);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(put.status().message()), ::testing::HasSubstr("default_ttl"));
}

TEST_F(ClientTest, InvalidInputComesBackAsInvalidArgumentNamingTheField) {
  absl::StatusOr<std::vector<PutResult>> put =
      client_.PutMembers("c", {Write("a", "", Expiration::Ttl(-absl::Seconds(1)))});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(put.status().message()), ::testing::HasSubstr("members[0].ttl"));
}

TEST_F(ClientTest, GetReturnsOneResultPerKeyAndCanSlideDeadlines) {
  PutTtl("sessions", {"s1"}, absl::Seconds(10));
  absl::StatusOr<std::vector<GetResult>> got = client_.GetMembers("sessions", {"s1", "missing"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].member.key, "s1");
  EXPECT_EQ((*got)[0].member.value, "v:s1");
  EXPECT_THAT((*got)[0].member.expire_time, Optional(Eq(StartTime() + absl::Seconds(10))));
  EXPECT_FALSE((*got)[1].found);
  EXPECT_EQ((*got)[1].member.key, "missing");

  GetOptions refresh;
  refresh.refresh = Expiration::Ttl(absl::Minutes(5));
  absl::StatusOr<std::vector<GetResult>> slid = client_.GetMembers("sessions", {"s1"}, refresh);
  ASSERT_TRUE(slid.ok()) << slid.status();
  EXPECT_THAT((*slid)[0].member.expire_time, Optional(Eq(StartTime() + absl::Minutes(5))));
}

TEST_F(ClientTest, RemoveReportsWhichMembersExisted) {
  PutTtl("c", {"a"}, absl::Seconds(10));
  absl::StatusOr<std::vector<RemoveResult>> removed = client_.RemoveMembers("c", {"a", "b"});
  ASSERT_TRUE(removed.ok()) << removed.status();
  ASSERT_EQ(removed->size(), 2u);
  EXPECT_EQ((*removed)[0].key, "a");
  EXPECT_TRUE((*removed)[0].existed);
  EXPECT_EQ((*removed)[1].key, "b");
  EXPECT_FALSE((*removed)[1].existed);
}

TEST_F(ClientTest, ExpireAppliesConditionsAndExpiresPastDeadlinesNow) {
  PutTtl("c", {"timed"}, absl::Seconds(10));
  ASSERT_TRUE(client_.PutMembers("c", {Write("forever", "")}).ok());

  absl::StatusOr<std::vector<ExpireResult>> later =
      client_.ExpireMembers("c", {"timed", "forever", "missing"},
                            Expiration::Ttl(absl::Seconds(60)), ExpireCondition::kIfHasExpiration);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ((*later)[0].outcome, ExpireOutcome::kUpdated);
  EXPECT_THAT((*later)[0].expire_time, Optional(Eq(StartTime() + absl::Seconds(60))));
  EXPECT_EQ((*later)[1].outcome, ExpireOutcome::kConditionNotMet);
  EXPECT_EQ((*later)[2].outcome, ExpireOutcome::kNotFound);

  absl::StatusOr<std::vector<ExpireResult>> now =
      client_.ExpireMembers("c", {"timed"}, Expiration::At(StartTime() - absl::Seconds(1)));
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ((*now)[0].outcome, ExpireOutcome::kExpired);
  EXPECT_EQ((*now)[0].expire_time, std::nullopt);

  EXPECT_EQ(client_.ExpireMembers("c", {"forever"}, Expiration::None()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, PersistReportsEveryOutcome) {
  PutTtl("c", {"timed"}, absl::Seconds(10));
  ASSERT_TRUE(client_.PutMembers("c", {Write("forever", "")}).ok());
  absl::StatusOr<std::vector<PersistResult>> persisted =
      client_.PersistMembers("c", {"timed", "forever", "missing"});
  ASSERT_TRUE(persisted.ok()) << persisted.status();
  EXPECT_EQ((*persisted)[0].outcome, PersistOutcome::kPersisted);
  EXPECT_EQ((*persisted)[1].outcome, PersistOutcome::kNoExpiration);
  EXPECT_EQ((*persisted)[2].outcome, PersistOutcome::kNotFound);
  EXPECT_EQ((*persisted)[2].key, "missing");
}

TEST_F(ClientTest, ListMembersPagesByKeyOrByExpireTime) {
  PutTtl("c", {"b"}, absl::Seconds(30));
  PutTtl("c", {"a"}, absl::Seconds(20));
  ASSERT_TRUE(client_.PutMembers("c", {Write("0", "")}).ok());

  ListMembersOptions by_key;
  by_key.page_size = 2;
  absl::StatusOr<MemberPage> first = client_.ListMembers("c", by_key);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(Keys(first->members), ElementsAre("0", "a"));
  ASSERT_FALSE(first->next_page_token.empty());
  by_key.page_token = first->next_page_token;
  absl::StatusOr<MemberPage> second = client_.ListMembers("c", by_key);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Keys(second->members), ElementsAre("b"));
  EXPECT_TRUE(second->next_page_token.empty());

  ListMembersOptions by_deadline;
  by_deadline.order_by = MemberOrder::kExpireTime;
  by_deadline.keys_only = true;
  absl::StatusOr<MemberPage> all = client_.ListMembers("c", by_deadline);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Keys(all->members), ElementsAre("a", "b", "0"));
  EXPECT_EQ(all->members[0].value, "");
  EXPECT_THAT(all->members[0].expire_time, Optional(Eq(StartTime() + absl::Seconds(20))));
}

TEST_F(ClientTest, GetCollectionCountsMembersOrIsNotFound) {
  PutTtl("c", {"a", "b"}, absl::Seconds(20));
  ASSERT_TRUE(client_.PutMembers("c", {Write("p", "")}).ok());
  absl::StatusOr<CollectionInfo> info = client_.GetCollection("c");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "c");
  EXPECT_EQ(info->member_count, 3u);
  EXPECT_EQ(info->expiring_count, 2u);
  EXPECT_THAT(info->next_expire_time, Optional(Eq(StartTime() + absl::Seconds(20))));
  EXPECT_EQ(client_.GetCollection("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, ListCollectionsPagesByPrefix) {
  for (const char* name : {"user:1", "user:2", "user:3", "zone"}) {
    ASSERT_TRUE(client_.PutMembers(name, {Write("k", "")}).ok());
  }
  ListCollectionsOptions options;
  options.prefix = "user:";
  options.page_size = 2;
  absl::StatusOr<CollectionPage> first = client_.ListCollections(options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->collections.size(), 2u);
  EXPECT_EQ(first->collections[0].name, "user:1");
  EXPECT_EQ(first->collections[0].member_count, 1u);
  EXPECT_EQ(first->collections[0].next_expire_time, std::nullopt);
  options.page_token = first->next_page_token;
  absl::StatusOr<CollectionPage> second = client_.ListCollections(options);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->collections.size(), 1u);
  EXPECT_EQ(second->collections[0].name, "user:3");
  EXPECT_TRUE(second->next_page_token.empty());
}

TEST_F(ClientTest, DeleteCollectionReturnsHowManyMembersItHad) {
  PutTtl("c", {"a", "b"}, absl::Seconds(20));
  absl::StatusOr<uint64_t> removed = client_.DeleteCollection("c");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  absl::StatusOr<uint64_t> again = client_.DeleteCollection("c");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0u);
}

// A group over collection "orders" from new events, with a 30 s visibility
// timeout and at most 2 deliveries.
ConsumerGroupOptions OrdersGroup(const std::string& name) {
  ConsumerGroupOptions options;
  options.name = name;
  options.collections = {"orders"};
  options.include_values = true;
  options.visibility_timeout = absl::Seconds(30);
  options.max_deliveries = 2;
  return options;
}

TEST_F(ClientTest, ConsumerGroupsAreCreatedListedShownResetAndDeleted) {
  absl::StatusOr<ConsumerGroupInfo> created = client_.CreateConsumerGroup(OrdersGroup("g1"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->name, "g1");
  EXPECT_THAT(created->collections, ElementsAre("orders"));
  EXPECT_TRUE(created->include_values);
  EXPECT_EQ(created->visibility_timeout, absl::Seconds(30));
  EXPECT_EQ(created->max_deliveries, 2u);
  EXPECT_EQ(client_.CreateConsumerGroup(OrdersGroup("g1")).status().code(),
            absl::StatusCode::kAlreadyExists);
  ConsumerGroupOptions everything;
  everything.name = "g2";
  ASSERT_TRUE(client_.CreateConsumerGroup(everything).ok());

  absl::StatusOr<ConsumerGroupPage> page = client_.ListConsumerGroups();
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->groups.size(), 2u);
  EXPECT_EQ(page->groups[0].name, "g1");
  EXPECT_EQ(page->groups[1].name, "g2");
  EXPECT_TRUE(page->next_page_token.empty());

  PutTtl("orders", {"a"}, absl::Seconds(1));
  ExpireDue("orders", absl::Seconds(2));
  ASSERT_TRUE(client_.Poll("g1", "c1").ok());
  absl::StatusOr<ConsumerGroupInfo> shown = client_.GetConsumerGroup("g1", 10);
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_EQ(shown->pending, 1u);
  ASSERT_EQ(shown->consumers.size(), 1u);
  EXPECT_EQ(shown->consumers[0].name, "c1");
  EXPECT_EQ(shown->consumers[0].unacked, 1u);
  ASSERT_EQ(shown->leases.size(), 1u);
  EXPECT_EQ(shown->leases[0].consumer, "c1");
  EXPECT_EQ(shown->leases[0].delivery_count, 1u);
  EXPECT_EQ(shown->leases[0].deadline, StartTime() + absl::Seconds(32));

  absl::StatusOr<ConsumerGroupInfo> reset = client_.ResetConsumerGroup("g1", StartPosition::kNew);
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(reset->pending, 0u);
  absl::StatusOr<ConsumerGroupInfo> deleted = client_.DeleteConsumerGroup("g1");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->name, "g1");
  EXPECT_EQ(client_.GetConsumerGroup("g1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_.DeleteConsumerGroup("g1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, PolledEventsAreAckedOnceAndALostLeaseIsRefused) {
  ASSERT_TRUE(client_.CreateConsumerGroup(OrdersGroup("g")).ok());
  PutTtl("orders", {"a", "b"}, absl::Seconds(1));
  ExpireDue("orders", absl::Seconds(2));

  PollOptions two;
  two.max_events = 2;
  absl::StatusOr<PollResult> polled = client_.Poll("g", "c1", two);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->deliveries.size(), 2u);
  const Delivery& a = polled->deliveries[0];
  const Delivery& b = polled->deliveries[1];
  EXPECT_EQ(a.event.key, "a");
  EXPECT_EQ(a.event.value, "v:a");
  EXPECT_EQ(a.delivery_count, 1u);
  EXPECT_EQ(a.lease_deadline, StartTime() + absl::Seconds(32));

  absl::StatusOr<std::vector<LeaseResult>> acked =
      client_.Ack("g", "c1", {{a.event.sequence, a.delivery_count}});
  ASSERT_TRUE(acked.ok()) << acked.status();
  ASSERT_EQ(acked->size(), 1u);
  EXPECT_TRUE((*acked)[0].status.ok()) << (*acked)[0].status;
  absl::StatusOr<std::vector<LeaseResult>> again =
      client_.Ack("g", "c1", {{a.event.sequence, a.delivery_count}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].sequence, a.event.sequence);
  EXPECT_EQ((*again)[0].status.code(), absl::StatusCode::kFailedPrecondition);

  // b's lease expires: it goes to c2 with its second delivery, and c1's ack
  // of the lost lease is refused.
  server_.ExpireAfter(absl::Seconds(31));
  absl::StatusOr<PollResult> redelivered = client_.Poll("g", "c2");
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  ASSERT_EQ(redelivered->deliveries.size(), 1u);
  EXPECT_EQ(redelivered->deliveries[0].event.sequence, b.event.sequence);
  EXPECT_EQ(redelivered->deliveries[0].delivery_count, 2u);
  absl::StatusOr<std::vector<LeaseResult>> lost =
      client_.Ack("g", "c1", {{b.event.sequence, b.delivery_count}});
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ((*lost)[0].status.code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<std::vector<LeaseResult>> extended =
      client_.ExtendLeases("g", "c2", {{b.event.sequence, 2}}, absl::Minutes(5));
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_TRUE((*extended)[0].status.ok()) << (*extended)[0].status;
  absl::StatusOr<ConsumerGroupInfo> group = client_.GetConsumerGroup("g", 1);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->leases.size(), 1u);
  EXPECT_EQ(group->leases[0].deadline, StartTime() + absl::Seconds(33) + absl::Minutes(5));
}

TEST_F(ClientTest, NackedEventsUseUpTheirDeliveriesIntoDeadLettersAndAreRedriven) {
  ASSERT_TRUE(client_.CreateConsumerGroup(OrdersGroup("g")).ok());
  PutTtl("orders", {"a"}, absl::Seconds(1));
  ExpireDue("orders", absl::Seconds(2));
  for (uint32_t delivery = 1; delivery <= 2; ++delivery) {
    absl::StatusOr<PollResult> polled = client_.Poll("g", "c1");
    ASSERT_TRUE(polled.ok()) << polled.status();
    ASSERT_EQ(polled->deliveries.size(), 1u) << "delivery " << delivery;
    EXPECT_EQ(polled->deliveries[0].delivery_count, delivery);
    absl::StatusOr<std::vector<LeaseResult>> nacked =
        client_.Nack("g", "c1", {{polled->deliveries[0].event.sequence, delivery}});
    ASSERT_TRUE(nacked.ok()) << nacked.status();
    EXPECT_TRUE((*nacked)[0].status.ok()) << (*nacked)[0].status;
  }
  absl::StatusOr<PollResult> none = client_.Poll("g", "c1");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->deliveries.empty());

  absl::StatusOr<DeadLetterPage> letters = client_.ListDeadLetters("g");
  ASSERT_TRUE(letters.ok()) << letters.status();
  ASSERT_EQ(letters->dead_letters.size(), 1u);
  EXPECT_EQ(letters->dead_letters[0].event.key, "a");
  EXPECT_EQ(letters->dead_letters[0].delivery_count, 2u);
  EXPECT_EQ(letters->dead_letters[0].consumer, "c1");

  absl::StatusOr<uint64_t> redriven = client_.RedriveDeadLetters("g");
  ASSERT_TRUE(redriven.ok()) << redriven.status();
  EXPECT_EQ(*redriven, 1u);
  absl::StatusOr<PollResult> back = client_.Poll("g", "c2");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->deliveries.size(), 1u);
  EXPECT_EQ(back->deliveries[0].event.key, "a");
}

TEST(ClientAuthTest, SendsItsBearerTokenWithEveryCallAndWatch) {
  lapse::testing::TempDir dir;
  const std::string auth = dir.path() + "/auth";
  lapse::testing::WriteAuthFile(auth,
                                lapse::testing::TokenGrant("t0k", "read,write,watch orders:"));
  ServerOptions server_options = lapse::testing::TestOptions();
  server_options.auth_file = auth;
  TestServer server(server_options);
  const std::string address = absl::StrCat("127.0.0.1:", server.port());

  Client anonymous(address);
  EXPECT_EQ(anonymous.GetCollection("orders:1").status().code(),
            absl::StatusCode::kUnauthenticated);

  ClientOptions options;
  options.bearer_token = "t0k";
  Client client(address, options);
  absl::StatusOr<std::unique_ptr<EventStream>> stream = client.WatchStream([] {
    WatchOptions watch;
    watch.collection_prefix = "orders:";
    // From the oldest event: the stream may open after the expiry below.
    watch.start = StartPosition::kOldest;
    return watch;
  }());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(
      client.PutMembers("orders:1", {Write("k", "v", Expiration::Ttl(absl::Seconds(1)))}).ok());
  server.ExpireAfter(absl::Seconds(2));
  absl::StatusOr<ExpiryEvent> event = (*stream)->Next(lapse::testing::kPatience);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key, "k");
}

TEST(ClientAuthTest, ReadsATokenFileAgainWhenItChanges) {
  lapse::testing::TempDir dir;
  const std::string auth = dir.path() + "/auth";
  lapse::testing::WriteAuthFile(auth, absl::StrCat(lapse::testing::TokenGrant("old", "read *"),
                                                   lapse::testing::TokenGrant("new", "read *")));
  ServerOptions server_options = lapse::testing::TestOptions();
  server_options.auth_file = auth;
  server_options.auth_poll_interval = absl::ZeroDuration();
  TestServer server(server_options);
  const std::string token = dir.path() + "/token";
  lapse::testing::WriteAuthFile(token, "old\n");
  ClientOptions options;
  options.bearer_token_file = token;
  Client client(absl::StrCat("127.0.0.1:", server.port()), options);
  EXPECT_EQ(client.GetCollection("c").status().code(), absl::StatusCode::kNotFound);

  // The server stops taking the old token; the rotated file has the new one.
  lapse::testing::WriteAuthFile(auth, lapse::testing::TokenGrant("new", "read *"));
  ASSERT_TRUE(server.server().auth_file()->ReloadIfChanged().ok());
  lapse::testing::WriteAuthFile(token, "new\n");
  EXPECT_EQ(client.GetCollection("c").status().code(), absl::StatusCode::kNotFound);

  ASSERT_EQ(std::remove(token.c_str()), 0);
  const absl::Status missing = client.GetCollection("c").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), ::testing::HasSubstr("cannot read the bearer token file"));
}

TEST_F(ClientTest, ConcurrentPutsEachGetTheirOwnResults) {
  constexpr int kThreads = 8;
  constexpr int kPutsEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kPutsEach; ++i) {
        const std::string key = absl::StrCat("t", t, "-", i);
        absl::StatusOr<std::vector<PutResult>> put =
            client_.PutMembers("shared", {Write(key, "v", Expiration::Ttl(absl::Seconds(1 + t)))});
        ASSERT_TRUE(put.ok()) << put.status();
        ASSERT_EQ(put->size(), 1u);
        EXPECT_EQ((*put)[0].key, key);
        EXPECT_EQ((*put)[0].outcome, PutOutcome::kCreated);
        EXPECT_THAT((*put)[0].expire_time, Optional(Eq(StartTime() + absl::Seconds(1 + t))));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  absl::StatusOr<CollectionInfo> info = client_.GetCollection("shared");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->member_count, static_cast<uint64_t>(kThreads * kPutsEach));
}

TEST(ClientWriteStreamTest, APutWhileAnotherIsInFlightTravelsOnTheWriteStream) {
  auto server = std::make_unique<testing::FakeServer>();
  server->service().HoldUnaryCalls();
  Client client(server->address());
  Mutex mu;
  CondVar cv;
  std::vector<absl::StatusCode> codes;
  const auto put = [&](const std::string& key) {
    const absl::StatusCode code = client.PutMembers("c", {Write(key, "v")}).status().code();
    MutexLock lock(&mu);
    codes.push_back(code);
    cv.SignalAll();
  };
  std::thread first(put, "a");
  std::thread second(put, "b");
  {
    // The first to start is a unary call, held by the fake; the other goes
    // on the write stream, which the fake does not serve.
    MutexLock lock(&mu);
    EXPECT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return !codes.empty(); }));
    if (!codes.empty()) {
      EXPECT_EQ(codes[0], absl::StatusCode::kUnimplemented);
    }
  }
  server.reset();  // Ends the held call.
  first.join();
  second.join();
}

TEST_F(ClientTest, AsyncPutsFromOneThreadEachGetTheirOwnResults) {
  constexpr int kPuts = 300;
  Mutex mu;
  CondVar cv;
  std::vector<std::string> keys;
  int answered = 0;
  for (int i = 0; i < kPuts; ++i) {
    const std::string key = absl::StrCat("k", i);
    client_.PutMembersAsync("async", {Write(key, "v", Expiration::Ttl(absl::Seconds(1 + i)))},
                            [&, key, i](absl::StatusOr<std::vector<PutResult>> put) {
                              EXPECT_TRUE(put.ok()) << put.status();
                              if (put.ok()) {
                                EXPECT_EQ(put->size(), 1u);
                                EXPECT_EQ(put->at(0).key, key);
                                EXPECT_THAT(put->at(0).expire_time,
                                            Optional(Eq(StartTime() + absl::Seconds(1 + i))));
                              }
                              MutexLock lock(&mu);
                              if (put.ok()) keys.push_back(put->at(0).key);
                              ++answered;
                              cv.SignalAll();
                            });
  }
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return answered == kPuts; }));
    // Answered in the order the calls were made.
    for (int i = 0; i < kPuts; ++i) EXPECT_EQ(keys[i], absl::StrCat("k", i));
  }
  absl::StatusOr<CollectionInfo> info = client_.GetCollection("async");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->member_count, static_cast<uint64_t>(kPuts));
}

TEST_F(ClientTest, AnAsyncPutThatFailsGetsTheErrorInItsCallback) {
  Mutex mu;
  CondVar cv;
  std::optional<absl::Status> status;
  client_.PutMembersAsync("c", {Write("a", "", Expiration::Ttl(-absl::Seconds(1)))},
                          [&](absl::StatusOr<std::vector<PutResult>> put) {
                            MutexLock lock(&mu);
                            status = put.status();
                            cv.SignalAll();
                          });
  MutexLock lock(&mu);
  ASSERT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return status.has_value(); }));
  EXPECT_EQ(status->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status->message()), ::testing::HasSubstr("members[0].ttl"));
}

TEST(ClientWriteStreamTest, AsyncPutsBeyondTheInFlightBoundWaitForRoomUntilTheirDeadline) {
  testing::FakeServer server;
  server.service().HoldStreamWrites();
  ClientOptions options;
  options.max_writes_in_flight = 1;
  auto client = std::make_unique<Client>(server.address(), options);
  Mutex mu;
  std::vector<absl::StatusCode> codes;
  const auto record = [&](absl::StatusOr<std::vector<PutResult>> put) {
    MutexLock lock(&mu);
    codes.push_back(put.status().code());
  };
  // Held by the fake: it takes the only place.
  client->PutMembersAsync("c", {Write("a", "v")}, record);
  CallOptions call;
  call.timeout = absl::Milliseconds(50);
  // Waits for room, which never comes, and fails on this thread.
  client->PutMembersAsync("c", {Write("b", "v")}, record, PutOptions(), call);
  {
    MutexLock lock(&mu);
    EXPECT_THAT(codes, ElementsAre(absl::StatusCode::kDeadlineExceeded));
  }
  // Destroying the client ends the stream and answers the held call.
  client.reset();
  MutexLock lock(&mu);
  EXPECT_THAT(codes,
              ElementsAre(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kCancelled));
}

// A PutMembersAsync callback.
using PutCallback = std::function<void(absl::StatusOr<std::vector<PutResult>>)>;

// Counts the answers of async puts, each expected to succeed.
class OkAnswers {
 public:
  PutCallback Count() {
    return [this](absl::StatusOr<std::vector<PutResult>> put) {
      EXPECT_TRUE(put.ok()) << put.status();
      MutexLock lock(&mu_);
      ++answered_;
      cv_.SignalAll();
    };
  }

  // Whether `n` answers came within the tests' patience.
  bool WaitFor(int n) {
    MutexLock lock(&mu_);
    return testing::WaitWithPatience(
        mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answered_ == n; });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int answered_ ABSL_GUARDED_BY(mu_) = 0;
};

// A client whose write stream the fake holds: each request waits for
// AnswerStreamWrites. count_ is the callback of calls expected to succeed.
class HeldWriteStreamTest : public ::testing::Test {
 protected:
  HeldWriteStreamTest() { server_.service().HoldStreamWrites(); }

  testing::FakeServer server_;
  Client client_{server_.address()};
  OkAnswers answers_;
  const PutCallback count_ = answers_.Count();
};

TEST_F(HeldWriteStreamTest, CallsMadeWhileARequestIsUnansweredGoTogetherInTheNext) {
  client_.PutMembersAsync("c", {Write("a", "v")}, count_);
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(1));
  // The first request is unanswered: these two wait for its answer.
  client_.PutMembersAsync("c", {Write("b", "v")}, count_);
  client_.PutMembersAsync("c", {Write("c", "v")}, count_);
  server_.service().AnswerStreamWrites();
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(2));
  server_.service().AnswerStreamWrites();
  EXPECT_TRUE(answers_.WaitFor(3));
  EXPECT_THAT(server_.service().stream_write_sizes(), ElementsAre(1, 2));
}

TEST_F(HeldWriteStreamTest, CallsMadeByAnAnswersCallbacksGoInTheNextRequestWithThoseQueued) {
  // The first call's callback makes two more.
  client_.PutMembersAsync("c", {Write("a", "v")}, [&](absl::StatusOr<std::vector<PutResult>> put) {
    client_.PutMembersAsync("c", {Write("c", "v")}, count_);
    client_.PutMembersAsync("c", {Write("d", "v")}, count_);
    count_(std::move(put));
  });
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(1));
  client_.PutMembersAsync("c", {Write("b", "v")}, count_);
  server_.service().AnswerStreamWrites();
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(2));
  server_.service().AnswerStreamWrites();
  EXPECT_TRUE(answers_.WaitFor(4));
  EXPECT_THAT(server_.service().stream_write_sizes(), ElementsAre(1, 3));
}

TEST_F(HeldWriteStreamTest, QueuedCallsWhoseDeadlinePassedAreLeftOutOfTheRequestTheRestInOrder) {
  Mutex mu;
  std::vector<absl::StatusCode> late;
  const auto record = [&](absl::StatusOr<std::vector<PutResult>> put) {
    MutexLock lock(&mu);
    late.push_back(put.status().code());
  };
  CallOptions now;
  now.timeout = absl::ZeroDuration();
  client_.PutMembersAsync("c", {Write("a", "v")}, count_);
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(1));
  // Queued behind the unanswered request; c and e are past their deadline
  // by the time it is answered.
  client_.PutMembersAsync("c", {Write("b", "v")}, count_);
  client_.PutMembersAsync("c", {Write("c", "v")}, record, PutOptions(), now);
  client_.PutMembersAsync("c", {Write("d", "v")}, count_);
  client_.PutMembersAsync("c", {Write("e", "v")}, record, PutOptions(), now);
  client_.PutMembersAsync("c", {Write("f", "v")}, count_);
  server_.service().AnswerStreamWrites();
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(2));
  server_.service().AnswerStreamWrites();
  EXPECT_TRUE(answers_.WaitFor(4));
  using Keys = std::vector<std::string>;
  EXPECT_THAT(server_.service().stream_write_keys(), ElementsAre(Keys{"a"}, Keys{"b", "d", "f"}));
  MutexLock lock(&mu);
  EXPECT_THAT(
      late, ElementsAre(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kDeadlineExceeded));
}

TEST_F(HeldWriteStreamTest, QueuedCallsPastOneMebibyteGoInTheRequestAfter) {
  const std::string value(600 << 10, 'v');
  client_.PutMembersAsync("c", {Write("a", "v")}, count_);
  ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(1));
  // b and c pass 1 MiB together: d starts the request after theirs.
  client_.PutMembersAsync("c", {Write("b", value)}, count_);
  client_.PutMembersAsync("c", {Write("c", value)}, count_);
  client_.PutMembersAsync("c", {Write("d", value)}, count_);
  client_.PutMembersAsync("c", {Write("e", "v")}, count_);
  for (size_t requests = 2; requests <= 3; ++requests) {
    server_.service().AnswerStreamWrites();
    ASSERT_TRUE(server_.service().WaitForStreamWriteRequests(requests));
  }
  server_.service().AnswerStreamWrites();
  EXPECT_TRUE(answers_.WaitFor(5));
  using Keys = std::vector<std::string>;
  EXPECT_THAT(server_.service().stream_write_keys(),
              ElementsAre(Keys{"a"}, Keys{"b", "c"}, Keys{"d", "e"}));
}

TEST_F(ClientTest, AnAsyncPutsCallbacksAllRunOnTheWriteStreamsOneThread) {
  // Each callback makes the next call, 8 in flight, 200 calls in all.
  constexpr int kInFlight = 8;
  constexpr int kCalls = 200;
  Mutex mu;
  CondVar cv;
  std::set<std::thread::id> threads;
  int made = 0;
  int answered = 0;
  std::function<void()> put_next = [&] {
    {
      MutexLock lock(&mu);
      if (made == kCalls) return;
      ++made;
    }
    client_.PutMembersAsync("one-thread", {Write("k", "v")},
                            [&](absl::StatusOr<std::vector<PutResult>> put) {
                              EXPECT_TRUE(put.ok()) << put.status();
                              put_next();
                              MutexLock lock(&mu);
                              threads.insert(std::this_thread::get_id());
                              ++answered;
                              cv.SignalAll();
                            });
  };
  for (int i = 0; i < kInFlight; ++i) put_next();
  MutexLock lock(&mu);
  ASSERT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return answered == kCalls; }));
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(ClientWriteStreamTest, APutMadeInsideAnAsyncPutsCallbackIsAUnaryCall) {
  auto server = std::make_unique<testing::FakeServer>();
  server->service().HoldUnaryCalls();
  server->service().HoldStreamWrites();
  Client client(server->address());
  // Held by the fake: a PutMembers in flight, beside which another would
  // take the write stream.
  std::thread held([&] { client.PutMembers("c", {Write("a", "v")}).IgnoreError(); });
  ASSERT_TRUE(server->service().WaitForCalls("PutMembers", 1));
  Mutex mu;
  CondVar cv;
  std::optional<absl::StatusCode> inner;
  client.PutMembersAsync("c", {Write("b", "v")}, [&](absl::StatusOr<std::vector<PutResult>>) {
    // On the write stream's thread: were this call sent on the stream, its
    // answer would wait for this callback to return.
    CallOptions call;
    call.timeout = absl::Milliseconds(300);
    const absl::StatusCode code =
        client.PutMembers("c", {Write("c", "v")}, {}, call).status().code();
    MutexLock lock(&mu);
    inner = code;
    cv.SignalAll();
  });
  ASSERT_TRUE(server->service().WaitForStreamWriteRequests(1));
  server->service().AnswerStreamWrites();
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return inner.has_value(); }));
    // Held by the fake as a unary call, it ran out of time.
    EXPECT_EQ(*inner, absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(server->service().calls("PutMembers"), 2);
  EXPECT_THAT(server->service().stream_write_sizes(), ElementsAre(1));
  server.reset();  // Ends the held call.
  held.join();
}

// A StreamWrites server that answers each request with bytes that are no
// StreamWritesResponse: a result whose 5 bytes are missing.
class UnreadableStreamWrites final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status::OK);
          return;
        }
        const grpc::Slice slice("\x0a\x05", 2);
        response_ = grpc::ByteBuffer(&slice, 1);
        StartWrite(&response_);
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status::OK);
          return;
        }
        StartRead(&request_);
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_;
      grpc::ByteBuffer response_;
    };
    return new Reactor;
  }
};

TEST(ClientWriteStreamTest, AnAnswerThatIsNoStreamWritesResponseFailsItsWritesInternal) {
  UnreadableStreamWrites service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  Mutex mu;
  CondVar cv;
  std::optional<absl::Status> answer;
  {
    Client client(absl::StrCat("127.0.0.1:", port));
    // Each answer fails the write it answers; the stream stays open for the next.
    for (const char* key : {"a", "b"}) {
      {
        MutexLock lock(&mu);
        answer.reset();
      }
      client.PutMembersAsync("c", {Write(key, "v")},
                             [&](absl::StatusOr<std::vector<PutResult>> put) {
                               MutexLock lock(&mu);
                               answer = put.status();
                               cv.SignalAll();
                             });
      MutexLock lock(&mu);
      ASSERT_TRUE(testing::WaitWithPatience(mu, cv, [&] { return answer.has_value(); }));
      EXPECT_EQ(answer->code(), absl::StatusCode::kInternal) << *answer;
      EXPECT_THAT(std::string(answer->message()), ::testing::HasSubstr("could not be read"));
    }
  }  // The client ends its stream, which the server's shutdown would wait for.
  server->Shutdown();
}

TEST(ClientDeadlineTest, ACallEndsAtItsDeadline) {
  testing::FakeServer server;
  server.service().HoldUnaryCalls();
  ClientOptions options;
  options.default_timeout = absl::Milliseconds(100);
  Client client(server.address(), options);
  EXPECT_EQ(client.GetCollection("c").status().code(), absl::StatusCode::kDeadlineExceeded);

  CallOptions call;
  call.timeout = absl::Milliseconds(50);
  EXPECT_EQ(client.ListCollections({}, call).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ClientDeadlineTest, AnUnreachableServerIsUnavailable) {
  ClientOptions options;
  options.max_attempts = 1;
  testing::RefusedPort nobody;
  Client client(absl::StrCat("127.0.0.1:", nobody.port()), options);
  EXPECT_EQ(client.GetCollection("c").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace lapse::client

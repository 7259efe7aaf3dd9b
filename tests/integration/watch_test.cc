// WatchExpirations end to end: delivery, filters, resume, retention,
// heartbeats, slow and concurrent clients.
#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/event_source.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Keys(const std::vector<v1::ExpiryEvent>& events) {
  std::vector<std::string> keys;
  for (const v1::ExpiryEvent& event : events) keys.push_back(event.key());
  return keys;
}

std::vector<std::string> Collections(const std::vector<v1::ExpiryEvent>& events) {
  std::vector<std::string> names;
  for (const v1::ExpiryEvent& event : events) names.push_back(event.collection());
  return names;
}

// Whether the events' sequences strictly increase from above `after`: what
// lapse.proto promises. (The embedded store's are also dense; a Redis Cluster
// store's, merged from its partitions, are not.)
bool IncreasingAfter(const std::vector<v1::ExpiryEvent>& events, uint64_t after) {
  for (const v1::ExpiryEvent& event : events) {
    if (event.sequence() <= after) return false;
    after = event.sequence();
  }
  return true;
}

// Live members of the collections whose names start with `prefix`, by
// ListCollections.
uint64_t LiveMembers(v1::LapseService::Stub& stub, const std::string& prefix) {
  v1::ListCollectionsRequest request;
  request.set_prefix(prefix);
  request.set_page_size(1000);
  uint64_t members = 0;
  do {
    v1::ListCollectionsResponse response;
    EXPECT_TRUE(Call(stub, &v1::LapseService::Stub::ListCollections, request, &response).ok());
    for (const v1::CollectionInfo& info : response.collections()) members += info.member_count();
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return members;
}

TEST(WatchTest, DeliversExpiredMembersWithTheirValues) {
  TestServer server;
  PutTtl(server.stub(), "orders", {"a", "b"}, absl::Seconds(1));
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_include_values(true);
  Watcher watcher(server.stub(), request);
  const uint64_t start = server.server().store().events().last_sequence();

  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(2));
  std::vector<v1::ExpiryEvent> events = watcher.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(IncreasingAfter(events, start)) << ::testing::PrintToString(Sequences(events));
  std::set<std::string> keys;
  for (const v1::ExpiryEvent& event : events) {
    keys.insert(event.key());
    EXPECT_EQ(event.collection(), "orders");
    EXPECT_EQ(event.value(), "v:" + event.key());
    EXPECT_EQ(TimeOf(event.expire_time()), StartTime() + absl::Seconds(1));
    EXPECT_EQ(TimeOf(event.expired_at()), StartTime() + absl::Seconds(2));
  }
  EXPECT_THAT(keys, ElementsAre("a", "b"));
  EXPECT_EQ(watcher.responses().back().examined_sequence(), events.back().sequence());
}

TEST(WatchTest, LeavesValuesOutUnlessAsked) {
  TestServer server;
  PutTtl(server.stub(), "orders", {"a"}, absl::Seconds(1));
  Watcher watcher(server.stub(), AllEvents());
  server.ExpireAfter(absl::Seconds(1));
  ASSERT_TRUE(watcher.WaitForEvents(1));
  const std::vector<v1::ExpiryEvent> events = watcher.events();
  EXPECT_EQ(events[0].key(), "a");
  EXPECT_TRUE(events[0].value().empty());
}

TEST(WatchTest, ANewStreamSeesOnlyLaterEvents) {
  TestServer server;
  PutTtl(server.stub(), "c", {"old", "new"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"old"}, server.clock().Now());
  Watcher watcher(server.stub(), AllEvents());
  ExpireNow(server.stub(), "c", {"new"}, server.clock().Now());
  ASSERT_TRUE(watcher.WaitForEvents(1));
  EXPECT_THAT(Keys(watcher.events()), ElementsAre("new"));
}

TEST(WatchTest, ResumesAfterReconnectWithNoGapAndNoDuplicate) {
  TestServer server;
  PutTtl(server.stub(), "jobs", {"k1", "k2", "k3"}, absl::Seconds(1));
  uint64_t resume_after;
  {
    Watcher first(server.stub(), AllEvents());
    server.ExpireAfter(absl::Seconds(1));
    ASSERT_TRUE(first.WaitForEvents(3));
    resume_after = first.responses().back().examined_sequence();
    EXPECT_EQ(first.events().back().sequence(), resume_after);
  }
  // Expired while no one watches.
  PutTtl(server.stub(), "jobs", {"k4", "k5"}, absl::Seconds(1));
  server.ExpireAfter(absl::Seconds(1));

  Watcher second(server.stub(), After(resume_after));
  ASSERT_TRUE(second.WaitForEvents(2));
  PutTtl(server.stub(), "jobs", {"k6"}, absl::Seconds(60));
  ExpireNow(server.stub(), "jobs", {"k6"}, server.clock().Now());
  ASSERT_TRUE(second.WaitForEvents(3));
  const std::vector<v1::ExpiryEvent> events = second.events();
  EXPECT_TRUE(IncreasingAfter(events, resume_after)) << ::testing::PrintToString(Sequences(events));
  EXPECT_EQ(events[2].key(), "k6");
  EXPECT_EQ((std::set<std::string>{events[0].key(), events[1].key()}),
            (std::set<std::string>{"k4", "k5"}));
}

// More events than one batch and one event block, in several watch
// responses; a second stream resumed from the middle of a block gets exactly
// the rest.
TEST(WatchTest, AThousandsStrongBurstArrivesWholeAndResumesFromMidBlock) {
  TestServer server;
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) keys.push_back(absl::StrFormat("k%05d", i));
  for (size_t i = 0; i < keys.size(); i += 1000) {
    PutTtl(
        server.stub(), "burst",
        std::vector<std::string>(keys.begin() + i, keys.begin() + std::min(i + 1000, keys.size())),
        absl::Seconds(1));
  }
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_include_values(true);
  const uint64_t start = server.server().store().events().last_sequence();
  uint64_t middle;
  {
    Watcher watcher(server.stub(), request);
    server.ExpireAfter(absl::Seconds(1));
    ASSERT_TRUE(watcher.WaitForEvents(keys.size()));
    const std::vector<v1::ExpiryEvent> events = watcher.events();
    EXPECT_GT(watcher.responses().size(), 2u);
    EXPECT_TRUE(IncreasingAfter(events, start));
    // Members sharing a deadline expire in key order.
    EXPECT_EQ(Keys(events), keys);
    for (const v1::ExpiryEvent& event : events) {
      ASSERT_EQ(event.value(), "v:" + event.key());
      ASSERT_EQ(event.collection(), "burst");
      ASSERT_EQ(TimeOf(event.expire_time()), StartTime() + absl::Seconds(1));
    }
    middle = events[1500].sequence();
  }
  request = After(middle);
  request.set_include_values(true);
  Watcher resumed(server.stub(), request);
  ASSERT_TRUE(resumed.WaitForEvents(keys.size() - 1501));
  EXPECT_EQ(Keys(resumed.events()), std::vector<std::string>(keys.begin() + 1501, keys.end()));
  EXPECT_TRUE(IncreasingAfter(resumed.events(), middle));
}

// Issue #10: the sequences of a fresh store start at the wall clock in
// nanoseconds, and "after 0" was refused as if events had been discarded.
TEST(WatchTest, AfterSequenceZeroOnAFreshStoreDeliversEveryEvent) {
  TestServer server;
  PutTtl(server.stub(), "c", {"a", "b"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"a", "b"}, server.clock().Now());

  Watcher watcher(server.stub(), After(0));
  ASSERT_TRUE(watcher.WaitForEvents(2)) << watcher.WaitForEnd().error_message();
  EXPECT_THAT(Keys(watcher.events()), ElementsAre("a", "b"));
}

TEST(WatchTest, ASequenceOlderThanTheStoresFirstIsOutOfRangeAsAnotherStores) {
  TestServer server;
  PutTtl(server.stub(), "c", {"a"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"a"}, server.clock().Now());

  Watcher watcher(server.stub(), After(41));
  const grpc::Status status = watcher.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(), HasSubstr("sequence 41 belongs to another store"));
}

TEST(WatchTest, EveryResponseCarriesAResumeTokenThatResumesWithNoGapAndNoDuplicate) {
  TestServer server;
  PutTtl(server.stub(), "jobs", {"k1", "k2"}, absl::Seconds(1));
  std::string token;
  std::string store_id;
  {
    Watcher first(server.stub(), AllEvents());
    server.ExpireAfter(absl::Seconds(1));
    ASSERT_TRUE(first.WaitForEvents(2));
    const v1::WatchExpirationsResponse last = first.responses().back();
    token = last.resume_token();
    store_id = last.store_id();
    EXPECT_EQ(store_id, server.server().store().events().store_id().ToString());
    EXPECT_EQ(store_id.size(), 32u);
  }
  PutTtl(server.stub(), "jobs", {"k3"}, absl::Seconds(1));
  server.ExpireAfter(absl::Seconds(1));

  Watcher second(server.stub(), AfterToken(token));
  ASSERT_TRUE(second.WaitForEvents(1)) << second.WaitForEnd().error_message();
  EXPECT_THAT(Keys(second.events()), ElementsAre("k3"));
  const v1::WatchExpirationsResponse response = second.responses().back();
  EXPECT_EQ(response.store_id(), store_id);
  EXPECT_FALSE(response.resume_token().empty());
  EXPECT_NE(response.resume_token(), token);
}

TEST(WatchTest, AResumeTokenOfAnotherStoreIsOutOfRangeNamingBothStores) {
  std::string token;
  std::string other_store;
  {
    TestServer other;
    PutTtl(other.stub(), "c", {"a"}, absl::Seconds(1));
    Watcher watcher(other.stub(), AllEvents());
    other.ExpireAfter(absl::Seconds(1));
    ASSERT_TRUE(watcher.WaitForEvents(1));
    token = watcher.responses().back().resume_token();
    other_store = other.server().store().events().store_id().ToString();
  }
  StartNewStore();
  TestServer server;
  const std::string store = server.server().store().events().store_id().ToString();
  ASSERT_NE(store, other_store);

  Watcher refused(server.stub(), AfterToken(token));
  const grpc::Status status = refused.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("belongs to store ", other_store,
                                     ", not to this server's store ", store)));
}

TEST(WatchTest, StartsFromTheOldestRetainedEvent) {
  TestServer server;
  PutTtl(server.stub(), "c", {"a", "b", "c"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"a", "b", "c"}, server.clock().Now());
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_OLDEST);
  Watcher watcher(server.stub(), request);
  ASSERT_TRUE(watcher.WaitForEvents(3));
  EXPECT_TRUE(IncreasingAfter(watcher.events(), 0));
  EXPECT_THAT(Keys(watcher.events()), ElementsAre("a", "b", "c"));
}

TEST(WatchTest, FiltersByCollectionNames) {
  TestServer server;
  for (const char* name : {"a", "b", "c"}) {
    PutTtl(server.stub(), name, {"k"}, absl::Seconds(1));
  }
  v1::WatchExpirationsRequest request = AllEvents();
  request.add_collections("a");
  request.add_collections("c");
  Watcher watcher(server.stub(), request);
  server.ExpireAfter(absl::Seconds(1));
  ASSERT_TRUE(watcher.WaitForEvents(2));
  // A sentinel after the rest proves nothing else was coming.
  PutTtl(server.stub(), "b", {"z"}, absl::Seconds(60));
  PutTtl(server.stub(), "c", {"z"}, absl::Seconds(60));
  ExpireNow(server.stub(), "b", {"z"}, server.clock().Now());
  ExpireNow(server.stub(), "c", {"z"}, server.clock().Now());
  ASSERT_TRUE(watcher.WaitForEvents(3));
  const std::vector<v1::ExpiryEvent> events = watcher.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ((std::multiset<std::string>{events[0].collection(), events[1].collection()}),
            (std::multiset<std::string>{"a", "c"}));
  EXPECT_EQ(events[2].collection(), "c");
  EXPECT_EQ(events[2].key(), "z");
}

TEST(WatchTest, FiltersByPrefix) {
  TestServer server;
  for (const char* name : {"orders:1", "carts:1", "orders:2"}) {
    PutTtl(server.stub(), name, {"k"}, absl::Seconds(60));
  }
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_collection_prefix("orders:");
  Watcher watcher(server.stub(), request);
  for (const char* name : {"orders:1", "carts:1", "orders:2"}) {
    ExpireNow(server.stub(), name, {"k"}, server.clock().Now());
  }
  ASSERT_TRUE(watcher.WaitForEvents(2));
  EXPECT_THAT(Collections(watcher.events()), ElementsAre("orders:1", "orders:2"));
  // The skipped event was examined all the same.
  EXPECT_EQ(watcher.responses().back().examined_sequence(),
            server.server().store().events().last_sequence());
}

TEST(WatchTest, ResumingFromOutsideRetentionIsOutOfRange) {
  ServerOptions options = TestOptions();
  options.store.event_retention_events = 3;
  TestServer server(options);
  const EventSource& events = server.server().store().events();
  const uint64_t before = events.last_sequence();
  PutTtl(server.stub(), "c", {"a", "b", "c", "d", "e"}, absl::Seconds(60));
  ExpireNow(server.stub(), "c", {"a", "b", "c", "d", "e"}, server.clock().Now());
  // The store keeps the newest three of the five: "c", "d" and "e" (below).
  const uint64_t oldest = events.oldest_retained_sequence();
  ASSERT_GT(oldest, before + 1);

  Watcher lost(server.stub(), After(before));
  const grpc::Status status = lost.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("oldest retained sequence is ", oldest)));

  // Right before the oldest retained event is still a valid position.
  Watcher kept(server.stub(), After(oldest - 1));
  ASSERT_TRUE(kept.WaitForEvents(3));
  const std::vector<v1::ExpiryEvent> retained = kept.events();
  EXPECT_THAT(Keys(retained), ElementsAre("c", "d", "e"));
  EXPECT_EQ(retained.front().sequence(), oldest);
  EXPECT_EQ(retained.back().sequence(), events.last_sequence());
  EXPECT_TRUE(IncreasingAfter(retained, oldest - 1))
      << ::testing::PrintToString(Sequences(retained));
}

TEST(WatchTest, AWatcherThatFallsOutOfRetentionEndsWithOutOfRange) {
  ServerOptions options = TestOptions();
  options.store.event_retention_events = 2;
  TestServer server(options);
  PutTtl(server.stub(), "c", {"a", "b", "c", "d", "e"}, absl::Seconds(60));
  Watcher watcher(server.stub(), AllEvents());
  // One burst of five events, of which the log keeps two: the stream's next
  // event is gone before it can be sent, and it must not be skipped silently.
  ExpireNow(server.stub(), "c", {"a", "b", "c", "d", "e"}, server.clock().Now());
  const grpc::Status status = watcher.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("oldest retained sequence is ",
                                     server.server().store().events().oldest_retained_sequence())));
  EXPECT_TRUE(watcher.events().empty());
}

TEST(WatchTest, ASlowWatcherDoesNotHoldUpAFastOne) {
  TestServer server;
  constexpr int kRequests = 4;
  constexpr int kPerRequest = 50;
  const std::string big(32 << 10, 'x');
  for (int r = 0; r < kRequests; ++r) {
    v1::PutMembersRequest request;
    request.set_collection("big");
    for (int i = 0; i < kPerRequest; ++i) {
      v1::MemberWrite* write = request.add_members();
      write->set_key(absl::StrCat(r, "-", i));
      write->set_value(big);
      write->mutable_ttl()->set_seconds(1);
    }
    v1::PutMembersResponse response;
    ASSERT_TRUE(Call(server.stub(), &v1::LapseService::Stub::PutMembers, request, &response).ok());
  }
  v1::WatchExpirationsRequest request = AllEvents();
  request.set_include_values(true);
  std::unique_ptr<v1::LapseService::Stub> slow_stub =
      v1::LapseService::NewStub(server.NewChannel());
  std::unique_ptr<v1::LapseService::Stub> fast_stub =
      v1::LapseService::NewStub(server.NewChannel());
  // 6.4 MB of values: far more than the flow-control windows of a stream
  // whose client never reads.
  Watcher slow(*slow_stub, request, Watcher::Reading::kDoNotRead);
  Watcher fast(*fast_stub, request);

  server.ExpireAfter(absl::Seconds(1));
  ASSERT_TRUE(fast.WaitForEvents(kRequests * kPerRequest));
  EXPECT_EQ(fast.events().size(), static_cast<size_t>(kRequests * kPerRequest));
  EXPECT_EQ(fast.events().back().value(), big);
}

TEST(WatchTest, ConcurrentWritersGetOneEventPerExpiredMember) {
  TestServer server;
  constexpr int kWriters = 4;
  constexpr int kRounds = 25;
  constexpr int kPerRound = 10;
  Watcher all(server.stub(), AllEvents());
  v1::WatchExpirationsRequest only_w0 = AllEvents();
  only_w0.set_collection_prefix("w0");
  Watcher prefixed(server.stub(), only_w0);

  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&server, w] {
      std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(server.NewChannel());
      for (int r = 0; r < kRounds; ++r) {
        std::vector<std::string> keys;
        for (int i = 0; i < kPerRound; ++i) keys.push_back(absl::StrCat(r, "-", i));
        PutTtl(*stub, absl::StrCat("w", w), keys, absl::Milliseconds(500));
        // Expiry runs while the other writers write.
        server.ExpireAfter(absl::Milliseconds(200));
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  server.ExpireAfter(absl::Seconds(1));

  constexpr size_t kMembers = kWriters * kRounds * kPerRound;
  ASSERT_TRUE(all.WaitForEvents(kMembers));
  // Events arrive in sequence order, so once a sentinel arrives nothing
  // earlier is still on its way.
  PutTtl(server.stub(), "w0-sentinel", {"s"}, absl::Seconds(60));
  EXPECT_EQ(LiveMembers(server.stub(), "w0-sentinel"), 1u);
  ExpireNow(server.stub(), "w0-sentinel", {"s"}, server.clock().Now());
  ASSERT_TRUE(all.WaitForEvents(kMembers + 1));
  ASSERT_TRUE(prefixed.WaitForEvents(kRounds * kPerRound + 1));

  const std::vector<v1::ExpiryEvent> events = all.events();
  ASSERT_EQ(events.size(), kMembers + 1);
  std::set<std::pair<std::string, std::string>> members;
  EXPECT_TRUE(IncreasingAfter(events, 0));
  for (const v1::ExpiryEvent& event : events) members.emplace(event.collection(), event.key());
  EXPECT_EQ(members.size(), kMembers + 1);
  EXPECT_EQ(prefixed.events().size(), static_cast<size_t>(kRounds * kPerRound + 1));
  EXPECT_EQ(LiveMembers(server.stub(), "w"), 0u);
}

TEST(WatchTest, IdleStreamsGetHeartbeats) {
  ServerOptions options = TestOptions();
  options.heartbeat_interval = absl::Milliseconds(50);
  TestServer server(options);
  Watcher watcher(server.stub(), AllEvents());
  ASSERT_TRUE(watcher.WaitForResponses(2));
  for (const v1::WatchExpirationsResponse& response : watcher.responses()) {
    EXPECT_EQ(response.events_size(), 0);
    EXPECT_EQ(response.examined_sequence(), server.server().store().events().last_sequence());
  }
}

TEST(WatchTest, HeartbeatsCarryTheExaminedSequenceWhenNothingMatches) {
  ServerOptions options = TestOptions();
  options.heartbeat_interval = absl::Milliseconds(50);
  TestServer server(options);
  v1::WatchExpirationsRequest request = AllEvents();
  request.add_collections("mine");
  Watcher watcher(server.stub(), request);
  PutTtl(server.stub(), "other", {"a", "b", "c"}, absl::Seconds(60));
  ExpireNow(server.stub(), "other", {"a", "b", "c"}, server.clock().Now());
  const uint64_t last = server.server().store().events().last_sequence();
  ASSERT_TRUE(watcher.WaitFor([last](const std::vector<v1::WatchExpirationsResponse>& responses) {
    return !responses.empty() && responses.back().examined_sequence() == last;
  }));
  EXPECT_TRUE(watcher.events().empty());

  // The heartbeat's token resumes right after what it examined.
  const std::string token = watcher.responses().back().resume_token();
  ASSERT_FALSE(token.empty());
  PutTtl(server.stub(), "mine", {"d"}, absl::Seconds(60));
  ExpireNow(server.stub(), "mine", {"d"}, server.clock().Now());
  v1::WatchExpirationsRequest resumed = AfterToken(token);
  resumed.add_collections("mine");
  Watcher second(server.stub(), resumed);
  ASSERT_TRUE(second.WaitForEvents(1));
  EXPECT_THAT(Keys(second.events()), ElementsAre("d"));
  EXPECT_TRUE(IncreasingAfter(second.events(), last));
}

}  // namespace
}  // namespace lapse::testing

// Client::Watch and Client::WatchStream: delivery, filters, start positions
// and cancellation against a real in-process server (FakeClock); resuming
// after a broken stream against a scripted FakeLapseService; and restarts of
// a real lapsed process.
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lapse/client.h"
#include "testing/fake_lapse_service.h"
#include "testing/lapsed_process.h"
#include "testing/recorder.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse::client {
namespace {

using ::lapse::testing::StartTime;
using ::lapse::testing::TestServer;
using ::testing::ElementsAre;
using testing::FakeServer;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::LapsedProcess;
using testing::Recorder;
using testing::TempDir;
using testing::TestClientOptions;
using ::testing::UnorderedElementsAre;

std::string Address(int port) { return absl::StrCat("127.0.0.1:", port); }

WatchOptions From(StartPosition start, uint64_t after_sequence = 0) {
  WatchOptions options;
  options.start = start;
  options.after_sequence = after_sequence;
  return options;
}

WatchOptions AfterToken(const std::string& token) {
  WatchOptions options;
  options.start = StartPosition::kAfterToken;
  options.resume_token = token;
  return options;
}

// Cancels `subscription` and returns where it stands, which must be known.
std::string CancelForToken(Subscription& subscription) {
  subscription.Cancel();
  std::string token = subscription.resume_token();
  EXPECT_FALSE(token.empty());
  return token;
}

bool StrictlyIncreasing(const std::vector<uint64_t>& sequences) {
  for (size_t i = 1; i < sequences.size(); ++i) {
    if (sequences[i] <= sequences[i - 1]) return false;
  }
  return true;
}

// ---- Against a real in-process server ---------------------------------------

class WatchTest : public ::testing::Test {
 protected:
  explicit WatchTest(ServerOptions options = lapse::testing::TestOptions())
      : server_(std::move(options)), client_(Address(server_.port()), TestClientOptions()) {}

  void Put(const std::string& collection, const std::vector<std::string>& keys,
           Expiration expiration) {
    std::vector<MemberWrite> writes;
    for (const std::string& key : keys) {
      MemberWrite write;
      write.key = key;
      write.value = "v:" + key;
      write.expiration = expiration;
      writes.push_back(write);
    }
    absl::StatusOr<std::vector<PutResult>> put = client_.PutMembers(collection, writes);
    ASSERT_TRUE(put.ok()) << put.status();
  }

  // Puts `keys` and expires them at once: their events are appended, in
  // order, before this returns.
  void ExpireNow(const std::string& collection, const std::vector<std::string>& keys) {
    Put(collection, keys, Expiration::None());
    for (const std::string& key : keys) {
      absl::StatusOr<std::vector<ExpireResult>> expired =
          client_.ExpireMembers(collection, {key}, Expiration::At(StartTime() - absl::Seconds(1)));
      ASSERT_TRUE(expired.ok()) << expired.status();
      ASSERT_EQ((*expired)[0].outcome, ExpireOutcome::kExpired);
    }
  }

  std::unique_ptr<Subscription> Watch(const WatchOptions& options, Recorder& recorder) {
    absl::StatusOr<std::unique_ptr<Subscription>> subscription =
        client_.Watch(options, recorder.Handlers());
    EXPECT_TRUE(subscription.ok()) << subscription.status();
    return subscription.ok() ? *std::move(subscription) : nullptr;
  }

  // Watches with `options` while a member "x" of `unmatched` expires a second
  // before a member "y" of `matched`, until the first event reached
  // `recorder`: had the filter let `unmatched` through, it would have come first.
  void ExpireUnmatchedThenMatched(const WatchOptions& options, const std::string& unmatched,
                                  const std::string& matched, Recorder& recorder) {
    std::unique_ptr<Subscription> subscription = Watch(options, recorder);
    ASSERT_TRUE(recorder.WaitForConnections(1));
    Put(unmatched, {"x"}, Expiration::Ttl(absl::Seconds(1)));
    Put(matched, {"y"}, Expiration::Ttl(absl::Seconds(2)));
    server_.ExpireAfter(absl::Seconds(3));
    ASSERT_TRUE(recorder.WaitForEvents(1));
  }

  TestServer server_;
  Client client_;
};

TEST_F(WatchTest, DeliversEachExpiryOnceInSequenceOrder) {
  Recorder recorder;
  std::unique_ptr<Subscription> subscription = Watch(From(StartPosition::kNew), recorder);
  ASSERT_TRUE(recorder.WaitForConnections(1));
  Put("orders", {"a", "b", "c"}, Expiration::Ttl(absl::Seconds(1)));
  server_.ExpireAfter(absl::Seconds(2));

  ASSERT_TRUE(recorder.WaitForEvents(3));
  EXPECT_THAT(recorder.keys(), UnorderedElementsAre("a", "b", "c"));
  EXPECT_TRUE(StrictlyIncreasing(recorder.sequences()));
  for (const ExpiryEvent& event : recorder.events()) {
    EXPECT_EQ(event.collection, "orders");
    EXPECT_EQ(event.value, "");
    EXPECT_EQ(event.expire_time, StartTime() + absl::Seconds(1));
    EXPECT_GE(event.expired_at, event.expire_time);
  }
  EXPECT_EQ(recorder.reconnects(), 0);
  subscription->Cancel();
  EXPECT_GE(subscription->position(), recorder.sequences().back());
  EXPECT_EQ(recorder.error(), std::nullopt);
}

TEST_F(WatchTest, FiltersByCollectionNames) {
  Recorder recorder;
  WatchOptions options;
  options.collections = {"mine", "ours"};
  ASSERT_NO_FATAL_FAILURE(ExpireUnmatchedThenMatched(options, "other", "mine", recorder));
  EXPECT_EQ(recorder.events()[0].collection, "mine");
  EXPECT_EQ(recorder.events()[0].key, "y");
}

TEST_F(WatchTest, FiltersByPrefixAndCarriesValuesWhenAsked) {
  Recorder recorder;
  WatchOptions options;
  options.collection_prefix = "user:";
  options.include_values = true;
  ASSERT_NO_FATAL_FAILURE(ExpireUnmatchedThenMatched(options, "zone", "user:7", recorder));
  EXPECT_EQ(recorder.events()[0].collection, "user:7");
  EXPECT_EQ(recorder.events()[0].value, "v:y");
}

TEST_F(WatchTest, StartsFromTheOldestRetainedEventOrAfterAGivenSequence) {
  ExpireNow("c", {"a", "b", "c"});
  Recorder oldest;
  std::unique_ptr<Subscription> from_oldest = Watch(From(StartPosition::kOldest), oldest);
  ASSERT_TRUE(oldest.WaitForEvents(3));
  EXPECT_THAT(oldest.keys(), ElementsAre("a", "b", "c"));

  Recorder resumed;
  std::unique_ptr<Subscription> after_a =
      Watch(From(StartPosition::kAfterSequence, oldest.sequences()[0]), resumed);
  ASSERT_TRUE(resumed.WaitForEvents(2));
  EXPECT_THAT(resumed.keys(), ElementsAre("b", "c"));
  const std::vector<uint64_t> all = oldest.sequences();
  EXPECT_EQ(resumed.sequences(), std::vector<uint64_t>(all.begin() + 1, all.end()));
}

TEST_F(WatchTest, ANewSubscriptionSeesOnlyLaterEvents) {
  ExpireNow("c", {"before"});
  Recorder recorder;
  std::unique_ptr<Subscription> subscription = Watch(From(StartPosition::kNew), recorder);
  ASSERT_TRUE(recorder.WaitForConnections(1));
  ExpireNow("c", {"after"});
  ASSERT_TRUE(recorder.WaitForEvents(1));
  EXPECT_THAT(recorder.keys(), ElementsAre("after"));
}

TEST_F(WatchTest, CancelFromAHandlerStopsDeliveryAtOnce) {
  ExpireNow("c", {"a", "b", "c"});
  Recorder recorder;
  // A future rather than absl::Notification: ThreadSanitizer sees its
  // hand-off (Debian's Abseil is not instrumented).
  std::promise<Subscription*> self_promise;
  std::shared_future<Subscription*> self = self_promise.get_future().share();
  absl::StatusOr<std::unique_ptr<Subscription>> subscription =
      client_.Watch(From(StartPosition::kOldest),
                    recorder.Handlers([self](const ExpiryEvent&) { self.get()->Cancel(); }));
  ASSERT_TRUE(subscription.ok());
  self_promise.set_value(subscription->get());
  ASSERT_TRUE(recorder.WaitForEvents(1));
  (*subscription)->Cancel();
  EXPECT_THAT(recorder.keys(), ElementsAre("a"));
  EXPECT_EQ((*subscription)->position(), recorder.sequences()[0]);
  EXPECT_EQ(recorder.error(), std::nullopt);
}

TEST_F(WatchTest, ABadFilterIsReportedWithoutAConnection) {
  Recorder recorder;
  WatchOptions options;
  options.collections = {""};
  std::unique_ptr<Subscription> subscription = Watch(options, recorder);
  const absl::Status error = recorder.WaitForError();
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(error.message()), HasSubstr("collections[0]"));
  EXPECT_EQ(recorder.connections(), 0);
}

TEST_F(WatchTest, InvalidOptionsAreRefusedUpFront) {
  WatchHandlers no_event_handler;
  EXPECT_EQ(client_.Watch(WatchOptions(), no_event_handler).status().code(),
            absl::StatusCode::kInvalidArgument);
  Recorder recorder;
  WatchOptions both;
  both.collections = {"a"};
  both.collection_prefix = "b";
  EXPECT_EQ(client_.Watch(both, recorder.Handlers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  WatchOptions token_without_its_start;
  token_without_its_start.resume_token = "t";
  EXPECT_EQ(client_.Watch(token_without_its_start, recorder.Handlers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Watch(AfterToken(""), recorder.Handlers()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WatchTest, AMalformedResumeTokenIsReportedAsInvalidArgument) {
  Recorder recorder;
  std::unique_ptr<Subscription> subscription = Watch(AfterToken("garbage"), recorder);
  const absl::Status error = recorder.WaitForError();
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(error.message()), HasSubstr("resume_token: "));
}

TEST_F(WatchTest, TheResumeTokenOfAFinishedSubscriptionStartsTheNextRightAfterIt) {
  Recorder first;
  std::unique_ptr<Subscription> subscription = Watch(From(StartPosition::kNew), first);
  EXPECT_THAT(subscription->resume_token(), IsEmpty()) << "not known before a response";
  ASSERT_TRUE(first.WaitForConnections(1));
  ExpireNow("c", {"a", "b"});
  ASSERT_TRUE(first.WaitForEvents(2));
  const std::string token = CancelForToken(*subscription);

  ExpireNow("c", {"c"});
  Recorder second;
  std::unique_ptr<Subscription> resumed = Watch(AfterToken(token), second);
  ASSERT_TRUE(second.WaitForEvents(1)) << second.error().value_or(absl::OkStatus());
  EXPECT_THAT(second.keys(), ElementsAre("c"));
}

TEST_F(WatchTest, EventStreamNextReturnsEventsInOrderThroughASmallQueue) {
  ExpireNow("c", {"a", "b", "c", "d"});
  absl::StatusOr<std::unique_ptr<EventStream>> stream =
      client_.WatchStream(From(StartPosition::kOldest), /*queue_capacity=*/1);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::string> keys;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<ExpiryEvent> event = (*stream)->Next(testing::kPatience);
    ASSERT_TRUE(event.ok()) << event.status();
    keys.push_back(event->key);
  }
  EXPECT_THAT(keys, ElementsAre("a", "b", "c", "d"));
  EXPECT_EQ((*stream)->Next(absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(WatchTest, EventStreamCancelWakesABlockedNext) {
  absl::StatusOr<std::unique_ptr<EventStream>> stream =
      client_.WatchStream(From(StartPosition::kNew));
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::Status status;
  std::thread reader([&] { status = (*stream)->Next().status(); });
  (*stream)->Cancel();
  reader.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

class SmallRetentionWatchTest : public WatchTest {
 protected:
  static ServerOptions TwoEvents() {
    ServerOptions options = lapse::testing::TestOptions();
    options.store.event_retention_events = 2;
    return options;
  }
  SmallRetentionWatchTest() : WatchTest(TwoEvents()) {}
};

TEST_F(SmallRetentionWatchTest, EventsNoLongerRetainedAreReportedAsOutOfRange) {
  ExpireNow("c", {"a", "b", "c", "d"});
  const uint64_t gone = server_.server().store().events().oldest_retained_sequence() - 2;

  Recorder recorder;
  std::unique_ptr<Subscription> subscription =
      Watch(From(StartPosition::kAfterSequence, gone), recorder);
  const absl::Status error = recorder.WaitForError();
  EXPECT_EQ(error.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(error.message()), HasSubstr("no longer retained"));
  EXPECT_THAT(recorder.events(), IsEmpty());

  absl::StatusOr<std::unique_ptr<EventStream>> stream =
      client_.WatchStream(From(StartPosition::kAfterSequence, gone));
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ((*stream)->Next(testing::kPatience).status().code(), absl::StatusCode::kOutOfRange);
}

// ---- Against a scripted server ----------------------------------------------

// A scripted server, a client of it and a recorder of what a watch delivers:
// each test scripts the server's streams, then watches.
class WatchResumeTest : public ::testing::Test {
 protected:
  WatchResumeTest() : client_(server_.address(), TestClientOptions()) {}

  absl::StatusOr<std::unique_ptr<Subscription>> Watch(const WatchOptions& options) {
    return client_.Watch(options, recorder_.Handlers());
  }

  FakeServer server_;
  Client client_;
  Recorder recorder_;
};

TEST_F(WatchResumeTest, ResumesAfterTheHighestExaminedSequenceWithNoDuplicate) {
  server_.service().AddStream({true,
                               {testing::Batch({11, 12}, 12), testing::Batch({}, 15)},
                               grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset")});
  // A server that sends an event again is not believed.
  server_.service().AddStream({true, {testing::Batch({14, 16}, 16)}, {}});
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(From(StartPosition::kNew));
  ASSERT_TRUE(subscription.ok());

  ASSERT_TRUE(recorder_.WaitForEvents(3));
  EXPECT_THAT(recorder_.sequences(), ElementsAre(11, 12, 16));
  EXPECT_EQ(recorder_.reconnects(), 1);
  EXPECT_TRUE(recorder_.WaitForConnections(2));
  const std::vector<v1::WatchExpirationsRequest> requests = server_.service().watch_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].start_position(), v1::START_POSITION_NEW);
  EXPECT_EQ(requests[1].start_position(), v1::START_POSITION_AFTER_SEQUENCE);
  EXPECT_EQ(requests[1].after_sequence(), 15u);
  (*subscription)->Cancel();
  EXPECT_EQ((*subscription)->position(), 16u);
}

TEST_F(WatchResumeTest, ResumesFromTheResumeTokenOfTheLastResponseHandled) {
  v1::WatchExpirationsResponse first = testing::Batch({11, 12}, 12);
  first.set_resume_token("after-12");
  v1::WatchExpirationsResponse heartbeat = testing::Batch({}, 15);
  heartbeat.set_resume_token("after-15");
  server_.service().AddStream(
      {true, {first, heartbeat}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "reset")});
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(From(StartPosition::kNew));
  ASSERT_TRUE(subscription.ok());

  ASSERT_TRUE(server_.service().WaitForWatchCalls(2));
  const v1::WatchExpirationsRequest resumed = server_.service().watch_requests()[1];
  EXPECT_EQ(resumed.start_position(), v1::START_POSITION_AFTER_TOKEN);
  EXPECT_EQ(resumed.resume_token(), "after-15");
  EXPECT_EQ((*subscription)->resume_token(), "after-15");
}

TEST_F(WatchResumeTest, ResumesFromTheSequenceADrainingServerNames) {
  server_.service().AddStream({true,
                               {},
                               grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                            "server shutting down; last delivered sequence 41")});
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(From(StartPosition::kNew));
  ASSERT_TRUE(subscription.ok());

  ASSERT_TRUE(server_.service().WaitForWatchCalls(2));
  const v1::WatchExpirationsRequest resumed = server_.service().watch_requests()[1];
  EXPECT_EQ(resumed.start_position(), v1::START_POSITION_AFTER_SEQUENCE);
  EXPECT_EQ(resumed.after_sequence(), 41u);
}

TEST_F(WatchResumeTest, KeepsTheFilterAcrossReconnects) {
  server_.service().AddStream(
      {true, {testing::Batch({3}, 3)}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone")});
  WatchOptions options;
  options.collection_prefix = "user:";
  options.include_values = true;
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(options);
  ASSERT_TRUE(subscription.ok());

  ASSERT_TRUE(server_.service().WaitForWatchCalls(2));
  const v1::WatchExpirationsRequest resumed = server_.service().watch_requests()[1];
  EXPECT_EQ(resumed.collection_prefix(), "user:");
  EXPECT_TRUE(resumed.include_values());
  EXPECT_EQ(resumed.after_sequence(), 3u);
}

TEST_F(WatchResumeTest, OutOfRangeMidStreamIsReportedAndNeverRetried) {
  server_.service().AddStream({true,
                               {testing::Batch({5}, 5)},
                               grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                                            "events after sequence 5 are no longer retained")});
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(From(StartPosition::kNew));
  ASSERT_TRUE(subscription.ok());

  EXPECT_EQ(recorder_.WaitForError().code(), absl::StatusCode::kOutOfRange);
  (*subscription)->Cancel();
  EXPECT_THAT(recorder_.sequences(), ElementsAre(5));
  EXPECT_EQ(server_.service().calls("WatchExpirations"), 1);
  EXPECT_EQ(recorder_.reconnects(), 0);
}

TEST_F(WatchResumeTest, ARefusedStreamIsNotReportedAsConnected) {
  server_.service().AddStream({false, {}, grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "too old")});
  absl::StatusOr<std::unique_ptr<Subscription>> subscription =
      Watch(From(StartPosition::kAfterSequence, 1));
  ASSERT_TRUE(subscription.ok());
  EXPECT_EQ(recorder_.WaitForError().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(recorder_.connections(), 0);
}

TEST_F(WatchResumeTest, DestroyingASubscriptionStopsItsOpenStream) {
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(From(StartPosition::kNew));
  ASSERT_TRUE(subscription.ok());
  ASSERT_TRUE(recorder_.WaitForConnections(1));
  subscription->reset();
  EXPECT_EQ(recorder_.error(), std::nullopt);
}

// ---- Against a real lapsed that restarts ------------------------------------

class RestartTest : public ::testing::Test {
 protected:
  // Starts lapsed with `flags` and a client watching it from kNew; returns
  // once the watch is in place.
  void StartWatching(const std::vector<std::string>& flags) {
    flags_ = flags;
    lapsed_ = std::make_unique<LapsedProcess>(LAPSED_PATH, flags);
    port_ = lapsed_->port();
    ASSERT_GT(port_, 0);
    client_ = std::make_unique<Client>(Address(port_), TestClientOptions());
    absl::StatusOr<std::unique_ptr<Subscription>> subscription =
        client_->Watch(From(StartPosition::kNew), recorder_.Handlers());
    ASSERT_TRUE(subscription.ok());
    subscription_ = *std::move(subscription);
    ASSERT_TRUE(recorder_.WaitForConnections(1));
  }

  // Starts lapsed again, with the same flags and port, once the first has
  // stopped.
  void Restart() {
    restarted_ = std::make_unique<LapsedProcess>(LAPSED_PATH, flags_, port_);
    ASSERT_EQ(restarted_->port(), port_);
  }

  void ExpireNow(const std::string& collection, const std::vector<std::string>& keys) {
    std::vector<MemberWrite> writes;
    for (const std::string& key : keys) {
      MemberWrite write;
      write.key = key;
      writes.push_back(write);
    }
    // ListCollections is retried: it waits out the reconnect after a restart
    // so that the writes, which are not, find the server.
    ASSERT_TRUE(client_->ListCollections().ok());
    ASSERT_TRUE(client_->PutMembers(collection, writes).ok());
    absl::StatusOr<std::vector<ExpireResult>> expired =
        client_->ExpireMembers(collection, keys, Expiration::At(absl::Now() - absl::Hours(1)));
    ASSERT_TRUE(expired.ok()) << expired.status();
  }

  // Destroyed in reverse: the subscription first, the data last.
  TempDir dir_;
  std::vector<std::string> flags_;
  int port_ = 0;
  std::unique_ptr<LapsedProcess> lapsed_;
  std::unique_ptr<LapsedProcess> restarted_;
  std::unique_ptr<Client> client_;
  Recorder recorder_;
  std::unique_ptr<Subscription> subscription_;
};

TEST_F(RestartTest, AWatchSurvivesADurableServerRestartWithNoGapAndNoDuplicate) {
  ASSERT_FALSE(dir_.path().empty());
  ASSERT_NO_FATAL_FAILURE(StartWatching({absl::StrCat("--data-dir=", dir_.path())}));
  ExpireNow("c", {"k1", "k2"});
  ASSERT_TRUE(recorder_.WaitForEvents(2));

  ASSERT_EQ(lapsed_->Stop(), 0);
  ASSERT_TRUE(recorder_.WaitForReconnects(1));
  ASSERT_NO_FATAL_FAILURE(Restart());
  ExpireNow("c", {"k3", "k4"});

  ASSERT_TRUE(recorder_.WaitForEvents(4)) << recorder_.error().value_or(absl::OkStatus());
  EXPECT_THAT(recorder_.keys(), ElementsAre("k1", "k2", "k3", "k4"));
  EXPECT_TRUE(StrictlyIncreasing(recorder_.sequences()));
  EXPECT_EQ(recorder_.error(), std::nullopt);
  subscription_->Cancel();
  EXPECT_EQ(recorder_.events().size(), 4u);
}

TEST_F(RestartTest, ANewWatchThatHadNoEventsYetResumesAcrossARestart) {
  ASSERT_FALSE(dir_.path().empty());
  ASSERT_NO_FATAL_FAILURE(StartWatching({absl::StrCat("--data-dir=", dir_.path())}));

  ASSERT_EQ(lapsed_->Stop(), 0);
  ASSERT_NO_FATAL_FAILURE(Restart());
  // Whether the watch reconnects before or after these expire, it sees them.
  ExpireNow("c", {"k1"});
  ASSERT_TRUE(recorder_.WaitForEvents(1)) << recorder_.error().value_or(absl::OkStatus());
  EXPECT_THAT(recorder_.keys(), ElementsAre("k1"));
  EXPECT_EQ(recorder_.error(), std::nullopt);
}

TEST_F(RestartTest, AMemoryOnlyRestartIsReportedAsOutOfRangeNotSkipped) {
  ASSERT_NO_FATAL_FAILURE(StartWatching({}));
  ExpireNow("c", {"k1"});
  ASSERT_TRUE(recorder_.WaitForEvents(1));

  ASSERT_EQ(lapsed_->Stop(), 0);
  ASSERT_NO_FATAL_FAILURE(Restart());
  const absl::Status error = recorder_.WaitForError();
  EXPECT_EQ(error.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(error.message()), HasSubstr("belongs to store"));
  EXPECT_THAT(recorder_.keys(), ElementsAre("k1"));
}

TEST_F(RestartTest, APersistedTokenResumesAfterADurableRestartWithNoGapAndNoDuplicate) {
  ASSERT_FALSE(dir_.path().empty());
  ASSERT_NO_FATAL_FAILURE(StartWatching({absl::StrCat("--data-dir=", dir_.path())}));
  ExpireNow("c", {"k1", "k2"});
  ASSERT_TRUE(recorder_.WaitForEvents(2));
  const std::string token = CancelForToken(*subscription_);

  ExpireNow("c", {"k3"});
  ASSERT_EQ(lapsed_->Stop(), 0);
  ASSERT_NO_FATAL_FAILURE(Restart());
  ExpireNow("c", {"k4"});
  Recorder resumed;
  absl::StatusOr<std::unique_ptr<Subscription>> subscription =
      client_->Watch(AfterToken(token), resumed.Handlers());
  ASSERT_TRUE(subscription.ok());
  ASSERT_TRUE(resumed.WaitForEvents(2)) << resumed.error().value_or(absl::OkStatus());
  EXPECT_THAT(resumed.keys(), ElementsAre("k3", "k4"));
  EXPECT_EQ(resumed.error(), std::nullopt);
}

TEST_F(RestartTest, ATokenFromAnotherDataDirectoryIsOutOfRangeNamingTheStores) {
  ASSERT_FALSE(dir_.path().empty());
  ASSERT_NO_FATAL_FAILURE(StartWatching({absl::StrCat("--data-dir=", dir_.path())}));
  ExpireNow("c", {"k1"});
  ASSERT_TRUE(recorder_.WaitForEvents(1));
  const std::string token = CancelForToken(*subscription_);
  ASSERT_EQ(lapsed_->Stop(), 0);

  TempDir other;
  flags_ = {absl::StrCat("--data-dir=", other.path())};
  ASSERT_NO_FATAL_FAILURE(Restart());
  Recorder refused;
  absl::StatusOr<std::unique_ptr<Subscription>> subscription =
      client_->Watch(AfterToken(token), refused.Handlers());
  ASSERT_TRUE(subscription.ok());
  const absl::Status error = refused.WaitForError();
  EXPECT_EQ(error.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(error.message()), HasSubstr("belongs to store"));
  EXPECT_THAT(std::string(error.message()), HasSubstr("another data directory"));
  EXPECT_THAT(refused.keys(), IsEmpty());
  EXPECT_EQ(restarted_->Stop(), 0) << "before its directory goes";
}

}  // namespace
}  // namespace lapse::client

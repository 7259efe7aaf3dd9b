// The server side of worker pools against a real LapseServer, through raw
// stubs: the long poll (PollRequest.wait) and the Consume stream — batches
// with flow control, acks and their results, redelivery to another stream
// after a consumer dies, reconnection, malformed starts, heartbeats,
// shutdown — and three streaming consumers of one group, a second group and
// a plain watcher over 50,000 expiries.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kFailedPrecondition = static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION);

v1::ConsumeRequest StartOf(const std::string& group, const std::string& consumer,
                           uint32_t max_in_flight = 0, uint32_t max_batch = 0) {
  v1::ConsumeRequest request;
  request.mutable_start()->set_group(group);
  request.mutable_start()->set_consumer(consumer);
  request.mutable_start()->set_max_in_flight(max_in_flight);
  request.mutable_start()->set_max_batch(max_batch);
  return request;
}

void AddLease(const v1::Delivery& d, google::protobuf::RepeatedPtrField<v1::LeaseRef>* out) {
  v1::LeaseRef* lease = out->Add();
  lease->set_sequence(d.event().sequence());
  lease->set_delivery_count(d.delivery_count());
}

// A Consume stream read on its own thread. With Acking::kAuto the reader
// acks every batch as it arrives (and is then the only writer); otherwise
// the test sends requests itself. Thread-safe.
class ConsumeStream {
 public:
  enum class Acking { kManual, kAuto };
  // How long the stream may last: kPatience from its start, or until it is
  // destroyed, for a test whose length depends on the machine's load and
  // which waits on progress instead (WaitForAcksWhileProgressing).
  enum class Lifetime { kPatience, kUntilDestroyed };

  // OK acks counted across streams.
  struct Progress {
    Mutex mu;
    CondVar cv;
    size_t acked ABSL_GUARDED_BY(mu) = 0;
  };

  // What the stream received so far.
  struct Received {
    std::vector<v1::ConsumeResponse> responses;
    std::vector<v1::Delivery> deliveries;
    // Keys of the deliveries whose ack was answered OK.
    std::vector<std::string> acked_keys;
    size_t heartbeats = 0;
    bool ended = false;
    grpc::Status status;
  };

  ConsumeStream(v1::LapseService::Stub& stub, const v1::ConsumeRequest& first,
                Acking acking = Acking::kManual, Progress* progress = nullptr,
                Lifetime lifetime = Lifetime::kPatience)
      : acking_(acking), progress_(progress) {
    if (lifetime == Lifetime::kPatience) GuardDeadline(&context_);
    stream_ = stub.Consume(&context_);
    stream_->Write(first);
    reader_ = std::thread([this] { ReadAll(); });
  }
  ~ConsumeStream() {
    context_.TryCancel();
    reader_.join();
  }
  ConsumeStream(const ConsumeStream&) = delete;
  ConsumeStream& operator=(const ConsumeStream&) = delete;

  void Send(const v1::ConsumeRequest& request) { EXPECT_TRUE(stream_->Write(request)); }
  // Acks `deliveries` in one request.
  void Ack(const std::vector<v1::Delivery>& deliveries) {
    v1::ConsumeRequest request;
    for (const v1::Delivery& d : deliveries) AddLease(d, request.mutable_ack());
    Send(request);
  }
  void CloseWrites() { stream_->WritesDone(); }
  void Cancel() { context_.TryCancel(); }

  // Waits until done(received) holds; false after kPatience.
  bool WaitFor(const std::function<bool(const Received&)>& done) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_,
                            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(received_); });
  }
  bool WaitForDeliveries(size_t n) {
    return WaitFor([n](const Received& r) { return r.deliveries.size() >= n; });
  }
  // Waits until `n` acks were answered OK, giving up only once none was for
  // kPatience.
  bool WaitForAcksWhileProgressing(size_t n) {
    MutexLock lock(&mu_);
    while (received_.acked_keys.size() < n) {
      const size_t seen = received_.acked_keys.size();
      if (!WaitWithPatience(mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return received_.acked_keys.size() > seen;
          })) {
        return false;
      }
    }
    return true;
  }
  grpc::Status WaitForEnd() {
    MutexLock lock(&mu_);
    EXPECT_TRUE(WaitWithPatience(
        mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return received_.ended; }));
    return received_.status;
  }
  Received received() {
    MutexLock lock(&mu_);
    return received_;
  }

 private:
  void ReadAll() {
    v1::ConsumeResponse response;
    while (stream_->Read(&response)) {
      v1::ConsumeRequest ack;
      size_t acked = 0;
      {
        MutexLock lock(&mu_);
        const bool heartbeat = response.ByteSizeLong() == 0;
        if (heartbeat) ++received_.heartbeats;
        for (const v1::Delivery& d : response.deliveries()) {
          received_.deliveries.push_back(d);
          keys_[d.event().sequence()] = d.event().key();
          if (acking_ == Acking::kAuto) AddLease(d, ack.mutable_ack());
        }
        for (const v1::LeaseResult& r : response.ack_results()) {
          if (r.code() != 0) continue;
          received_.acked_keys.push_back(keys_[r.sequence()]);
          ++acked;
        }
        received_.responses.push_back(std::move(response));
        cv_.SignalAll();
      }
      if (progress_ != nullptr && acked > 0) {
        MutexLock lock(&progress_->mu);
        progress_->acked += acked;
        progress_->cv.SignalAll();
      }
      if (ack.ack_size() > 0) stream_->Write(ack);
      response.Clear();
    }
    grpc::Status status = stream_->Finish();
    MutexLock lock(&mu_);
    received_.ended = true;
    received_.status = std::move(status);
    cv_.SignalAll();
  }

  const Acking acking_;
  Progress* const progress_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ConsumeRequest, v1::ConsumeResponse>> stream_;
  std::thread reader_;

  Mutex mu_;
  CondVar cv_;
  Received received_ ABSL_GUARDED_BY(mu_);
  // The key of each sequence delivered, for the ack results.
  std::map<uint64_t, std::string> keys_ ABSL_GUARDED_BY(mu_);
};

// A Poll with a wait, on its own thread.
class WaitingPoll {
 public:
  WaitingPoll(v1::LapseService::Stub& stub, const std::string& group, const std::string& consumer,
              absl::Duration wait) {
    request_.set_group(group);
    request_.set_consumer(consumer);
    request_.set_max_events(100);
    request_.mutable_wait()->set_seconds(absl::ToInt64Seconds(wait));
    request_.mutable_wait()->set_nanos(static_cast<int32_t>(
        absl::ToInt64Nanoseconds(wait - absl::Seconds(absl::ToInt64Seconds(wait)))));
    GuardDeadline(&context_);
    started_ = absl::Now();
    thread_ = std::thread([this, &stub] {
      grpc::Status status = stub.Poll(&context_, request_, &response_);
      MutexLock lock(&mu_);
      status_ = std::move(status);
      took_ = absl::Now() - started_;
      done_ = true;
      cv_.SignalAll();
    });
  }
  ~WaitingPoll() {
    context_.TryCancel();
    thread_.join();
  }
  WaitingPoll(const WaitingPoll&) = delete;
  WaitingPoll& operator=(const WaitingPoll&) = delete;

  // Waits for the answer; its status.
  grpc::Status Wait() {
    MutexLock lock(&mu_);
    EXPECT_TRUE(
        WaitWithPatience(mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; }));
    return status_;
  }
  const v1::PollResponse& response() const { return response_; }
  absl::Duration took() {
    MutexLock lock(&mu_);
    return took_;
  }

 private:
  grpc::ClientContext context_;
  v1::PollRequest request_;
  v1::PollResponse response_;
  absl::Time started_;
  std::thread thread_;

  Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Duration took_ ABSL_GUARDED_BY(mu_);
};

// Waits until `n` polls wait in the server's GroupHub and `m` streams are
// open.
bool HubHolds(TestServer& server, size_t polls, size_t streams) {
  return server.server().group_hub().AwaitStatsForTesting(
      [&](const GroupHub::Stats& s) {
        return s.waiting_polls == polls && s.consume_streams == streams;
      },
      kPatience);
}

// Moves the clock past the visibility timeout and lets the lease expirer see
// it.
void ExpireLeases(TestServer& server) {
  server.ExpireLeasesAfter(kGroupVisibility + absl::Seconds(1));
}

// Expires `n` events and waits until a watcher has seen them.
void ExpireEvents(TestServer& server, int n) {
  Watcher watcher(server.stub(), AllEvents());
  PutExpiring(server.stub(), n);
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(static_cast<size_t>(n)));
}

v1::GetConsumerGroupResponse GetGroup(TestServer& server, const std::string& name) {
  v1::GetConsumerGroupRequest request;
  request.set_name(name);
  request.set_max_leases(1000);
  v1::GetConsumerGroupResponse response;
  EXPECT_TRUE(
      Call(server.stub(), &v1::LapseService::Stub::GetConsumerGroup, request, &response).ok());
  return response;
}

// ---- Long poll ----

TEST(LongPollTest, AWaitingPollIsAnsweredWhenAnEventExpires) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  PutExpiring(server.stub(), 1);
  WaitingPoll poll(server.stub(), "g", "c1", absl::Seconds(60));
  ASSERT_TRUE(HubHolds(server, 1, 0)) << "the poll waits";
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(poll.Wait().ok());
  ASSERT_EQ(poll.response().deliveries_size(), 1);
  EXPECT_EQ(poll.response().deliveries(0).event().key(), "order-0");
  EXPECT_TRUE(HubHolds(server, 0, 0));
}

TEST(LongPollTest, AWaitingPollAnswersEmptyWhenItsWaitEnds) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  WaitingPoll poll(server.stub(), "g", "c1", absl::Milliseconds(200));
  ASSERT_TRUE(poll.Wait().ok());
  EXPECT_EQ(poll.response().deliveries_size(), 0);
  EXPECT_GE(poll.took(), absl::Milliseconds(200));
}

TEST(LongPollTest, ALeaseExpiringWakesAWaitingPollOfAnotherConsumer) {
  TestServer server;
  CreateGroup(server.stub(), "g", kGroupVisibility);
  ExpireEvents(server, 1);
  WaitingPoll first(server.stub(), "g", "dies", absl::Seconds(60));
  ASSERT_TRUE(first.Wait().ok());
  ASSERT_EQ(first.response().deliveries_size(), 1);

  WaitingPoll second(server.stub(), "g", "survivor", absl::Seconds(60));
  ASSERT_TRUE(HubHolds(server, 1, 0)) << "nothing deliverable: the poll waits";
  ExpireLeases(server);
  ASSERT_TRUE(second.Wait().ok());
  ASSERT_EQ(second.response().deliveries_size(), 1);
  EXPECT_EQ(second.response().deliveries(0).delivery_count(), 2u);
}

TEST(LongPollTest, ShutdownEndsAWaitingPoll) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  WaitingPoll poll(server.stub(), "g", "c1", absl::Seconds(60));
  ASSERT_TRUE(HubHolds(server, 1, 0));
  server.server().Shutdown(absl::Seconds(5));
  const grpc::Status status = poll.Wait();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(poll.response().deliveries_size(), 0);
  EXPECT_LT(poll.took(), absl::Seconds(30));
}

TEST(LongPollTest, DeletingTheGroupEndsAWaitingPollNotFound) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  WaitingPoll poll(server.stub(), "g", "c1", absl::Seconds(60));
  ASSERT_TRUE(HubHolds(server, 1, 0));
  v1::DeleteConsumerGroupRequest request;
  request.set_name("g");
  v1::DeleteConsumerGroupResponse response;
  ASSERT_TRUE(
      Call(server.stub(), &v1::LapseService::Stub::DeleteConsumerGroup, request, &response).ok());
  EXPECT_EQ(poll.Wait().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(LongPollTest, AWaitOfMoreThan60SecondsIsInvalidArgumentNamingWait) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  WaitingPoll poll(server.stub(), "g", "c1", absl::Seconds(61));
  const grpc::Status status = poll.Wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait"));
}

TEST(LongPollTest, PollsPastMaxWaitingPollsAreResourceExhausted) {
  ServerOptions options = TestOptions();
  options.max_waiting_polls = 1;
  TestServer server(options);
  CreateGroup(server.stub(), "g");
  WaitingPoll waiting(server.stub(), "g", "c1", absl::Seconds(60));
  ASSERT_TRUE(HubHolds(server, 1, 0));
  WaitingPoll refused(server.stub(), "g", "c2", absl::Seconds(60));
  const grpc::Status status = refused.Wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_waiting_polls"));
}

// ---- Consume ----

TEST(ConsumeTest, DeliversInBatchesNeverMoreThanMaxInFlightUntilAcked) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ExpireEvents(server, 25);
  ConsumeStream stream(server.stub(), StartOf("g", "c1", /*max_in_flight=*/10, /*max_batch=*/4));
  ASSERT_TRUE(stream.WaitForDeliveries(10));
  ASSERT_TRUE(HubHolds(server, 0, 1));
  EXPECT_EQ(GetGroup(server, "g").group().pending(), 10u) << "no more leased than in flight";
  for (const v1::ConsumeResponse& r : stream.received().responses) {
    EXPECT_LE(r.deliveries_size(), 4);
  }

  std::set<uint64_t> acked;
  while (acked.size() < 25) {
    const std::vector<v1::Delivery> got = stream.received().deliveries;
    EXPECT_LE(got.size() - acked.size(), 10u) << "in flight";
    std::vector<v1::Delivery> to_ack;
    for (const v1::Delivery& d : got) {
      if (acked.insert(d.event().sequence()).second) to_ack.push_back(d);
    }
    ASSERT_FALSE(to_ack.empty()) << "the stream stopped delivering";
    stream.Ack(to_ack);
    const size_t want = std::min<size_t>(25, acked.size() + 10);
    ASSERT_TRUE(stream.WaitFor([&](const ConsumeStream::Received& r) {
      return r.acked_keys.size() == acked.size() && r.deliveries.size() >= want;
    }));
  }
  const ConsumeStream::Received received = stream.received();
  EXPECT_EQ(received.deliveries.size(), 25u);
  EXPECT_EQ(received.acked_keys.size(), 25u);
  EXPECT_EQ(GetGroup(server, "g").group().acked_total(), 25u);
}

TEST(ConsumeTest, AnAckOfALostLeaseIsFailedPrecondition) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ExpireEvents(server, 2);
  ConsumeStream stream(server.stub(), StartOf("g", "c1"));
  ASSERT_TRUE(stream.WaitForDeliveries(2));
  const std::vector<v1::Delivery> first = stream.received().deliveries;
  ExpireLeases(server);
  // The stream gets its own events again, as second deliveries.
  ASSERT_TRUE(stream.WaitForDeliveries(4));
  stream.Ack(first);
  ASSERT_TRUE(stream.WaitFor([](const ConsumeStream::Received& r) {
    return !r.responses.empty() && r.responses.back().ack_results_size() == 2;
  }));
  const v1::ConsumeResponse answer = stream.received().responses.back();
  for (const v1::LeaseResult& r : answer.ack_results()) {
    EXPECT_EQ(r.code(), kFailedPrecondition);
    EXPECT_THAT(r.message(), HasSubstr("handled more than once"));
  }
}

TEST(ConsumeTest, NacksAndExtendsAreAnsweredWithTheirResultsInOneResponse) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ExpireEvents(server, 3);
  ConsumeStream stream(server.stub(), StartOf("g", "c1"));
  ASSERT_TRUE(stream.WaitForDeliveries(3));
  const std::vector<v1::Delivery> got = stream.received().deliveries;
  v1::ConsumeRequest request;
  AddLease(got[0], request.mutable_ack());
  AddLease(got[1], request.mutable_nack());
  AddLease(got[2], request.mutable_extend());
  request.mutable_extension()->set_seconds(600);
  stream.Send(request);
  ASSERT_TRUE(stream.WaitFor([](const ConsumeStream::Received& r) {
    for (const v1::ConsumeResponse& response : r.responses) {
      if (response.ack_results_size() > 0) return true;
    }
    return false;
  }));
  // The nacked event comes back at once, as a second delivery.
  ASSERT_TRUE(stream.WaitForDeliveries(4));
  for (const v1::ConsumeResponse& r : stream.received().responses) {
    if (r.ack_results_size() == 0) continue;
    ASSERT_EQ(r.nack_results_size(), 1);
    ASSERT_EQ(r.extend_results_size(), 1);
    EXPECT_EQ(r.ack_results(0).code(), 0);
    EXPECT_EQ(r.nack_results(0).code(), 0);
    EXPECT_EQ(r.extend_results(0).code(), 0);
  }
  EXPECT_EQ(stream.received().deliveries[3].event().sequence(), got[1].event().sequence());
  EXPECT_EQ(stream.received().deliveries[3].delivery_count(), 2u);
}

TEST(ConsumeTest, TheEventsOfAConsumerKilledMidBatchGoToAnotherStreamAfterTheVisibilityTimeout) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ExpireEvents(server, 10);
  std::vector<v1::Delivery> lost;
  {
    ConsumeStream dies(server.stub(), StartOf("g", "dies"));
    ASSERT_TRUE(dies.WaitForDeliveries(10));
    lost = dies.received().deliveries;
    dies.Cancel();
    EXPECT_EQ(dies.WaitForEnd().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The client ends its side of a cancelled call at once, the server later; a
  // stream the server still holds would take the redeliveries for "dies".
  ASSERT_TRUE(HubHolds(server, 0, 0)) << "the server let the killed stream go";
  ConsumeStream survivor(server.stub(), StartOf("g", "survivor"));
  ASSERT_TRUE(HubHolds(server, 0, 1));
  EXPECT_EQ(GetGroup(server, "g").group().pending(), 10u) << "closing the stream kept the leases";
  EXPECT_TRUE(survivor.received().deliveries.empty());
  ExpireLeases(server);
  ASSERT_TRUE(survivor.WaitForDeliveries(10));
  const std::vector<v1::Delivery> got = survivor.received().deliveries;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].event().sequence(), lost[i].event().sequence());
    EXPECT_EQ(got[i].delivery_count(), 2u);
  }
}

TEST(ConsumeTest, AConsumerThatReconnectsWithTheSameNameKeepsItsLeases) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ExpireEvents(server, 3);
  std::vector<v1::Delivery> held;
  {
    ConsumeStream first(server.stub(), StartOf("g", "worker-7"));
    ASSERT_TRUE(first.WaitForDeliveries(3));
    held = first.received().deliveries;
    first.CloseWrites();
    EXPECT_TRUE(first.WaitForEnd().ok());
  }
  ASSERT_TRUE(HubHolds(server, 0, 0)) << "the server let the first stream go";
  ConsumeStream again(server.stub(), StartOf("g", "worker-7"));
  ASSERT_TRUE(HubHolds(server, 0, 1));
  again.Ack(held);
  ASSERT_TRUE(
      again.WaitFor([](const ConsumeStream::Received& r) { return r.acked_keys.size() == 3; }));
  EXPECT_EQ(GetGroup(server, "g").group().acked_total(), 3u);
}

TEST(ConsumeTest, AMalformedStartEndsTheStreamInvalidArgumentNamingTheField) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  v1::ConsumeRequest no_start;
  no_start.add_ack()->set_sequence(1);
  v1::ConsumeRequest with_acks = StartOf("g", "c1");
  with_acks.add_ack()->set_sequence(1);
  const std::pair<v1::ConsumeRequest, std::string> cases[] = {
      {no_start, "start:"},
      {StartOf("", "c1"), "start.group"},
      {StartOf("g", ""), "start.consumer"},
      {StartOf("g", "has space"), "start.consumer"},
      {with_acks, "start:"},
  };
  for (const auto& [first, field] : cases) {
    ConsumeStream stream(server.stub(), first);
    const grpc::Status status = stream.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_THAT(status.error_message(), HasSubstr(field));
  }
  ConsumeStream unknown(server.stub(), StartOf("no-such-group", "c1"));
  EXPECT_EQ(unknown.WaitForEnd().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ConsumeTest, ALaterRequestWithStartOrTooManyLeasesEndsTheStreamInvalidArgument) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  {
    ConsumeStream stream(server.stub(), StartOf("g", "c1"));
    ASSERT_TRUE(HubHolds(server, 0, 1));
    stream.Send(StartOf("g", "c1"));
    const grpc::Status status = stream.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("start:"));
  }
  {
    ConsumeStream stream(server.stub(), StartOf("g", "c1"));
    ASSERT_TRUE(HubHolds(server, 0, 1));
    v1::ConsumeRequest request;
    const size_t most = server.server().store().limits().max_members_per_request;
    for (size_t i = 0; i <= most; ++i) request.add_ack()->set_sequence(i + 1);
    stream.Send(request);
    const grpc::Status status = stream.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("ack:"));
  }
  {
    ConsumeStream stream(server.stub(), StartOf("g", "c1"));
    ASSERT_TRUE(HubHolds(server, 0, 1));
    v1::ConsumeRequest request;
    request.add_extend()->set_sequence(1);
    stream.Send(request);
    const grpc::Status status = stream.WaitForEnd();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("extension"));
  }
}

TEST(ConsumeTest, AnIdleStreamGetsHeartbeats) {
  ServerOptions options = TestOptions();
  options.heartbeat_interval = absl::Milliseconds(50);
  TestServer server(options);
  CreateGroup(server.stub(), "g");
  ConsumeStream stream(server.stub(), StartOf("g", "c1"));
  EXPECT_TRUE(stream.WaitFor([](const ConsumeStream::Received& r) { return r.heartbeats >= 2; }));
}

TEST(ConsumeTest, StreamsPastMaxConsumeStreamsAreResourceExhausted) {
  ServerOptions options = TestOptions();
  options.max_consume_streams = 1;
  TestServer server(options);
  CreateGroup(server.stub(), "g");
  ConsumeStream open(server.stub(), StartOf("g", "c1"));
  ASSERT_TRUE(HubHolds(server, 0, 1));
  ConsumeStream refused(server.stub(), StartOf("g", "c2"));
  const grpc::Status status = refused.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_consume_streams"));
}

TEST(ConsumeTest, ShutdownEndsAStreamUnavailable) {
  TestServer server;
  CreateGroup(server.stub(), "g");
  ConsumeStream stream(server.stub(), StartOf("g", "c1"));
  ASSERT_TRUE(HubHolds(server, 0, 1));
  server.server().Shutdown(absl::Seconds(5));
  const grpc::Status status = stream.WaitForEnd();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("same consumer name"));
}

// How many expiries the big test runs: LAPSE_GROUP_TEST_EVENTS, else
// LAPSE_GROUP_TEST_EVENTS_DEFAULT (tests/CMakeLists.txt: fewer under
// sanitizers).
int BigTestEvents() {
  int n = LAPSE_GROUP_TEST_EVENTS_DEFAULT;
  if (const char* env = std::getenv("LAPSE_GROUP_TEST_EVENTS"); env != nullptr) {
    EXPECT_TRUE(absl::SimpleAtoi(env, &n)) << env;
  }
  return n;
}

// On the Redis store under load the events take far longer than kPatience
// to go through both groups (each poll and ack a script and a WAIT), so the
// streams last until the test ends and each wait gives up only when nothing
// has moved for kPatience.
TEST(ConsumeTest, ThreeStreamsOfAGroupASecondGroupAndAWatcherEachHandleEveryEventOnce) {
  const int events = BigTestEvents();
  TestServer server;
  CreateGroup(server.stub(), "billing");
  CreateGroup(server.stub(), "audit");
  ConsumeStream::Progress billing_progress;
  std::vector<std::unique_ptr<ConsumeStream>> billing;
  for (const char* consumer : {"c1", "c2", "c3"}) {
    billing.push_back(std::make_unique<ConsumeStream>(
        server.stub(), StartOf("billing", consumer), ConsumeStream::Acking::kAuto,
        &billing_progress, ConsumeStream::Lifetime::kUntilDestroyed));
  }
  ConsumeStream audit(server.stub(), StartOf("audit", "solo"), ConsumeStream::Acking::kAuto,
                      nullptr, ConsumeStream::Lifetime::kUntilDestroyed);
  ASSERT_TRUE(HubHolds(server, 0, 4));

  const std::vector<std::string> keys = PutExpiring(server.stub(), events);
  // Like the groups' streams, the watcher's lasts until the test ends.
  Watcher watcher(server.stub(), AllEvents());
  const absl::Time start = absl::Now();
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(watcher.WaitForEvents(keys.size()));
  ASSERT_TRUE(audit.WaitForAcksWhileProgressing(keys.size()))
      << audit.received().acked_keys.size() << " of " << keys.size() << " acked";
  {
    MutexLock lock(&billing_progress.mu);
    while (billing_progress.acked < keys.size()) {
      const size_t seen = billing_progress.acked;
      ASSERT_TRUE(WaitWithPatience(billing_progress.mu, billing_progress.cv,
                                   [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(billing_progress.mu) {
                                     return billing_progress.acked > seen;
                                   }))
          << seen << " of " << keys.size() << " acked";
    }
  }
  std::printf("%d expiries: every event acked by both groups and seen by the watcher in %s\n",
              events, absl::FormatDuration(absl::Now() - start).c_str());
  std::map<std::string, int> billing_acks;
  for (const std::unique_ptr<ConsumeStream>& stream : billing) {
    const ConsumeStream::Received r = stream->received();
    for (const std::string& key : r.acked_keys) ++billing_acks[key];
    for (const v1::Delivery& d : r.deliveries) EXPECT_EQ(d.delivery_count(), 1u);
  }
  std::map<std::string, int> audit_acks;
  for (const std::string& key : audit.received().acked_keys) ++audit_acks[key];
  for (const std::string& key : keys) {
    EXPECT_EQ(billing_acks[key], 1) << key;
    EXPECT_EQ(audit_acks[key], 1) << key;
  }
  EXPECT_EQ(watcher.events().size(), keys.size());
  EXPECT_EQ(GetGroup(server, "billing").group().acked_total(), keys.size());
  EXPECT_EQ(GetGroup(server, "audit").group().acked_total(), keys.size());
}

}  // namespace
}  // namespace lapse::testing

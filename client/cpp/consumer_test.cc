// lapse::client::Consumer against a real in-process server (FakeClock,
// 127.0.0.1:0) and against a durable lapsed that restarts: the handler path
// (ack on OK, nack on an error or an exception, refused acks reported), the
// blocking path (Next, Ack, Extend, loss of a lease), two consumers sharing a
// group, and reconnection under the same name.
#include "lapse/consumer.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lapse/client.h"
#include "server/base/mutex.h"
#include "testing/lapsed_process.h"
#include "testing/recorder.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse::client {
namespace {

using ::lapse::testing::kPatience;
using ::lapse::testing::TestClientOptions;
using ::lapse::testing::TestServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kVisibility = absl::Seconds(30);

ConsumerOptions Named(const std::string& consumer, uint32_t max_in_flight = 100) {
  ConsumerOptions options;
  options.group = "g";
  options.consumer = consumer;
  options.max_in_flight = max_in_flight;
  return options;
}

// What a Run's handlers saw, with waits. Thread-safe.
class Handled {
 public:
  // Handlers that record, then answer with `answer` (OK unless given).
  ConsumeHandlers Handlers(std::function<absl::Status(const Delivery&)> answer = nullptr) {
    ConsumeHandlers handlers;
    handlers.on_delivery = [this, answer](const Delivery& d) {
      {
        MutexLock lock(&mu_);
        deliveries_.push_back(d);
        cv_.SignalAll();
      }
      return answer ? answer(d) : absl::OkStatus();
    };
    handlers.on_refused = [this](const LeaseResult& result) {
      MutexLock lock(&mu_);
      refused_.push_back(result);
      cv_.SignalAll();
    };
    return handlers;
  }

  bool WaitForDeliveries(size_t n) {
    MutexLock lock(&mu_);
    return testing::WaitWithPatience(
        mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return deliveries_.size() >= n; });
  }
  bool WaitForRefusals(size_t n) {
    MutexLock lock(&mu_);
    return testing::WaitWithPatience(
        mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return refused_.size() >= n; });
  }
  std::vector<Delivery> deliveries() {
    MutexLock lock(&mu_);
    return deliveries_;
  }
  std::vector<LeaseResult> refused() {
    MutexLock lock(&mu_);
    return refused_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<Delivery> deliveries_ ABSL_GUARDED_BY(mu_);
  std::vector<LeaseResult> refused_ ABSL_GUARDED_BY(mu_);
};

// A Consumer's Run on its own thread; stopped and joined on destruction.
class Running {
 public:
  Running(Consumer& consumer, ConsumeHandlers handlers)
      : consumer_(consumer), thread_([this, handlers] { ended_ = consumer_.Run(handlers); }) {}
  ~Running() { Stop().IgnoreError(); }

  // Stops the consumer; Run's status.
  absl::Status Stop() {
    consumer_.Stop();
    if (thread_.joinable()) thread_.join();
    return ended_;
  }

 private:
  Consumer& consumer_;
  absl::Status ended_;
  std::thread thread_;
};

class ConsumerTest : public ::testing::Test {
 protected:
  explicit ConsumerTest(ServerOptions options = testing::TestOptions())
      : server_(std::move(options)),
        client_(absl::StrCat("127.0.0.1:", server_.port()), TestClientOptions()) {
    ConsumerGroupOptions group;
    group.name = "g";
    group.collections = {"orders"};
    group.visibility_timeout = kVisibility;
    group.max_unacked_per_consumer = 1000;
    EXPECT_TRUE(client_.CreateConsumerGroup(group).ok());
  }

  // Expires `n` members "o-0", "o-1", ... of "orders" now, so that their
  // events are in the feed when this returns.
  void ExpireOrders(int n) {
    std::vector<MemberWrite> writes;
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) {
      MemberWrite write;
      write.key = absl::StrCat("o-", i);
      writes.push_back(write);
      keys.push_back(write.key);
    }
    ASSERT_TRUE(client_.PutMembers("orders", writes).ok());
    ASSERT_TRUE(
        client_
            .ExpireMembers("orders", keys, Expiration::At(server_.clock().Now() - absl::Seconds(1)))
            .ok());
  }

  ConsumerGroupInfo Group() {
    absl::StatusOr<ConsumerGroupInfo> group = client_.GetConsumerGroup("g");
    EXPECT_TRUE(group.ok()) << group.status();
    return group.value_or(ConsumerGroupInfo());
  }

  TestServer server_;
  Client client_;
};

TEST_F(ConsumerTest, TheHandlerAcksEachEventExactlyOnce) {
  constexpr int kEvents = 300;
  ExpireOrders(kEvents);
  Consumer consumer(client_, Named("c1", 50));
  Handled handled;
  Running running(consumer, handled.Handlers());
  ASSERT_TRUE(handled.WaitForDeliveries(kEvents));
  EXPECT_TRUE(running.Stop().ok());

  std::set<uint64_t> sequences;
  for (const Delivery& d : handled.deliveries()) {
    EXPECT_EQ(d.delivery_count, 1u);
    sequences.insert(d.event.sequence);
  }
  EXPECT_EQ(sequences.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(handled.deliveries().size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(consumer.stats().acked, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(consumer.stats().refused, 0u);
  const ConsumerGroupInfo group = Group();
  EXPECT_EQ(group.acked_total, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(group.pending, 0u);
}

TEST_F(ConsumerTest, AnErrorOrAnExceptionFromTheHandlerNacksForRedelivery) {
  ExpireOrders(2);
  Consumer consumer(client_, Named("c1"));
  Handled handled;
  Running running(consumer, handled.Handlers([](const Delivery& d) -> absl::Status {
    if (d.delivery_count > 1) return absl::OkStatus();
    if (d.event.key == "o-0") return absl::InternalError("not now");
    throw std::runtime_error("not now either");
  }));
  ASSERT_TRUE(handled.WaitForDeliveries(4));
  EXPECT_TRUE(running.Stop().ok());

  std::map<std::string, std::vector<uint32_t>> counts;
  for (const Delivery& d : handled.deliveries()) counts[d.event.key].push_back(d.delivery_count);
  EXPECT_THAT(counts["o-0"], ElementsAre(1u, 2u));
  EXPECT_THAT(counts["o-1"], ElementsAre(1u, 2u));
  EXPECT_EQ(consumer.stats().nacked, 2u);
  EXPECT_EQ(consumer.stats().acked, 2u);
  EXPECT_EQ(Group().pending, 0u);
}

TEST_F(ConsumerTest, ExtendKeepsALeasePastItsVisibilityTimeout) {
  ExpireOrders(1);
  Consumer consumer(client_, Named("c1"));
  absl::StatusOr<Delivery> d = consumer.Next(kPatience);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->event.key, "o-0");
  EXPECT_EQ(d->lease_deadline, server_.clock().Now() + kVisibility);

  ASSERT_TRUE(consumer.Extend(*d, absl::Minutes(5)).ok());
  server_.ExpireAfter(kVisibility + absl::Seconds(1));
  EXPECT_TRUE(consumer.Ack(*d).ok());
  EXPECT_EQ(Group().pending, 0u);
}

TEST_F(ConsumerTest, TheAckOfALostLeaseIsRefusedToTheCaller) {
  ExpireOrders(1);
  Consumer consumer(client_, Named("c1"));
  absl::StatusOr<Delivery> d = consumer.Next(kPatience);
  ASSERT_TRUE(d.ok()) << d.status();

  server_.ExpireAfter(kVisibility + absl::Seconds(1));
  const absl::Status acked = consumer.Ack(*d);
  EXPECT_EQ(acked.code(), absl::StatusCode::kFailedPrecondition) << acked;
  EXPECT_THAT(acked.message(), HasSubstr("not held"));
  EXPECT_EQ(consumer.stats().refused, 1u);
}

TEST_F(ConsumerTest, TheHandlerPathReportsARefusedAckAndGoesOn) {
  ExpireOrders(1);
  Consumer consumer(client_, Named("c1", 1));
  struct Gate {
    Mutex mu;
    CondVar cv;
    bool open ABSL_GUARDED_BY(mu) = false;
  } gate;
  Handled handled;
  Running running(consumer, handled.Handlers([&gate](const Delivery& d) {
    // The first delivery is held until its lease has expired.
    if (d.delivery_count == 1) {
      MutexLock lock(&gate.mu);
      testing::WaitWithPatience(gate.mu, gate.cv,
                                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate.mu) { return gate.open; });
    }
    return absl::OkStatus();
  }));
  ASSERT_TRUE(handled.WaitForDeliveries(1));
  server_.ExpireAfter(kVisibility + absl::Seconds(1));
  {
    MutexLock lock(&gate.mu);
    gate.open = true;
    gate.cv.SignalAll();
  }
  ASSERT_TRUE(handled.WaitForRefusals(1));
  const LeaseResult refused = handled.refused()[0];
  EXPECT_EQ(refused.sequence, handled.deliveries()[0].event.sequence);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kFailedPrecondition) << refused.status;
  // It goes on: the event comes back (to it, the group's only consumer) and
  // is acked.
  ASSERT_TRUE(handled.WaitForDeliveries(2));
  EXPECT_TRUE(running.Stop().ok());
  EXPECT_EQ(handled.deliveries()[1].delivery_count, 2u);
  EXPECT_EQ(Group().pending, 0u);
}

TEST_F(ConsumerTest, TwoConsumersSplitTheEventsAndTogetherAckEachOnce) {
  constexpr int kEvents = 200;
  Consumer first(client_, Named("c1", 10));
  Consumer second(client_, Named("c2", 10));
  // Each handler holds its first delivery until both consumers have one:
  // with at most 10 in flight each, neither can take all the events alone.
  struct Started {
    Mutex mu;
    CondVar cv;
    std::set<std::string> names ABSL_GUARDED_BY(mu);
  } started;
  const auto both_started = [&started](const std::string& name) {
    return [&started, name](const Delivery&) {
      MutexLock lock(&started.mu);
      started.names.insert(name);
      started.cv.SignalAll();
      testing::WaitWithPatience(
          started.mu, started.cv,
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(started.mu) { return started.names.size() == 2; });
      return absl::OkStatus();
    };
  };
  Handled handled;
  Running running_first(first, handled.Handlers(both_started("c1")));
  Running running_second(second, handled.Handlers(both_started("c2")));
  ExpireOrders(kEvents);
  ASSERT_TRUE(handled.WaitForDeliveries(kEvents));
  EXPECT_TRUE(running_first.Stop().ok());
  EXPECT_TRUE(running_second.Stop().ok());

  std::set<std::string> keys;
  for (const Delivery& d : handled.deliveries()) keys.insert(d.event.key);
  EXPECT_EQ(keys.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(handled.deliveries().size(), static_cast<size_t>(kEvents));
  EXPECT_GT(first.stats().delivered, 0u);
  EXPECT_GT(second.stats().delivered, 0u);
  EXPECT_EQ(first.stats().acked + second.stats().acked, static_cast<uint64_t>(kEvents));
  const ConsumerGroupInfo group = Group();
  EXPECT_EQ(group.acked_total, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(group.pending, 0u);
}

TEST_F(ConsumerTest, AMissingGroupEndsTheConsumer) {
  ConsumerOptions options = Named("c1");
  options.group = "nope";
  Consumer consumer(client_, options);
  EXPECT_EQ(consumer.Next(kPatience).status().code(), absl::StatusCode::kNotFound);
  Handled handled;
  EXPECT_EQ(consumer.Run(handled.Handlers()).code(), absl::StatusCode::kNotFound);

  ConsumerOptions unnamed = Named("");
  Consumer nameless(client_, unnamed);
  const absl::Status status = nameless.Next(kPatience).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ConsumerOptions::consumer"));
}

TEST_F(ConsumerTest, StopReleasesTheDeliveriesNotHandedOut) {
  ExpireOrders(3);
  Consumer consumer(client_, Named("c1"));
  absl::StatusOr<Delivery> d = consumer.Next(kPatience);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(consumer.Ack(*d).ok());
  consumer.Stop();
  EXPECT_EQ(consumer.Next(kPatience).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(consumer.stats().nacked, 2u);
  // The two never handed out were nacked: the next consumer gets them now.
  Consumer next(client_, Named("c2"));
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Delivery> again = next.Next(kPatience);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->delivery_count, 2u);
  }
}

class SmallRetentionConsumerTest : public ConsumerTest {
 protected:
  static ServerOptions TwoEvents() {
    ServerOptions options = testing::TestOptions();
    options.store.event_retention_events = 2;
    return options;
  }
  SmallRetentionConsumerTest() : ConsumerTest(TwoEvents()) {}
};

TEST_F(SmallRetentionConsumerTest, EventsLostToRetentionAreReportedOnceByNext) {
  ExpireOrders(5);
  const uint64_t oldest = server_.server().store().events().oldest_retained_sequence();
  Consumer consumer(client_, Named("c1"));
  const absl::Status lost = consumer.Next(kPatience).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  EXPECT_THAT(lost.message(), HasSubstr(absl::StrCat("events ", oldest - 3, " to ", oldest - 1,
                                                     " were discarded")));
  for (const char* key : {"o-3", "o-4"}) {
    absl::StatusOr<Delivery> d = consumer.Next(kPatience);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->event.key, key);
    EXPECT_TRUE(consumer.Ack(*d).ok());
  }
  EXPECT_EQ(consumer.stats().lost_sequences, 3u);
}

TEST_F(SmallRetentionConsumerTest, EventsLostToRetentionAreReportedOnceToTheHandler) {
  ExpireOrders(5);
  const uint64_t oldest = server_.server().store().events().oldest_retained_sequence();
  Consumer consumer(client_, Named("c1"));
  Handled handled;
  ConsumeHandlers handlers = handled.Handlers();
  Mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> lost;
  handlers.on_lost = [&](uint64_t first, uint64_t last) {
    MutexLock lock(&mu);
    lost.emplace_back(first, last);
  };
  Running running(consumer, handlers);
  ASSERT_TRUE(handled.WaitForDeliveries(2));
  EXPECT_TRUE(running.Stop().ok());
  MutexLock lock(&mu);
  EXPECT_THAT(lost, ElementsAre(std::make_pair(oldest - 3, oldest - 1)));
}

// ---- Against a durable lapsed that restarts ----------------------------------

TEST(ConsumerRestartTest, KeepsConsumingUnderItsNameAcrossADurableRestart) {
  testing::TempDir dir;
  const std::vector<std::string> flags = {absl::StrCat("--data-dir=", dir.path())};
  auto lapsed = std::make_unique<testing::LapsedProcess>(LAPSED_PATH, flags);
  const int port = lapsed->port();
  ASSERT_GT(port, 0);
  Client client(absl::StrCat("127.0.0.1:", port), TestClientOptions());
  ConsumerGroupOptions group;
  group.name = "g";
  ASSERT_TRUE(client.CreateConsumerGroup(group).ok());
  const auto expire = [&client](const std::vector<std::string>& keys) {
    std::vector<MemberWrite> writes;
    for (const std::string& key : keys) {
      MemberWrite write;
      write.key = key;
      writes.push_back(write);
    }
    // ListCollections is retried: it waits out a restart.
    ASSERT_TRUE(client.ListCollections().ok());
    ASSERT_TRUE(client.PutMembers("c", writes).ok());
    ASSERT_TRUE(client.ExpireMembers("c", keys, Expiration::At(absl::Now() - absl::Hours(1))).ok());
  };

  ASSERT_NO_FATAL_FAILURE(expire({"k1", "k2"}));
  Consumer consumer(client, Named("c1"));
  std::vector<std::string> keys;
  absl::StatusOr<Delivery> k1 = consumer.Next(kPatience);
  ASSERT_TRUE(k1.ok()) << k1.status();
  ASSERT_TRUE(consumer.Ack(*k1).ok());
  absl::StatusOr<Delivery> k2 = consumer.Next(kPatience);
  ASSERT_TRUE(k2.ok()) << k2.status();
  keys = {k1->event.key, k2->event.key};

  ASSERT_EQ(lapsed->Stop(), 0);
  lapsed = std::make_unique<testing::LapsedProcess>(LAPSED_PATH, flags, port);
  ASSERT_EQ(lapsed->port(), port);
  // k2's lease survived the restart and is still this consumer's.
  EXPECT_TRUE(consumer.Ack(*k2).ok());
  ASSERT_NO_FATAL_FAILURE(expire({"k3", "k4"}));
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Delivery> d = consumer.Next(kPatience);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->delivery_count, 1u);
    EXPECT_TRUE(consumer.Ack(*d).ok());
    keys.push_back(d->event.key);
  }
  EXPECT_THAT(keys, ElementsAre("k1", "k2", "k3", "k4"));
  EXPECT_GE(consumer.stats().reconnects, 1u);
  absl::StatusOr<ConsumerGroupInfo> info = client.GetConsumerGroup("g");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pending, 0u);
  consumer.Stop();
  EXPECT_EQ(lapsed->Stop(), 0);
}

}  // namespace
}  // namespace lapse::client

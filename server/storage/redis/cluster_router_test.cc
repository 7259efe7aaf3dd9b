#include "server/storage/redis/cluster_router.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/redis/key_slot.h"
#include "testing/redis_cluster.h"
#include "testing/test_util.h"

namespace lapse::redis {
namespace {

using ::lapse::testing::RedisCluster;
using ::lapse::testing::RedisClusterOptions;
using ::lapse::testing::WaitWithPatience;

// Calls answered by a router, collected for the test thread. The answers
// live as long as the last callback that may write one, so a test that gave
// up waiting does not leave a router writing into freed memory.
class Replies final {
 public:
  ClusterRouter::Done Expect() {
    MutexLock lock(&state_->mu);
    const size_t index = state_->results.size();
    state_->results.emplace_back();
    return [state = state_, index](absl::StatusOr<RedisReply> reply) {
      MutexLock lock(&state->mu);
      state->results[index] = std::move(reply);
      state->cv.SignalAll();
    };
  }

  // The answer to the index-th call, once it has come.
  absl::StatusOr<RedisReply> Get(size_t index) {
    State& s = *state_;
    MutexLock lock(&s.mu);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return s.results[index].has_value();
    };
    if (!WaitWithPatience(s.mu, s.cv, answered)) {
      return absl::DeadlineExceededError("no answer");
    }
    return *s.results[index];
  }

 private:
  struct State {
    Mutex mu;
    CondVar cv;
    std::vector<std::optional<absl::StatusOr<RedisReply>>> results ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

absl::StatusOr<RedisReply> Call(ClusterRouter& router, RedisCall call) {
  Replies replies;
  router.Send(std::move(call), replies.Expect());
  return replies.Get(0);
}

std::string Text(const absl::StatusOr<RedisReply>& reply) {
  if (!reply.ok()) return reply.status().ToString();
  return reply->type == RedisReply::Type::kInteger ? absl::StrCat(reply->integer) : reply->str;
}

class ClusterRouterTest : public ::testing::Test {
 protected:
  explicit ClusterRouterTest(RedisClusterOptions options = {}) : cluster_(std::move(options)) {}

  void SetUp() override {
    if (absl::IsFailedPrecondition(cluster_.status())) GTEST_SKIP() << cluster_.status();
    ASSERT_TRUE(cluster_.status().ok()) << cluster_.status();
  }

  RouterOptions Options() const {
    RouterOptions options;
    options.seeds = {cluster_.seeds()[0]};
    return options;
  }

  RedisCluster cluster_;
};

// A cluster whose nodes announce ::1: the seed, the slot map and every MOVED
// and ASK name IPv6 endpoints, which the router parses and dials.
class ClusterRouterIpv6Test : public ClusterRouterTest {
 protected:
  ClusterRouterIpv6Test() : ClusterRouterTest({.ipv6 = true}) {}
};

TEST_F(ClusterRouterIpv6Test, TheSlotMapAndRedirectsNameIpv6Endpoints) {
  const int port = cluster_.MasterPorts()[0];
  const std::string slots = *cluster_.Command(port, {"CLUSTER", "SLOTS"});
  EXPECT_TRUE(absl::StrContains(slots, "::1")) << slots;
  EXPECT_FALSE(absl::StrContains(slots, "127.0.0.1")) << slots;
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    if (cluster_.MasterOf(absl::StrCat("key", i)) != port) key = absl::StrCat("key", i);
  }
  const std::string moved = *cluster_.Command(port, {"GET", key});
  EXPECT_TRUE(absl::StartsWith(moved, absl::StrCat("MOVED ", KeySlot(key), " ::1:"))) << moved;
}

// The router on a cluster whose nodes announce 127.0.0.1, and on one whose
// nodes announce ::1.
class ClusterRouterAddressTest : public ClusterRouterTest,
                                 public ::testing::WithParamInterface<bool> {
 protected:
  ClusterRouterAddressTest() : ClusterRouterTest({.ipv6 = GetParam()}) {}
};

// Keys 0 to 29 each land on the master of their slot, and they cover every
// master.
TEST_P(ClusterRouterAddressTest, RoutesEveryKeyToTheMasterOfItsSlot) {
  ClusterRouter router(Options());
  std::vector<int> owners;
  for (int i = 0; i < 30; ++i) {
    const std::string key = absl::StrCat("key", i);
    EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, absl::StrCat(i)}))), "OK");
    const int owner = cluster_.MasterOf(key);
    absl::StatusOr<std::string> stored = cluster_.Command(owner, {"GET", key});
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(*stored, absl::StrCat(i));
    if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
  }
  EXPECT_EQ(owners.size(), RedisCluster::kMasters);
}

// A key's slot moved to another master by hand while the router uses it: ASK
// while the slot migrates, MOVED once it has.
TEST_P(ClusterRouterAddressTest, FollowsAskAndMovedWhileASlotMigrates) {
  ClusterRouter router(Options());
  const std::string key = "migrating";
  ASSERT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, "v"}))), "OK");
  const int source = cluster_.MasterOf(key);
  const int target = cluster_.AnotherMaster(source);
  const std::string slot = absl::StrCat(KeySlot(key));
  const std::string source_id = *cluster_.Command(source, {"CLUSTER", "MYID"});
  const std::string target_id = *cluster_.Command(target, {"CLUSTER", "MYID"});
  ASSERT_EQ(*cluster_.Command(target, {"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id}), "OK");
  ASSERT_EQ(*cluster_.Command(source, {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), "OK");
  ASSERT_EQ(*cluster_.Command(source, {"MIGRATE", "127.0.0.1", absl::StrCat(target), "", "0",
                                       "5000", "KEYS", key}),
            "OK");
  // The source no longer has the key and the slot is migrating: ASK.
  EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"GET", key}))), "v");

  for (int port : cluster_.MasterPorts()) {
    ASSERT_EQ(*cluster_.Command(port, {"CLUSTER", "SETSLOT", slot, "NODE", target_id}), "OK");
  }
  // The router still sends the key to the source, which answers MOVED.
  EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, "w"}))), "OK");
  EXPECT_EQ(*cluster_.Command(target, {"GET", key}), "w");
}

INSTANTIATE_TEST_SUITE_P(Ipv4AndIpv6, ClusterRouterAddressTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Ipv6" : "Ipv4";
                         });

TEST_F(ClusterRouterTest, LoadsAScriptAgainAfterScriptFlush) {
  ClusterRouter router(Options());
  const RedisScript script("return ARGV[1]");
  EXPECT_EQ(Text(Call(router, RedisCall::Eval(script, {"k"}, {"first"}))), "first");
  for (int port : cluster_.MasterPorts()) {
    ASSERT_EQ(*cluster_.Command(port, {"SCRIPT", "FLUSH"}), "OK");
  }
  EXPECT_EQ(Text(Call(router, RedisCall::Eval(script, {"k"}, {"second"}))), "second");
}

TEST_F(ClusterRouterTest, AScriptErrorIsAReply) {
  ClusterRouter router(Options());
  const RedisScript script("return redis.error_reply('BAD thing')");
  absl::StatusOr<RedisReply> reply = Call(router, RedisCall::Eval(script, {"k"}, {}));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->type, RedisReply::Type::kError);
  EXPECT_EQ(reply->str, "BAD thing");
}

TEST_F(ClusterRouterTest, ResumesOnThePromotedReplicaAfterItsMasterIsKilled) {
  ClusterRouter router(Options());
  const std::string key = "survivor";
  ASSERT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, "kept"})
                                  .WaitForReplicas(1, absl::Seconds(5)))),
            "OK");
  cluster_.Kill(cluster_.MasterOf(key));

  EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"GET", key}).Idempotent())), "kept");
  EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, "new"}))), "OK");
  EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"GET", key}))), "new");
}

TEST_F(ClusterRouterTest, AWriteNotConfirmedByEnoughReplicasIsUnavailable) {
  ClusterRouter router(Options());
  absl::StatusOr<RedisReply> reply =
      Call(router,
           RedisCall::Command("k", {"SET", "k", "v"}).WaitForReplicas(2, absl::Milliseconds(50)));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "outcome is unknown")) << reply.status();
}

TEST_F(ClusterRouterTest, WritesThatNoReplicaConfirmsShareTheirWaits) {
  // WAIT 2 times out on every master (one replica each), and Redis holds a
  // connection's later commands behind a blocked WAIT: with a WAIT per call
  // these writes would take kWrites timeouts; sharing, at most two.
  ClusterRouter router(Options());
  constexpr int kWrites = 20;
  const absl::Duration timeout = absl::Milliseconds(250);
  Replies replies;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kWrites; ++i) {
    router.Send(RedisCall::Command("k", {"INCR", "k"}).WaitForReplicas(2, timeout),
                replies.Expect());
  }
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(replies.Get(i).status().code(), absl::StatusCode::kUnavailable);
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, kWrites / 2 * timeout);
  EXPECT_EQ(*cluster_.Command(cluster_.MasterOf("k"), {"GET", "k"}), absl::StrCat(kWrites));
}

TEST_F(ClusterRouterTest, AReplyLargerThanTheBoundFailsResourceExhausted) {
  RouterOptions options = Options();
  options.max_reply_bytes = 100000;
  ClusterRouter router(options);
  const std::string big(300000, 'x');
  ASSERT_EQ(Text(Call(router, RedisCall::Command("big", {"SET", "big", big}))), "OK");
  EXPECT_EQ(Call(router, RedisCall::Command("big", {"GET", "big"})).status().code(),
            absl::StatusCode::kResourceExhausted);
  // The connection is opened again for the next call.
  EXPECT_EQ(Text(Call(router, RedisCall::Command("big", {"STRLEN", "big"}))), "300000");
}

TEST_F(ClusterRouterTest, CallsPastTheBoundsFailResourceExhausted) {
  RouterOptions options = Options();
  options.max_in_flight_per_node = 1;
  options.max_calls = 2;
  ClusterRouter router(options);
  Replies replies;
  // Blocks its node until the list gets an element.
  router.Send(RedisCall::Command("list", {"BLPOP", "list", "0"}), replies.Expect());
  router.Send(RedisCall::Command("list", {"GET", "list"}), replies.Expect());
  router.Send(RedisCall::Command("other", {"GET", "other"}), replies.Expect());
  EXPECT_EQ(replies.Get(1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(replies.Get(2).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(cluster_.Command(cluster_.MasterOf("list"), {"LPUSH", "list", "x"}).ok());
  absl::StatusOr<RedisReply> popped = replies.Get(0);
  ASSERT_TRUE(popped.ok()) << popped.status();
  ASSERT_EQ(popped->elements.size(), 2u);
  EXPECT_EQ(popped->elements[1].str, "x");
}

TEST_F(ClusterRouterTest, DestroyingTheRouterFailsPendingCallsUnavailable) {
  Replies replies;
  {
    ClusterRouter router(Options());
    router.Send(RedisCall::Command("list", {"BLPOP", "list", "0"}), replies.Expect());
  }
  EXPECT_EQ(replies.Get(0).status().code(), absl::StatusCode::kUnavailable);
}

// What a subscription got, for the test thread.
class Messages final {
 public:
  struct State {
    Mutex mu;
    CondVar cv;
    std::vector<std::string> messages ABSL_GUARDED_BY(mu);
    int subscribed ABSL_GUARDED_BY(mu) = 0;
  };

  void Subscribe(ClusterRouter& router, const std::string& channel) {
    router.Subscribe(
        channel,
        [state = state_](absl::string_view message) {
          MutexLock lock(&state->mu);
          state->messages.emplace_back(message);
          state->cv.SignalAll();
        },
        [state = state_] {
          MutexLock lock(&state->mu);
          ++state->subscribed;
          state->cv.SignalAll();
        });
  }
  bool WaitForSubscribed(int times) {
    State& s = *state_;
    MutexLock lock(&s.mu);
    return WaitWithPatience(
        s.mu, s.cv, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.subscribed >= times; });
  }
  std::vector<std::string> WaitForMessages(size_t n) {
    State& s = *state_;
    MutexLock lock(&s.mu);
    WaitWithPatience(s.mu, s.cv,
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.messages.size() >= n; });
    return s.messages;
  }

 private:
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Publishes `message` on `channel` through `router`, to one subscriber, and
// waits until `messages` has heard it: `heard` is all it should have by then.
void PublishAndHear(ClusterRouter& router, const std::string& channel, const std::string& message,
                    Messages& messages, const std::vector<std::string>& heard) {
  EXPECT_EQ(Text(Call(router, RedisCall::Command(channel, {"SPUBLISH", channel, message}))), "1");
  EXPECT_EQ(messages.WaitForMessages(heard.size()), heard);
}

TEST_F(ClusterRouterTest, ASubscriptionFollowsItsChannelToThePromotedReplica) {
  ClusterRouter router(Options());
  const std::string channel = "wake{tag}";
  Messages messages;
  messages.Subscribe(router, channel);
  ASSERT_TRUE(messages.WaitForSubscribed(1));
  PublishAndHear(router, channel, "one", messages, {"one"});

  cluster_.Kill(cluster_.MasterOf(channel));
  ASSERT_TRUE(cluster_.WaitForClusterOk());
  ASSERT_TRUE(messages.WaitForSubscribed(2));
  PublishAndHear(router, channel, "two", messages, {"one", "two"});
}

TEST(ClusterRouterAuthTest, SendsThePasswordOnEveryConnectionItOpens) {
  RedisCluster cluster({.password = "s3cret"});
  ASSERT_TRUE(cluster.status().ok()) << cluster.status();
  ClusterRouter router({.seeds = {cluster.seeds()[0]}, .password = "s3cret"});
  // Keys on every master: a connection to each.
  for (int i = 0; i < 30; ++i) {
    const std::string key = absl::StrCat("key", i);
    EXPECT_EQ(Text(Call(router, RedisCall::Command(key, {"SET", key, "v"}))), "OK") << key;
  }
  const std::string channel = "wake{tag}";
  Messages messages;
  messages.Subscribe(router, channel);
  ASSERT_TRUE(messages.WaitForSubscribed(1));
  PublishAndHear(router, channel, "one", messages, {"one"});
}

TEST(ClusterRouterAuthTest, AMissingOrWrongPasswordFailsAtOnceUnauthenticated) {
  RedisCluster cluster({.password = "s3cret"});
  ASSERT_TRUE(cluster.status().ok()) << cluster.status();
  // Not transient: UNAUTHENTICATED with Redis's answer, not UNAVAILABLE once
  // the (default, 15 s) retry budget is spent.
  for (const auto& [password, says] :
       {std::pair<std::string, std::string>{"", "NOAUTH"}, {"wrong", "WRONGPASS"}}) {
    ClusterRouter router({.seeds = {cluster.seeds()[0]}, .password = password});
    const absl::StatusOr<RedisReply> reply =
        Call(router, RedisCall::Command("key0", {"GET", "key0"}));
    EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnauthenticated) << Text(reply);
    EXPECT_TRUE(absl::StrContains(reply.status().message(), says)) << Text(reply);
  }
}

TEST(ClusterRouterAuthTest, APasswordChangedUnderItFailsItsCallsUnauthenticatedOnceItReconnects) {
  RedisCluster cluster({.password = "s3cret"});
  ASSERT_TRUE(cluster.status().ok()) << cluster.status();
  ClusterRouter router({.seeds = {cluster.seeds()[0]}, .password = "s3cret"});
  EXPECT_EQ(Text(Call(router, RedisCall::Command("key0", {"SET", "key0", "v"}))), "OK");
  // The slot map is known now: the refusal comes in the call's own reply.
  ASSERT_TRUE(
      cluster.Command(cluster.MasterOf("key0"), {"CONFIG", "SET", "requirepass", "n3w"}).ok());
  // The router's connection, authenticated before the change, is closed
  // (the CLIENT KILL's own answer may be lost with it). The GET may be
  // written before the router sees that: idempotent, it is sent again on the
  // next connection, whose AUTH is refused.
  Call(router, RedisCall::Command("key0", {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"}))
      .IgnoreError();
  const absl::StatusOr<RedisReply> reply =
      Call(router, RedisCall::Command("key0", {"GET", "key0"}).Idempotent());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnauthenticated) << Text(reply);
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "refused the password: WRONGPASS"))
      << Text(reply);
}

}  // namespace
}  // namespace lapse::redis

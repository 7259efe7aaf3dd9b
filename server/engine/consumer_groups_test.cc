#include "server/engine/consumer_groups.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/event_feed.h"
#include "server/engine/expirer.h"
#include "server/engine/journal.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);
constexpr absl::Duration kVisibility = absl::Seconds(30);

ExpiryEvent Event(absl::string_view collection, absl::string_view key) {
  ExpiryEvent e;
  e.collection = std::string(collection);
  e.key = std::string(key);
  e.value = absl::StrCat("value of ", key);
  return e;
}

ConsumerGroupOptions WithValues(ConsumerGroupOptions options = {}) {
  options.filter.include_values = true;
  return options;
}

std::vector<std::string> KeysOf(const PollResult& result) {
  std::vector<std::string> keys;
  for (const Delivery& d : result.deliveries) keys.push_back(d.event.key);
  return keys;
}

std::vector<LeaseRef> RefsOf(const PollResult& result) {
  std::vector<LeaseRef> refs;
  for (const Delivery& d : result.deliveries) {
    refs.push_back({.sequence = d.event.sequence, .delivery_count = d.delivery_count});
  }
  return refs;
}

// Records the groups announced as readable.
class Announcements {
 public:
  std::function<void(absl::string_view)> Listener() {
    return [this](absl::string_view group) {
      MutexLock lock(&mu_);
      groups_.emplace_back(group);
      cv_.SignalAll();
    };
  }
  std::vector<std::string> Take() {
    MutexLock lock(&mu_);
    return std::exchange(groups_, {});
  }
  bool AwaitAny() {
    MutexLock lock(&mu_);
    auto announced = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !groups_.empty(); };
    return testing::WaitWithPatience(mu_, cv_, announced);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::string> groups_ ABSL_GUARDED_BY(mu_);
};

class ConsumerGroupsTest : public ::testing::Test {
 protected:
  explicit ConsumerGroupsTest(Limits limits = {}, EventFeed::Options feed = {})
      : feed_(feed),
        groups_({.limits = limits, .on_readable = announcements_.Listener()}, &clock_, &feed_) {}

  // Appends events "k<first>".."k<last>" in collection `collection`.
  void Expire(absl::string_view collection, int first, int last) {
    std::vector<ExpiryEvent> events;
    for (int i = first; i <= last; ++i) events.push_back(Event(collection, absl::StrCat("k", i)));
    feed_.Append(std::move(events));
  }

  void CreateGroup(absl::string_view name, ConsumerGroupOptions options = {},
                   GroupStart start = {}) {
    ASSERT_TRUE(groups_.Create(name, options, start).ok());
  }

  PollResult Poll(absl::string_view group, absl::string_view consumer, size_t max = 100) {
    absl::StatusOr<PollResult> result = groups_.Poll(group, consumer, max);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : PollResult{};
  }

  std::vector<absl::Status> Ack(absl::string_view group, absl::string_view consumer,
                                const std::vector<LeaseRef>& refs) {
    absl::StatusOr<std::vector<absl::Status>> acked = groups_.Ack(group, consumer, refs);
    EXPECT_TRUE(acked.ok()) << acked.status();
    return acked.ok() ? *std::move(acked) : std::vector<absl::Status>{};
  }

  ConsumerGroupInfo Info(absl::string_view group) {
    absl::StatusOr<ConsumerGroupInfo> info = groups_.Get(group, 1000);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *std::move(info) : ConsumerGroupInfo{};
  }

  FakeClock clock_{kStart};
  EventFeed feed_;
  Announcements announcements_;
  ConsumerGroups groups_;
};

TEST_F(ConsumerGroupsTest, EachEventGoesToOneConsumerOfTheGroup) {
  CreateGroup("g");
  Expire("c", 1, 5);
  PollResult a = Poll("g", "a", 3);
  PollResult b = Poll("g", "b", 3);
  EXPECT_THAT(KeysOf(a), ElementsAre("k1", "k2", "k3"));
  EXPECT_THAT(KeysOf(b), ElementsAre("k4", "k5"));
  EXPECT_THAT(KeysOf(Poll("g", "c")), IsEmpty());
  for (const Delivery& d : a.deliveries) {
    EXPECT_EQ(d.delivery_count, 1u);
    EXPECT_EQ(d.lease_deadline, kStart + kVisibility);
  }
  EXPECT_EQ(Info("g").pending, 5u);
}

TEST_F(ConsumerGroupsTest, AnAckedEventIsNeverDeliveredAgain) {
  CreateGroup("g");
  Expire("c", 1, 2);
  PollResult got = Poll("g", "a");
  for (const absl::Status& s : Ack("g", "a", RefsOf(got))) EXPECT_TRUE(s.ok()) << s;
  clock_.Advance(kVisibility * 10);
  EXPECT_EQ(groups_.ExpireLeases(), 0u);
  EXPECT_THAT(KeysOf(Poll("g", "b")), IsEmpty());
  const ConsumerGroupInfo info = Info("g");
  EXPECT_EQ(info.pending, 0u);
  EXPECT_EQ(info.acked_total, 2u);
  EXPECT_EQ(info.bytes, 0u);
}

TEST_F(ConsumerGroupsTest, AnExpiredLeaseIsRedeliveredWithTheNextDeliveryCount) {
  CreateGroup("g", WithValues());
  Expire("c", 1, 2);
  PollResult first = Poll("g", "a");
  ASSERT_EQ(first.deliveries.size(), 2u);
  clock_.Advance(kVisibility - absl::Milliseconds(1));
  EXPECT_EQ(groups_.ExpireLeases(), 0u);
  EXPECT_THAT(KeysOf(Poll("g", "b")), IsEmpty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(groups_.ExpireLeases(), 2u);
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
  Expire("c", 3, 3);
  PollResult second = Poll("g", "b");
  // Redeliveries come before new events.
  EXPECT_THAT(KeysOf(second), ElementsAre("k1", "k2", "k3"));
  EXPECT_EQ(second.deliveries[0].delivery_count, 2u);
  EXPECT_EQ(second.deliveries[0].event.value, "value of k1");
  EXPECT_EQ(second.deliveries[2].delivery_count, 1u);
}

TEST_F(ConsumerGroupsTest, ALeaseThatAFailingOperationExpiredIsStillAnnounced) {
  CreateGroup("g");
  Expire("c", 1, 1);
  Poll("g", "a");
  announcements_.Take();
  clock_.Advance(kVisibility);
  EXPECT_EQ(groups_.Poll("missing", "a", 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
}

TEST_F(ConsumerGroupsTest, DeletingAGroupIsAnnouncedSoItsWaitersLearnItIsGone) {
  CreateGroup("g");
  announcements_.Take();
  ASSERT_TRUE(groups_.Delete("g").ok());
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
  EXPECT_EQ(groups_.Delete("g").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(announcements_.Take(), ::testing::IsEmpty());
}

TEST_F(ConsumerGroupsTest, AnAckOfALostLeaseIsRefusedWithFailedPrecondition) {
  CreateGroup("g");
  Expire("c", 1, 1);
  PollResult first = Poll("g", "a");
  clock_.Advance(kVisibility);
  // No ExpireLeases: the Ack itself sees the deadline has passed.
  std::vector<absl::Status> late = Ack("g", "a", RefsOf(first));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late[0].message(), HasSubstr("awaits redelivery"));
  EXPECT_THAT(late[0].message(), HasSubstr("handled more than once"));

  PollResult second = Poll("g", "b");
  ASSERT_EQ(second.deliveries.size(), 1u);
  std::vector<absl::Status> stolen = Ack("g", "a", RefsOf(first));
  EXPECT_EQ(stolen[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stolen[0].message(), HasSubstr("delivery 2 of it is leased to consumer \"b\""));
  // The same consumer with a stale delivery count is refused too.
  std::vector<absl::Status> stale =
      Ack("g", "b", {{.sequence = second.deliveries[0].event.sequence, .delivery_count = 1}});
  EXPECT_EQ(stale[0].code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_TRUE(Ack("g", "b", RefsOf(second))[0].ok());
  std::vector<absl::Status> again = Ack("g", "b", RefsOf(second));
  EXPECT_EQ(again[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again[0].message(), HasSubstr("acknowledged already"));
  std::vector<absl::Status> never = Ack("g", "b", {{.sequence = 999, .delivery_count = 1}});
  EXPECT_THAT(never[0].message(), HasSubstr("has not delivered it"));
}

TEST_F(ConsumerGroupsTest, ANackReleasesTheLeaseAtOnce) {
  CreateGroup("g");
  Expire("c", 1, 1);
  PollResult first = Poll("g", "a");
  absl::StatusOr<std::vector<absl::Status>> nacked = groups_.Nack("g", "a", RefsOf(first));
  ASSERT_TRUE(nacked.ok());
  EXPECT_TRUE((*nacked)[0].ok());
  PollResult second = Poll("g", "b");
  ASSERT_EQ(second.deliveries.size(), 1u);
  EXPECT_EQ(second.deliveries[0].delivery_count, 2u);
}

TEST_F(ConsumerGroupsTest, AnExtendedLeaseOutlivesTheVisibilityTimeout) {
  CreateGroup("g");
  Expire("c", 1, 1);
  PollResult got = Poll("g", "a");
  clock_.Advance(kVisibility - absl::Seconds(1));
  absl::StatusOr<std::vector<absl::Status>> extended =
      groups_.ExtendLeases("g", "a", RefsOf(got), absl::Minutes(5));
  ASSERT_TRUE(extended.ok());
  EXPECT_TRUE((*extended)[0].ok());
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(groups_.ExpireLeases(), 0u);
  EXPECT_EQ(groups_.NextLeaseDeadline(),
            kStart + kVisibility - absl::Seconds(1) + absl::Minutes(5));
  EXPECT_TRUE(Ack("g", "a", RefsOf(got))[0].ok());
  EXPECT_EQ(groups_.NextLeaseDeadline(), NoDeadline());
}

TEST_F(ConsumerGroupsTest, AnEventIsDeadLetteredAfterMaxDeliveriesAndRedrivenOnRequest) {
  CreateGroup("g", WithValues({.max_deliveries = 2}));
  Expire("c", 1, 2);
  PollResult got = Poll("g", "a");
  ASSERT_TRUE(Ack("g", "a", {RefsOf(got)[1]})[0].ok());
  clock_.Advance(kVisibility);
  EXPECT_EQ(Poll("g", "a").deliveries.at(0).delivery_count, 2u);
  clock_.Advance(kVisibility);
  EXPECT_EQ(groups_.ExpireLeases(), 1u);
  EXPECT_THAT(KeysOf(Poll("g", "a")), IsEmpty());
  ConsumerGroupInfo info = Info("g");
  EXPECT_EQ(info.pending, 0u);
  EXPECT_EQ(info.dead_lettered, 1u);

  absl::StatusOr<DeadLetterPage> letters = groups_.ListDeadLetters("g", 0, 0);
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->letters.size(), 1u);
  EXPECT_EQ(letters->letters[0].event.key, "k1");
  EXPECT_EQ(letters->letters[0].event.value, "value of k1");
  EXPECT_EQ(letters->letters[0].delivery_count, 2u);
  EXPECT_EQ(letters->letters[0].consumer, "a");
  EXPECT_EQ(letters->letters[0].dead_lettered_at, kStart + 2 * kVisibility);
  EXPECT_FALSE(letters->next_after.has_value());

  announcements_.Take();
  absl::StatusOr<size_t> redriven = groups_.RedriveDeadLetters("g", {});
  ASSERT_TRUE(redriven.ok());
  EXPECT_EQ(*redriven, 1u);
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
  PollResult again = Poll("g", "b");
  ASSERT_EQ(again.deliveries.size(), 1u);
  EXPECT_EQ(again.deliveries[0].event.key, "k1");
  EXPECT_EQ(again.deliveries[0].delivery_count, 1u);
  EXPECT_TRUE(Ack("g", "b", RefsOf(again))[0].ok());
  info = Info("g");
  EXPECT_EQ(info.dead_lettered, 0u);
  EXPECT_EQ(info.bytes, 0u);
}

TEST_F(ConsumerGroupsTest, ANackAtMaxDeliveriesDeadLettersTheEvent) {
  CreateGroup("g", {.max_deliveries = 1});
  Expire("c", 1, 1);
  ASSERT_TRUE(groups_.Nack("g", "a", RefsOf(Poll("g", "a"))).ok());
  EXPECT_EQ(Info("g").dead_lettered, 1u);
}

TEST_F(ConsumerGroupsTest, RedriveNamesSequencesAndSkipsOthers) {
  CreateGroup("g", {.max_deliveries = 1});
  Expire("c", 1, 3);
  ASSERT_TRUE(groups_.Nack("g", "a", RefsOf(Poll("g", "a"))).ok());
  const uint64_t k2 = feed_.last_sequence() - 1;
  absl::StatusOr<size_t> redriven = groups_.RedriveDeadLetters("g", {k2, 12345});
  ASSERT_TRUE(redriven.ok());
  EXPECT_EQ(*redriven, 1u);
  EXPECT_THAT(KeysOf(Poll("g", "a")), ElementsAre("k2"));
  absl::StatusOr<DeadLetterPage> page = groups_.ListDeadLetters("g", 0, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->letters.size(), 1u);
  EXPECT_EQ(page->letters[0].event.key, "k1");
  ASSERT_TRUE(page->next_after.has_value());
  page = groups_.ListDeadLetters("g", *page->next_after, 1);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->letters.at(0).event.key, "k3");
}

TEST_F(ConsumerGroupsTest, AConsumerHoldsAtMostMaxUnackedEvents) {
  CreateGroup("g", {.max_unacked_per_consumer = 2});
  Expire("c", 1, 5);
  PollResult first = Poll("g", "a", 10);
  EXPECT_THAT(KeysOf(first), ElementsAre("k1", "k2"));
  EXPECT_THAT(KeysOf(Poll("g", "a", 10)), IsEmpty());
  // Another consumer has its own allowance.
  EXPECT_THAT(KeysOf(Poll("g", "b", 10)), ElementsAre("k3", "k4"));
  announcements_.Take();
  ASSERT_TRUE(Ack("g", "a", {RefsOf(first)[0]})[0].ok());
  // The ack is announced: a consumer waiting for room may poll again.
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
  EXPECT_THAT(KeysOf(Poll("g", "a", 10)), ElementsAre("k5"));
}

TEST_F(ConsumerGroupsTest, APollHandsOutNoMoreThanMaxEvents) {
  CreateGroup("g");
  Expire("c", 1, 5);
  EXPECT_EQ(Poll("g", "a", 2).deliveries.size(), 2u);
}

TEST_F(ConsumerGroupsTest, TheFilterSelectsCollectionsOrAPrefix) {
  ConsumerGroupOptions by_name;
  by_name.filter.collections = {"orders", "carts"};
  CreateGroup("named", by_name);
  ConsumerGroupOptions by_prefix;
  by_prefix.filter.prefix = "ord";
  by_prefix.filter.include_values = true;
  CreateGroup("prefixed", by_prefix);
  Expire("orders", 1, 1);
  Expire("sessions", 2, 2);
  Expire("carts", 3, 3);
  Expire("ordinals", 4, 4);
  PollResult named = Poll("named", "a");
  EXPECT_THAT(KeysOf(named), ElementsAre("k1", "k3"));
  EXPECT_EQ(named.deliveries[0].event.value, "");
  PollResult prefixed = Poll("prefixed", "a");
  EXPECT_THAT(KeysOf(prefixed), ElementsAre("k1", "k4"));
  EXPECT_EQ(prefixed.deliveries[0].event.value, "value of k1");
  EXPECT_EQ(Info("named").position, feed_.last_sequence());
}

TEST_F(ConsumerGroupsTest, TwoGroupsAndAPlainReaderReadTheSameEventsIndependently) {
  Expire("c", 1, 1);
  const uint64_t before = feed_.last_sequence();
  CreateGroup("g1");
  CreateGroup("g2");
  Expire("c", 2, 4);
  PollResult g1 = Poll("g1", "a");
  for (const absl::Status& s : Ack("g1", "a", RefsOf(g1))) EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(KeysOf(g1), ElementsAre("k2", "k3", "k4"));
  EXPECT_THAT(KeysOf(Poll("g2", "a")), ElementsAre("k2", "k3", "k4"));
  absl::StatusOr<EventBatch> plain = feed_.Read(before - 1, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->events.size(), 4u);
  EXPECT_EQ(Info("g2").pending, 3u);
  EXPECT_EQ(Info("g1").pending, 0u);
}

TEST_F(ConsumerGroupsTest, StartPositionsChooseTheFirstEvent) {
  Expire("c", 1, 3);
  const uint64_t k1 = feed_.last_sequence() - 2;
  CreateGroup("new");
  CreateGroup("oldest", {}, {.kind = GroupStart::Kind::kOldest});
  CreateGroup("after", {}, {.kind = GroupStart::Kind::kAfterSequence, .after_sequence = k1});
  Expire("c", 4, 4);
  EXPECT_THAT(KeysOf(Poll("new", "a")), ElementsAre("k4"));
  EXPECT_THAT(KeysOf(Poll("oldest", "a")), ElementsAre("k1", "k2", "k3", "k4"));
  EXPECT_THAT(KeysOf(Poll("after", "a")), ElementsAre("k2", "k3", "k4"));
  absl::StatusOr<ConsumerGroupInfo> beyond = groups_.Create(
      "beyond", {}, {.kind = GroupStart::Kind::kAfterSequence, .after_sequence = k1 + 100});
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ConsumerGroupsTest, ResetMovesThePositionAndDropsPendingEvents) {
  CreateGroup("g");
  Expire("c", 1, 3);
  PollResult got = Poll("g", "a");
  ASSERT_TRUE(groups_.Reset("g", {.kind = GroupStart::Kind::kOldest}).ok());
  EXPECT_EQ(Ack("g", "a", RefsOf(got))[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(groups_.NextLeaseDeadline(), NoDeadline());
  EXPECT_THAT(KeysOf(Poll("g", "b")), ElementsAre("k1", "k2", "k3"));
  ASSERT_TRUE(groups_.Reset("g", {}).ok());
  EXPECT_EQ(Info("g").pending, 0u);
  EXPECT_EQ(Info("g").consumers.at(0).unacked, 0u);
  EXPECT_THAT(KeysOf(Poll("g", "b")), IsEmpty());
}

TEST_F(ConsumerGroupsTest, DeleteForgetsTheGroupAndItsLeases) {
  CreateGroup("g");
  Expire("c", 1, 1);
  Poll("g", "a");
  ASSERT_TRUE(groups_.Delete("g").ok());
  EXPECT_EQ(groups_.NextLeaseDeadline(), NoDeadline());
  EXPECT_EQ(groups_.Get("g").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(groups_.Poll("g", "a", 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(groups_.Delete("g").status().code(), absl::StatusCode::kNotFound);
  CreateGroup("g");
}

TEST_F(ConsumerGroupsTest, InfoShowsConsumersLeasesAndLag) {
  CreateGroup("g", {.max_unacked_per_consumer = 1});
  Expire("c", 1, 3);
  Poll("g", "b");
  Poll("g", "a");
  const ConsumerGroupInfo info = Info("g");
  EXPECT_EQ(info.lag, 1u);
  EXPECT_EQ(info.delivered_total, 2u);
  ASSERT_EQ(info.consumers.size(), 2u);
  EXPECT_EQ(info.consumers[0].name, "a");
  EXPECT_EQ(info.consumers[0].unacked, 1u);
  ASSERT_EQ(info.leases.size(), 2u);
  EXPECT_EQ(info.leases[0].consumer, "b");
  EXPECT_EQ(info.leases[0].deadline, kStart + kVisibility);
  EXPECT_THAT(groups_.Get("g", 1)->leases, ::testing::SizeIs(1));

  CreateGroup("h");
  absl::StatusOr<ConsumerGroups::Page> page = groups_.List(1, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->groups.size(), 1u);
  EXPECT_EQ(page->groups[0].name, "g");
  EXPECT_THAT(page->groups[0].leases, IsEmpty());
  ASSERT_TRUE(page->next_after.has_value());
  page = groups_.List(1, *page->next_after);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->groups.at(0).name, "h");
  EXPECT_FALSE(page->next_after.has_value());
}

TEST_F(ConsumerGroupsTest, ALeaseDeadlineEarlierThanAllOthersIsAnnouncedToTheListener) {
  std::vector<absl::Time> earlier;
  ConsumerGroups groups({.earlier_deadline_listener = [&](absl::Time t) { earlier.push_back(t); }},
                        &clock_, &feed_);
  ASSERT_TRUE(groups.Create("slow", {.visibility_timeout = absl::Minutes(5)}, {}).ok());
  ASSERT_TRUE(groups.Create("fast", {.visibility_timeout = absl::Seconds(5)}, {}).ok());
  Expire("c", 1, 1);
  ASSERT_TRUE(groups.Poll("slow", "a", 1).ok());
  ASSERT_TRUE(groups.Poll("fast", "a", 1).ok());
  EXPECT_THAT(earlier, ElementsAre(kStart + absl::Minutes(5), kStart + absl::Seconds(5)));
  EXPECT_EQ(groups.NextLeaseDeadline(), kStart + absl::Seconds(5));
}

TEST_F(ConsumerGroupsTest, AnExpirerRedeliversWhenTheLeaseDeadlinePasses) {
  ExpirerWakeup wakeup;
  ConsumerGroups groups(
      {.on_readable = announcements_.Listener(), .earlier_deadline_listener = wakeup.Listener()},
      &clock_, &feed_);
  Expirer expirer(groups.Work(), &clock_, &wakeup);
  ASSERT_TRUE(groups.Create("g", {.visibility_timeout = kVisibility}, {}).ok());
  Expire("c", 1, 1);
  ASSERT_TRUE(groups.Poll("g", "a", 1).ok());
  clock_.Advance(kVisibility);
  expirer.Wake();
  ASSERT_TRUE(announcements_.AwaitAny());
  EXPECT_THAT(announcements_.Take(), ElementsAre("g"));
  absl::StatusOr<PollResult> again = groups.Poll("g", "b", 1);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->deliveries.size(), 1u);
  EXPECT_EQ(again->deliveries[0].delivery_count, 2u);
}

TEST_F(ConsumerGroupsTest, InvalidRequestsNameTheField) {
  auto message = [](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(message(groups_.Create("", {}, {}).status()), HasSubstr("name:"));
  EXPECT_THAT(message(groups_.Create("a b", {}, {}).status()), HasSubstr("name:"));
  EXPECT_THAT(
      message(groups_.Create("g", {.visibility_timeout = absl::ZeroDuration()}, {}).status()),
      HasSubstr("visibility_timeout:"));
  EXPECT_THAT(message(groups_.Create("g", {.visibility_timeout = absl::Hours(13)}, {}).status()),
              HasSubstr("visibility_timeout:"));
  EXPECT_THAT(message(groups_.Create("g", {.max_deliveries = 0}, {}).status()),
              HasSubstr("max_deliveries:"));
  EXPECT_THAT(message(groups_.Create("g", {.max_unacked_per_consumer = 0}, {}).status()),
              HasSubstr("max_unacked_per_consumer:"));
  ConsumerGroupOptions both;
  both.filter.collections = {"a"};
  both.filter.prefix = "b";
  EXPECT_THAT(message(groups_.Create("g", both, {}).status()), HasSubstr("collections:"));
  ConsumerGroupOptions bad_name;
  bad_name.filter.collections = {"no spaces"};
  EXPECT_THAT(message(groups_.Create("g", bad_name, {}).status()), HasSubstr("collections:"));
  CreateGroup("g");
  EXPECT_THAT(message(groups_.Poll("g", "", 1).status()), HasSubstr("consumer:"));
  EXPECT_THAT(message(groups_.Poll("g", "a", 0).status()), HasSubstr("max_events:"));
  EXPECT_THAT(message(groups_.Ack("g", "a", {}).status()), HasSubstr("leases:"));
  EXPECT_THAT(message(groups_.ExtendLeases("g", "a", {{1, 1}}, absl::ZeroDuration()).status()),
              HasSubstr("extension:"));
  EXPECT_THAT(message(groups_.ListDeadLetters("g", 0, -1).status()), HasSubstr("page_size"));
  EXPECT_EQ(groups_.Create("g", {}, {}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Info("g").consumers, IsEmpty());
}

class RetentionTest : public ConsumerGroupsTest {
 protected:
  RetentionTest() : ConsumerGroupsTest({}, {.max_events = 4}) {}
};

TEST_F(RetentionTest, EventsTheFeedDiscardedBeforeTheGroupReceivedThemAreReportedOnce) {
  CreateGroup("g");
  const uint64_t first = feed_.last_sequence() + 1;
  Expire("c", 1, 6);  // The feed keeps k3..k6.
  PollResult got = Poll("g", "a", 1);
  ASSERT_TRUE(got.lost.has_value());
  EXPECT_EQ(*got.lost, (LostRange{.first = first, .last = first + 1}));
  EXPECT_THAT(KeysOf(got), ElementsAre("k3"));
  PollResult next = Poll("g", "b");
  EXPECT_FALSE(next.lost.has_value());
  EXPECT_THAT(KeysOf(next), ElementsAre("k4", "k5", "k6"));
  const ConsumerGroupInfo info = Info("g");
  EXPECT_EQ(info.lost_sequences_total, 2u);
  EXPECT_EQ(info.pending, 4u);
}

TEST_F(RetentionTest, PendingEventsSurviveTheFeedDiscardingThem) {
  CreateGroup("g", WithValues());
  Expire("c", 1, 2);
  PollResult got = Poll("g", "a");
  Expire("c", 3, 10);
  clock_.Advance(kVisibility);
  PollResult again = Poll("g", "b", 2);
  EXPECT_THAT(KeysOf(again), ElementsAre("k1", "k2"));
  EXPECT_EQ(again.deliveries[0].event.value, "value of k1");
  // k3..k6 were discarded before the group received them.
  PollResult rest = Poll("g", "b");
  ASSERT_TRUE(rest.lost.has_value());
  EXPECT_EQ(rest.lost->last - rest.lost->first, 3u);
  EXPECT_THAT(KeysOf(rest), ElementsAre("k7", "k8", "k9", "k10"));
}

class BoundsTest : public ConsumerGroupsTest {
 protected:
  static Limits Small() {
    Limits limits;
    limits.max_consumer_groups = 2;
    limits.max_consumers_per_group = 2;
    limits.max_group_pending = 3;
    limits.max_group_dead_letters = 1;
    return limits;
  }
  BoundsTest() : ConsumerGroupsTest(Small()) {}
};

class ResponseBytesTest : public ConsumerGroupsTest {
 protected:
  static Limits Small() {
    Limits limits;
    limits.max_collection_name_bytes = 1;
    limits.max_key_bytes = 2;
    limits.max_value_bytes = 11;
    // Two events of collection "c", key "kN" and value "value of kN".
    limits.max_response_bytes = 2 * (1 + 2 + 11 + kResponseEntryOverhead);
    return limits;
  }
  ResponseBytesTest() : ConsumerGroupsTest(Small()) {}
};

TEST_F(ResponseBytesTest, APollAnswerFitsInOneResponse) {
  CreateGroup("g", WithValues());
  Expire("c", 1, 5);
  PollResult first = Poll("g", "a", 100);
  EXPECT_THAT(KeysOf(first), ElementsAre("k1", "k2"));
  ASSERT_TRUE(groups_.Nack("g", "a", RefsOf(first)).ok());
  // Redeliveries are cut the same way.
  EXPECT_THAT(KeysOf(Poll("g", "b", 100)), ElementsAre("k1", "k2"));
  EXPECT_THAT(KeysOf(Poll("g", "b", 100)), ElementsAre("k3", "k4"));
}

TEST_F(BoundsTest, GroupsPastTheLimitAreRefused) {
  CreateGroup("a");
  CreateGroup("b");
  absl::StatusOr<ConsumerGroupInfo> c = groups_.Create("c", {}, {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("max_consumer_groups"));
}

TEST_F(BoundsTest, AGroupStopsTakingNewEventsAtMaxPending) {
  CreateGroup("g");
  Expire("c", 1, 5);
  PollResult got = Poll("g", "a");
  EXPECT_THAT(KeysOf(got), ElementsAre("k1", "k2", "k3"));
  EXPECT_THAT(KeysOf(Poll("g", "b")), IsEmpty());
  ASSERT_TRUE(Ack("g", "a", {RefsOf(got)[0]})[0].ok());
  EXPECT_THAT(KeysOf(Poll("g", "b")), ElementsAre("k4"));
}

TEST_F(BoundsTest, AnIdleConsumerMakesRoomForANewOneAndBusyOnesDoNot) {
  CreateGroup("g");
  Expire("c", 1, 2);
  Poll("g", "a", 1);
  clock_.Advance(absl::Seconds(1));
  Poll("g", "b", 1);
  absl::StatusOr<PollResult> third = groups_.Poll("g", "c", 1);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("max_consumers_per_group"));
  clock_.Advance(kVisibility);
  EXPECT_TRUE(groups_.Poll("g", "c", 1).ok());
  std::vector<std::string> names;
  for (const ConsumerInfo& c : Info("g").consumers) names.push_back(c.name);
  EXPECT_THAT(names, UnorderedElementsAreArray({"b", "c"}));
}

TEST_F(BoundsTest, AnEventStaysPendingWhileTheDeadLetterListIsFull) {
  CreateGroup("g", {.max_deliveries = 1});
  Expire("c", 1, 2);
  ASSERT_TRUE(groups_.Nack("g", "a", RefsOf(Poll("g", "a"))).ok());
  const ConsumerGroupInfo info = Info("g");
  EXPECT_EQ(info.dead_lettered, 1u);
  EXPECT_EQ(info.pending, 1u);
  PollResult again = Poll("g", "a");
  EXPECT_THAT(KeysOf(again), ElementsAre("k2"));
  EXPECT_EQ(again.deliveries[0].delivery_count, 2u);
}

// Keeps every committed batch and its undo, and refuses changes when told.
class RecordingJournal final : public Journal {
 public:
  struct Committed {
    std::string batch;
    std::string undo;
  };

  CommitTicket Commit(absl::string_view batch, absl::string_view undo, uint64_t) override {
    committed_.push_back({std::string(batch), std::string(undo)});
    return committed_.size();
  }
  absl::Status status() const override { return status_; }

  void Refuse(absl::Status status) { status_ = std::move(status); }
  const std::vector<Committed>& committed() const { return committed_; }
  // The undo batches from the `first`th commit on, newest first, as a store
  // hands them to RollBack.
  std::vector<std::string> UndosFrom(size_t first) const {
    std::vector<std::string> undos;
    for (size_t i = committed_.size(); i > first; --i) undos.push_back(committed_[i - 1].undo);
    return undos;
  }

 private:
  std::vector<Committed> committed_;
  absl::Status status_;
};

// Every group's state, as ForEachStateRecord tells it, one line per record.
std::string Dump(const ConsumerGroups& groups) {
  std::string out;
  absl::Status s = groups.ForEachStateRecord([&](const JournalRecord& r) {
    absl::StrAppendFormat(&out, "%d %s pos=%d seq=%d %s/%s=%s count=%d consumer=%s at=%d\n",
                          static_cast<int>(r.type), r.group, r.position, r.sequence, r.collection,
                          r.key, r.value, r.delivery_count, r.consumer, r.at_ms);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void Replay(const std::string& batch, ConsumerGroups& groups) {
  absl::Status s = DecodeBatch(batch, [&](const JournalRecord& r) { return groups.Apply(r); });
  ASSERT_TRUE(s.ok()) << s;
}

class JournaledGroupsTest : public ::testing::Test {
 protected:
  JournaledGroupsTest() : groups_({.journal = &journal_}, &clock_, &feed_) {}

  void Expire(int first, int last) {
    std::vector<ExpiryEvent> events;
    for (int i = first; i <= last; ++i) events.push_back(Event("c", absl::StrCat("k", i)));
    feed_.Append(std::move(events));
  }
  std::vector<LeaseRef> PollRefs(absl::string_view group, absl::string_view consumer,
                                 size_t max = 100) {
    absl::StatusOr<PollResult> got = groups_.Poll(group, consumer, max);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? RefsOf(*got) : std::vector<LeaseRef>{};
  }

  // A bit of everything: two groups with leases, acks, a dead letter, a
  // redelivery, an extension, and a third group created and deleted.
  void Exercise() {
    ASSERT_TRUE(groups_.Create("a", WithValues({.max_deliveries = 1}), {}).ok());
    ASSERT_TRUE(groups_.Create("b", {}, {}).ok());
    ASSERT_TRUE(groups_.Create("gone", {}, {}).ok());
    Expire(1, 6);
    std::vector<LeaseRef> a = PollRefs("a", "w1", 3);
    ASSERT_TRUE(groups_.Ack("a", "w1", {a[0]}).ok());
    ASSERT_TRUE(groups_.Nack("a", "w1", {a[1]}).ok());  // Dead-lettered.
    ASSERT_TRUE(groups_.ExtendLeases("a", "w1", {a[2]}, absl::Minutes(10)).ok());
    PollRefs("a", "w2", 2);
    std::vector<LeaseRef> b = PollRefs("b", "w1");
    ASSERT_TRUE(groups_.Nack("b", "w1", {b[0]}).ok());  // Awaits redelivery.
    PollRefs("b", "w2", 1);
    PollRefs("gone", "w1");
    ASSERT_TRUE(groups_.Delete("gone").ok());
  }

  FakeClock clock_{kStart};
  EventFeed feed_{{}};
  RecordingJournal journal_;
  ConsumerGroups groups_;
};

TEST_F(JournaledGroupsTest, ReplayingTheJournalRebuildsEveryGroup) {
  Exercise();
  const std::string before = Dump(groups_);
  EXPECT_THAT(before, HasSubstr("consumer=w2"));
  ConsumerGroups replayed({}, &clock_, &feed_);
  for (const RecordingJournal::Committed& c : journal_.committed()) Replay(c.batch, replayed);
  EXPECT_EQ(Dump(replayed), before);
  absl::StatusOr<ConsumerGroupInfo> a = replayed.Get("a", 100);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->dead_lettered, 1u);
  EXPECT_EQ(a->position, feed_.last_sequence() - 1);  // k1..k5 received.
  EXPECT_EQ(replayed.Get("b")->awaiting_redelivery, 0u);
  EXPECT_EQ(replayed.Get("gone").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JournaledGroupsTest, TheStateRecordsOfASnapshotRebuildEveryGroup) {
  Exercise();
  ConsumerGroups restored({}, &clock_, &feed_);
  ASSERT_TRUE(
      groups_.ForEachStateRecord([&](const JournalRecord& r) { return restored.Apply(r); }).ok());
  EXPECT_EQ(Dump(restored), Dump(groups_));
}

TEST_F(JournaledGroupsTest, RollBackUndoesEveryChangeThatWasNotDurable) {
  ASSERT_TRUE(groups_.Create("kept", {}, {}).ok());
  Expire(1, 2);
  PollRefs("kept", "w1", 1);
  const std::string durable = Dump(groups_);
  const size_t first_lost = journal_.committed().size();
  Exercise();
  ASSERT_TRUE(groups_.Reset("kept", {.kind = GroupStart::Kind::kOldest}).ok());
  ASSERT_NE(Dump(groups_), durable);
  groups_.RollBack([&] {
    journal_.Refuse(absl::UnavailableError("disk on fire"));
    return journal_.UndosFrom(first_lost);
  });
  EXPECT_EQ(Dump(groups_), durable);
  EXPECT_EQ(groups_.NextLeaseDeadline(), kStart + absl::Seconds(30));
}

TEST_F(JournaledGroupsTest, WhileTheJournalRefusesChangesOperationsFailAndChangeNothing) {
  ASSERT_TRUE(groups_.Create("g", {}, {}).ok());
  Expire(1, 2);
  std::vector<LeaseRef> leased = PollRefs("g", "w1", 1);
  journal_.Refuse(absl::ResourceExhaustedError("disk full"));
  const std::string before = Dump(groups_);
  const size_t commits = journal_.committed().size();
  EXPECT_EQ(groups_.Poll("g", "w1", 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(groups_.Ack("g", "w1", leased).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(groups_.Create("h", {}, {}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(groups_.Delete("g").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(groups_.Get("g").ok());
  EXPECT_EQ(Dump(groups_), before);
  EXPECT_EQ(journal_.committed().size(), commits);
}

TEST_F(JournaledGroupsTest, AnOperationHandsOutTheTicketOfItsBatch) {
  ASSERT_TRUE(groups_.Create("g", {}, {}).ok());
  Expire(1, 1);
  CommitTicket polled = 0;
  absl::StatusOr<PollResult> got = groups_.Poll("g", "w1", 1, &polled);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(polled, journal_.committed().size());
  CommitTicket acked = 0;
  ASSERT_TRUE(groups_.Ack("g", "w1", RefsOf(*got), &acked).ok());
  EXPECT_EQ(acked, polled + 1);
  // A Poll that finds nothing changes nothing and commits nothing.
  CommitTicket idle = 0;
  ASSERT_TRUE(groups_.Poll("g", "w1", 1, &idle).ok());
  EXPECT_EQ(idle, 0u);
  EXPECT_EQ(journal_.committed().size(), acked);
}

TEST_F(JournaledGroupsTest, AnExpiredLeaseIsNotJournaledAndExpiresTheSameWayAfterReplay) {
  ASSERT_TRUE(groups_.Create("g", {.max_deliveries = 2}, {}).ok());
  Expire(1, 1);
  PollRefs("g", "w1");
  const size_t commits = journal_.committed().size();
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(groups_.ExpireLeases(), 1u);
  EXPECT_EQ(journal_.committed().size(), commits);

  ConsumerGroups replayed({}, &clock_, &feed_);
  for (const RecordingJournal::Committed& c : journal_.committed()) Replay(c.batch, replayed);
  absl::StatusOr<PollResult> again = replayed.Poll("g", "w2", 1);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->deliveries.size(), 1u);
  EXPECT_EQ(again->deliveries[0].delivery_count, 2u);
}

}  // namespace
}  // namespace lapse

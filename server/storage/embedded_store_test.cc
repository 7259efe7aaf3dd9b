#include "server/storage/embedded_store.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "testing/temp_dir.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

const absl::Time kStart = absl::FromUnixMillis(1'700'000'000'000);

// What one operation answered, and how often. A durable write answers on the
// WAL's flusher thread, so the hand-off goes through a lapse::Mutex, which
// ThreadSanitizer sees.
template <typename T>
class Answer {
 public:
  StoreDone<T> Callback() {
    return [this](absl::StatusOr<T> r) {
      MutexLock lock(&mu_);
      result_ = std::move(r);
      ++calls_;
      cv_.SignalAll();
    };
  }
  // The result, once the store has answered.
  const absl::StatusOr<T>& Await() {
    MutexLock lock(&mu_);
    EXPECT_TRUE(::lapse::testing::WaitWithPatience(
        mu_, cv_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return calls_ > 0; }));
    return result_;
  }
  // Whether the store has answered already.
  bool answered() {
    MutexLock lock(&mu_);
    return calls_ > 0;
  }
  int calls() {
    MutexLock lock(&mu_);
    return calls_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::StatusOr<T> result_ ABSL_GUARDED_BY(mu_) = absl::UnknownError("not answered");
};

std::unique_ptr<EmbeddedStore> Open(const EmbeddedStore::Options& options,
                                    EventsReadableListener on_readable = nullptr) {
  absl::StatusOr<std::unique_ptr<EmbeddedStore>> store =
      EmbeddedStore::Open(options, std::move(on_readable));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

MemberWrite Write(absl::string_view key, absl::Duration ttl) {
  return {.key = key, .value = "v", .expiration = Expiration::Ttl(ttl)};
}

TEST(EmbeddedStoreTest, MemoryOnlyAnswersEveryOperationBeforeReturning) {
  FakeClock clock(kStart);
  std::unique_ptr<EmbeddedStore> store = Open({.clock = &clock});
  ASSERT_NE(store, nullptr);
  Answer<std::vector<PutResult>> put;
  store->PutMembers("c", {Write("k", absl::Minutes(1))}, {}, put.Callback());
  EXPECT_TRUE(put.answered());
  ASSERT_TRUE(put.Await().ok()) << put.Await().status();
  EXPECT_EQ((*put.Await())[0].outcome, PutOutcome::kCreated);

  Answer<std::vector<GetResult>> get;
  const absl::string_view keys[] = {"k"};
  store->GetMembers("c", keys, Expiration::None(), get.Callback());
  EXPECT_TRUE(get.answered());
  ASSERT_TRUE(get.Await().ok());
  EXPECT_EQ((*get.Await())[0].value, "v");
  EXPECT_EQ(put.calls(), 1);
  EXPECT_EQ(get.calls(), 1);
}

// A store in a directory of its own, every write fsynced before its answer.
class DurableEmbeddedStoreTest : public ::testing::Test {
 protected:
  FakeClock clock_{kStart};
  ::lapse::testing::TempDir dir_;
  const EmbeddedStore::Options options_ = {
      .clock = &clock_, .data_dir = dir_.path(), .fsync = FsyncPolicy::kAlways};
};

TEST_F(DurableEmbeddedStoreTest, AFailingRequestIsAnsweredOnceWithTheFieldAtFault) {
  std::unique_ptr<EmbeddedStore> store = Open(options_);
  ASSERT_NE(store, nullptr);
  Answer<std::vector<PutResult>> put;
  store->PutMembers("c", {Write("k", -absl::Seconds(1))}, {}, put.Callback());
  EXPECT_EQ(put.Await().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(put.Await().status().message()), ::testing::HasSubstr("members[0].ttl"));
  EXPECT_EQ(put.calls(), 1);
}

TEST_F(DurableEmbeddedStoreTest, AWriteAnsweredOkSurvivesAReopen) {
  {
    std::unique_ptr<EmbeddedStore> store = Open(options_);
    ASSERT_NE(store, nullptr);
    Answer<std::vector<PutResult>> put;
    store->PutMembers("c", {Write("k", absl::Minutes(1))}, {}, put.Callback());
    ASSERT_TRUE(put.Await().ok()) << put.Await().status();
    EXPECT_EQ(put.calls(), 1);
  }
  std::unique_ptr<EmbeddedStore> reopened = Open(options_);
  ASSERT_NE(reopened, nullptr);
  ASSERT_TRUE(reopened->recovery().has_value());
  Answer<CollectionInfo> info;
  reopened->GetCollection("c", info.Callback());
  ASSERT_TRUE(info.Await().ok()) << info.Await().status();
  EXPECT_EQ(info.Await()->member_count, 1u);
}

// Expires member "k" of collection "c" through an operation, durably.
void ExpireOne(EmbeddedStore& store, FakeClock& clock) {
  Answer<std::vector<PutResult>> put;
  store.PutMembers("c", {Write("k", absl::Seconds(1))}, {}, put.Callback());
  ASSERT_TRUE(put.Await().ok());
  clock.Advance(absl::Seconds(1));
  Answer<std::vector<bool>> removed;
  const absl::string_view keys[] = {"k"};
  store.RemoveMembers("c", keys, removed.Callback());
  ASSERT_TRUE(removed.Await().ok());
  // Not removed: it had expired.
  ASSERT_FALSE((*removed.Await())[0]);
}

TEST_F(DurableEmbeddedStoreTest, TheListenerHearsOfEventsOnlyOnceTheyAreReadable) {
  std::atomic<uint64_t> heard{0};
  std::unique_ptr<EmbeddedStore> store = Open(options_, [&heard](uint64_t last) { heard = last; });
  ASSERT_NE(store, nullptr);
  // Expiring through an operation, then waiting for its durability, makes
  // the event readable before the answer.
  ASSERT_NO_FATAL_FAILURE(ExpireOne(*store, clock_));
  const uint64_t last = store->events().last_sequence();
  EXPECT_EQ(heard.load(), last);
  absl::StatusOr<EventBatch> batch = store->events().Read(last - 1, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].key, "k");
}

TEST_F(DurableEmbeddedStoreTest, AConsumerGroupAndItsLeasesSurviveAReopen) {
  {
    std::unique_ptr<EmbeddedStore> store = Open(options_);
    ASSERT_NE(store, nullptr);
    Answer<ConsumerGroupInfo> created;
    store->CreateConsumerGroup("g", {}, {}, created.Callback());
    ASSERT_TRUE(created.Await().ok()) << created.Await().status();
    ExpireOne(*store, clock_);
    Answer<PollResult> polled;
    store->Poll("g", "w1", 10, polled.Callback());
    ASSERT_TRUE(polled.Await().ok()) << polled.Await().status();
    ASSERT_EQ(polled.Await()->deliveries.size(), 1u);
  }
  std::unique_ptr<EmbeddedStore> reopened = Open(options_);
  ASSERT_NE(reopened, nullptr);
  Answer<ConsumerGroupInfo> info;
  reopened->GetConsumerGroup("g", 10, info.Callback());
  ASSERT_TRUE(info.Await().ok()) << info.Await().status();
  ASSERT_EQ(info.Await()->leases.size(), 1u);
  EXPECT_EQ(info.Await()->leases[0].consumer, "w1");
}

TEST(EmbeddedStoreTest, AnExpiredLeaseEndsOnItsOwnAndTheGroupIsAnnounced) {
  FakeClock clock(kStart);
  Mutex mu;
  CondVar cv;
  std::vector<std::string> announced;
  std::unique_ptr<EmbeddedStore> store =
      Open({.clock = &clock, .on_group_readable = [&](absl::string_view group) {
              MutexLock lock(&mu);
              announced.emplace_back(group);
              cv.SignalAll();
            }});
  ASSERT_NE(store, nullptr);
  Answer<ConsumerGroupInfo> created;
  store->CreateConsumerGroup("g", {.visibility_timeout = absl::Seconds(5)}, {}, created.Callback());
  ASSERT_TRUE(created.Await().ok());
  ExpireOne(*store, clock);
  Answer<PollResult> polled;
  store->Poll("g", "w1", 10, polled.Callback());
  ASSERT_EQ(polled.Await()->deliveries.size(), 1u);
  clock.Advance(absl::Seconds(5));
  store->lease_expirer().Wake();
  MutexLock lock(&mu);
  ASSERT_TRUE(::lapse::testing::WaitWithPatience(
      mu, cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !announced.empty(); }));
  EXPECT_EQ(announced[0], "g");
}

}  // namespace
}  // namespace lapse

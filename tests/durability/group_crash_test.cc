// Consumer groups across a SIGKILL: a real lapsed with --data-dir leases a
// group's events, some are acknowledged, some released, some still held;
// lapsed is killed and restarted. Nothing acknowledged comes back, nothing
// unacknowledged is lost, a released event is delivered again at once, and a
// consumer keeps the leases it held.
#include <signal.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "testing/lapsed_process.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

constexpr int kEvents = 200;

template <typename Request>
Request LeaseRequest(const std::string& consumer, const std::vector<v1::Delivery>& deliveries) {
  Request request;
  request.set_group("g");
  request.set_consumer(consumer);
  for (const v1::Delivery& d : deliveries) {
    v1::LeaseRef* lease = request.add_leases();
    lease->set_sequence(d.event().sequence());
    lease->set_delivery_count(d.delivery_count());
  }
  return request;
}

// Acknowledges `deliveries` as consumer "c1"; the per-lease results.
v1::AckResponse AckAsC1(v1::LapseService::Stub& stub, const std::vector<v1::Delivery>& deliveries) {
  return CallOk(stub, &v1::LapseService::Stub::Ack, LeaseRequest<v1::AckRequest>("c1", deliveries));
}

std::set<uint64_t> SequencesOf(const std::vector<v1::Delivery>& deliveries) {
  std::set<uint64_t> sequences;
  for (const v1::Delivery& d : deliveries) sequences.insert(d.event().sequence());
  return sequences;
}

TEST(GroupCrashTest, AfterASigkillNothingAckedComesBackAndNothingUnackedIsLost) {
  TempDir dir;
  const std::vector<std::string> flags = {"--data-dir=" + dir.path(), "--fsync=everysec"};
  std::vector<v1::Delivery> acked, released, held;
  {
    LapsedProcess lapsed(LAPSED_PATH, flags);
    ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
    std::unique_ptr<v1::LapseService::Stub> stub = lapsed.NewStub();
    CreateGroup(*stub, "g", absl::Hours(1));

    // The events, seen by a watcher once they are durable.
    grpc::ClientContext watch_context;
    watch_context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    v1::WatchExpirationsRequest all;
    std::unique_ptr<grpc::ClientReader<v1::WatchExpirationsResponse>> watch =
        stub->WatchExpirations(&watch_context, all);
    v1::PutMembersRequest put;
    put.set_collection("orders");
    for (int i = 0; i < kEvents; ++i) {
      v1::MemberWrite* w = put.add_members();
      w->set_key(absl::StrCat("o", i));
      w->mutable_ttl()->set_nanos(1'000'000);
    }
    v1::PutMembersResponse written;
    ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::PutMembers, put, &written).ok());
    int seen = 0;
    v1::WatchExpirationsResponse batch;
    while (seen < kEvents && watch->Read(&batch)) seen += batch.events_size();
    ASSERT_EQ(seen, kEvents);
    watch_context.TryCancel();

    v1::PollRequest poll;
    poll.set_group("g");
    poll.set_consumer("c1");
    poll.set_max_events(1000);
    v1::PollResponse polled;
    ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::Poll, poll, &polled).ok());
    ASSERT_EQ(polled.deliveries_size(), kEvents);
    acked.assign(polled.deliveries().begin(), polled.deliveries().begin() + 100);
    released.assign(polled.deliveries().begin() + 100, polled.deliveries().begin() + 150);
    held.assign(polled.deliveries().begin() + 150, polled.deliveries().end());
    const v1::AckResponse ack_response = AckAsC1(*stub, acked);
    ASSERT_EQ(ack_response.results_size(), 100);
    for (const v1::LeaseResult& r : ack_response.results()) ASSERT_EQ(r.code(), 0) << r.message();
    v1::NackResponse nack_response;
    ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::Nack,
                     LeaseRequest<v1::NackRequest>("c1", released), &nack_response)
                    .ok());
    lapsed.Signal(SIGKILL);
    lapsed.Wait();
  }

  LapsedProcess restarted(LAPSED_PATH, flags);
  ASSERT_GT(restarted.port(), 0) << restarted.Wait().err;
  std::unique_ptr<v1::LapseService::Stub> stub = restarted.NewStub();
  v1::GetConsumerGroupRequest get;
  get.set_name("g");
  get.set_max_leases(1000);
  v1::GetConsumerGroupResponse info;
  ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::GetConsumerGroup, get, &info).ok());
  EXPECT_EQ(info.group().pending(), 100u);
  EXPECT_EQ(info.group().awaiting_redelivery(), 50u);
  ASSERT_EQ(info.group().leases_size(), 50);

  // The released events go to another consumer at once, delivered again.
  v1::PollRequest poll;
  poll.set_group("g");
  poll.set_consumer("c2");
  poll.set_max_events(1000);
  v1::PollResponse again;
  ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::Poll, poll, &again).ok());
  std::vector<v1::Delivery> redelivered(again.deliveries().begin(), again.deliveries().end());
  EXPECT_EQ(SequencesOf(redelivered), SequencesOf(released));
  for (const v1::Delivery& d : redelivered) EXPECT_EQ(d.delivery_count(), 2u);

  // c1 still holds its leases; what it acked before is not pending.
  const v1::AckResponse held_acks = AckAsC1(*stub, held);
  ASSERT_EQ(held_acks.results_size(), 50);
  for (const v1::LeaseResult& r : held_acks.results()) EXPECT_EQ(r.code(), 0) << r.message();
  const v1::AckResponse repeated = AckAsC1(*stub, acked);
  ASSERT_EQ(repeated.results_size(), 100);
  for (const v1::LeaseResult& r : repeated.results()) {
    EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_THAT(r.message(), ::testing::HasSubstr("acknowledged already"));
  }
  EXPECT_EQ(restarted.Stop(), 0);
}

}  // namespace
}  // namespace lapse::testing

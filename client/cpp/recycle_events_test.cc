// RecycleEvents and RecycleDeliveries: a watch or Consume response read again
// into the same message allocates nothing per event. Its own binary, as it counts the allocations
// of this thread by replacing the global operator new (and delete).
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cpp/convert.h"
#include "gtest/gtest.h"
#include "proto/recycle.h"

namespace {

thread_local bool counting = false;
thread_local size_t allocations = 0;

}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

// The matching deletes: AddressSanitizer's own would report memory from this
// operator new (malloc) freed by operator delete as a mismatch.
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace lapse::client::internal {
namespace {

const absl::Time kTime = absl::FromUnixSeconds(1'700'000'000);

// `n` events with keys and values longer than a short string's inline room.
std::string ResponseWire(int n, int first_sequence) {
  v1::WatchExpirationsResponse response;
  for (int i = 0; i < n; ++i) {
    v1::ExpiryEvent* event = response.add_events();
    event->set_sequence(first_sequence + i);
    event->set_collection("orders-of-customer-42");
    event->set_key(absl::StrCat("order-with-a-long-key-", 100000 + first_sequence + i));
    event->set_value(absl::StrCat("value-longer-than-sixteen-", first_sequence + i));
    TimeToProto(kTime + absl::Seconds(first_sequence + i), event->mutable_expire_time());
    TimeToProto(kTime + absl::Seconds(first_sequence + i + 1), event->mutable_expired_at());
  }
  response.set_examined_sequence(first_sequence + n);
  return response.SerializeAsString();
}

// `n` deliveries of such events, and as many ack results, as a Consume
// stream answers.
std::string ConsumeWire(int n, int first_sequence) {
  v1::WatchExpirationsResponse events;
  EXPECT_TRUE(events.ParseFromString(ResponseWire(n, first_sequence)));
  v1::ConsumeResponse response;
  for (int i = 0; i < n; ++i) {
    v1::Delivery* delivery = response.add_deliveries();
    *delivery->mutable_event() = events.events(i);
    delivery->set_delivery_count(1 + i % 3);
    TimeToProto(kTime + absl::Seconds(60 + i), delivery->mutable_lease_deadline());
    v1::LeaseResult* result = response.add_ack_results();
    result->set_sequence(first_sequence + i);
    result->set_code(9);
    result->set_message(absl::StrCat("the lease is not held: acked before ", i));
  }
  return response.SerializeAsString();
}

// What parsing `wire` into `response` allocated on this thread.
template <typename Response>
size_t AllocationsToParse(const std::string& wire, Response* response) {
  allocations = 0;
  counting = true;
  const bool parsed = response->ParseFromString(wire);
  counting = false;
  EXPECT_TRUE(parsed);
  return allocations;
}

// Reads 100 items of `wire` into a response, has `recycle` prepare it as
// its stream does before each read, and expects reading the next 100 to
// allocate nothing and to read them whole.
template <typename Response>
void ExpectARecycledReadAllocatesNothing(std::string (*wire)(int, int),
                                         void (*recycle)(Response*)) {
  Response response;
  ASSERT_GT(AllocationsToParse(wire(100, 1), &response), 0u);
  recycle(&response);
  EXPECT_EQ(AllocationsToParse(wire(100, 101), &response), 0u);
  EXPECT_EQ(response.SerializeAsString(), wire(100, 101));
}

TEST(RecycleEvents, ReadingIntoARecycledResponseAllocatesNothingPerEvent) {
  ExpectARecycledReadAllocatesNothing<v1::WatchExpirationsResponse>(ResponseWire, RecycleEvents);
}

// Reads 2 items of `wire` into `response`, has `recycle` prepare it, then
// reads `sent` into it.
template <typename Response>
void ReadAfterRecycling(std::string (*wire)(int, int), void (*recycle)(Response*),
                        const Response& sent, Response* response) {
  ASSERT_TRUE(response->ParseFromString(wire(2, 1)));
  recycle(response);
  ASSERT_TRUE(response->ParseFromString(sent.SerializeAsString()));
}

TEST(RecycleEvents, AnEventReadIntoARecycledOneConvertsAsIfReadFresh) {
  v1::WatchExpirationsResponse sent;
  v1::ExpiryEvent* event = sent.add_events();
  event->set_sequence(7);
  event->set_key("k");
  v1::WatchExpirationsResponse response;
  ASSERT_NO_FATAL_FAILURE(ReadAfterRecycling(ResponseWire, RecycleEvents, sent, &response));
  ASSERT_EQ(response.events_size(), 1);
  const ExpiryEvent recycled = EventFromProto(response.events(0));
  const ExpiryEvent fresh = EventFromProto(*event);
  EXPECT_EQ(recycled.sequence, 7u);
  EXPECT_EQ(recycled.collection, "");
  EXPECT_EQ(recycled.key, "k");
  EXPECT_EQ(recycled.value, "");
  EXPECT_EQ(recycled.expire_time, fresh.expire_time);
  EXPECT_EQ(recycled.expired_at, fresh.expired_at);
}

// As ConsumeSession reads: recycled, then cleared.
TEST(RecycleDeliveries, ReadingIntoARecycledResponseAllocatesNothingPerDelivery) {
  ExpectARecycledReadAllocatesNothing<v1::ConsumeResponse>(ConsumeWire,
                                                           [](v1::ConsumeResponse* response) {
                                                             RecycleDeliveries(response);
                                                             response->Clear();
                                                           });
}

TEST(RecycleDeliveries, ADeliveryReadIntoARecycledOneConvertsAsIfReadFresh) {
  v1::ConsumeResponse sent;
  v1::Delivery* delivery = sent.add_deliveries();
  delivery->mutable_event()->set_sequence(7);
  delivery->set_delivery_count(2);
  v1::ConsumeResponse response;
  ASSERT_NO_FATAL_FAILURE(ReadAfterRecycling(ConsumeWire, RecycleDeliveries, sent, &response));
  ASSERT_EQ(response.deliveries_size(), 1);
  const Delivery recycled = DeliveryFromProto(response.deliveries(0));
  const Delivery fresh = DeliveryFromProto(*delivery);
  EXPECT_EQ(recycled.event.sequence, 7u);
  EXPECT_EQ(recycled.event.key, "");
  EXPECT_EQ(recycled.event.expire_time, fresh.event.expire_time);
  EXPECT_EQ(recycled.delivery_count, 2u);
  EXPECT_EQ(recycled.lease_deadline, fresh.lease_deadline);
}

}  // namespace
}  // namespace lapse::client::internal

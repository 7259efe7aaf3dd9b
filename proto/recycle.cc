#include "proto/recycle.h"

#include <memory>

namespace lapse {
namespace {

// Empties `event`, keeping its two Timestamps (emptied) and string buffers.
void ClearKeepingSubmessages(v1::ExpiryEvent* event) {
  std::unique_ptr<google::protobuf::Timestamp> expire_time(event->release_expire_time());
  std::unique_ptr<google::protobuf::Timestamp> expired_at(event->release_expired_at());
  event->Clear();
  if (expire_time != nullptr) expire_time->Clear();
  if (expired_at != nullptr) expired_at->Clear();
  event->set_allocated_expire_time(expire_time.release());
  event->set_allocated_expired_at(expired_at.release());
}

// Empties `delivery`, keeping its event (as above) and its Timestamp.
void ClearKeepingSubmessages(v1::Delivery* delivery) {
  std::unique_ptr<v1::ExpiryEvent> event(delivery->release_event());
  std::unique_ptr<google::protobuf::Timestamp> lease_deadline(delivery->release_lease_deadline());
  delivery->Clear();
  if (event != nullptr) ClearKeepingSubmessages(event.get());
  if (lease_deadline != nullptr) lease_deadline->Clear();
  delivery->set_allocated_event(event.release());
  delivery->set_allocated_lease_deadline(lease_deadline.release());
}

// Moves each element of `field`, emptied but keeping its submessages, to the
// field's pool of cleared elements, which a parse takes from first.
template <typename Element>
void RecycleEach(google::protobuf::RepeatedPtrField<Element>* field) {
  while (!field->empty()) {
    std::unique_ptr<Element> element(field->ReleaseLast());
    ClearKeepingSubmessages(element.get());
    field->AddCleared(element.release());
  }
}

}  // namespace

void RecycleEvents(v1::WatchExpirationsResponse* response) {
  RecycleEach(response->mutable_events());
}

void RecycleDeliveries(v1::ConsumeResponse* response) {
  RecycleEach(response->mutable_deliveries());
}

}  // namespace lapse

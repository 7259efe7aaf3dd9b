// The consumer-group RPCs of lapse.v1.LapseService (CreateConsumerGroup ...
// RedriveDeadLetters): each converts its request to engine types, calls the
// Store and converts the answer, as LapseServiceImpl's other unary handlers
// do. The store (ConsumerGroups) validates names, options and limits and
// names the field at fault; these add only conversion errors (Durations,
// start positions, page tokens). HandlePoll answers at once; a Poll with a
// `wait` is served by a PollReactor (poll_reactor.h), and a Consume stream by
// a ConsumeReactor (consume_reactor.h), both with the conversions below.
//
//   ServeUnary("Poll", &HandlePoll);  // in LapseServiceImpl's constructor
//
// Stateless functions: safe from any thread.
#ifndef LAPSE_SERVER_SERVICE_CONSUMER_GROUP_HANDLERS_H_
#define LAPSE_SERVER_SERVICE_CONSUMER_GROUP_HANDLERS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "lapse/v1/lapse.pb.h"
#include "server/service/operation.h"
#include "server/storage/store.h"

namespace lapse {

// The defaults of CreateConsumerGroupRequest's unset options.
inline constexpr absl::Duration kDefaultVisibilityTimeout = absl::Seconds(30);
inline constexpr uint32_t kDefaultMaxDeliveries = 5;
inline constexpr uint32_t kDefaultMaxUnackedPerConsumer = 100;
// GetConsumerGroupRequest::max_leases is at most this.
inline constexpr uint32_t kMaxListedLeases = 1000;
// PollRequest.wait is at most this.
inline constexpr absl::Duration kMaxPollWait = absl::Seconds(60);

// PollRequest.wait, zero when unset; INVALID_ARGUMENT naming `wait` when it
// is negative or longer than kMaxPollWait.
absl::StatusOr<absl::Duration> PollWait(const v1::PollRequest& request);

std::vector<LeaseRef> LeasesOf(const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases);
// One LeaseResult per lease of `leases`, with its result, in order.
void LeaseResultsToProto(const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases,
                         const std::vector<absl::Status>& results,
                         google::protobuf::RepeatedPtrField<v1::LeaseResult>* out);
void DeliveryToProto(const Delivery& delivery, v1::Delivery* out);
// The deliveries and the loss report of `result`, into a PollResponse or a
// ConsumeResponse.
template <typename Response>
void PollResultToProto(const PollResult& result, Response* response) {
  for (const Delivery& d : result.deliveries) DeliveryToProto(d, response->add_deliveries());
  if (result.lost.has_value()) {
    response->set_lost_first_sequence(result.lost->first);
    response->set_lost_last_sequence(result.lost->last);
  }
}

absl::Status HandleCreateConsumerGroup(Store& store, const v1::CreateConsumerGroupRequest& request,
                                       v1::CreateConsumerGroupResponse* response,
                                       OperationEnd* end);
absl::Status HandleGetConsumerGroup(Store& store, const v1::GetConsumerGroupRequest& request,
                                    v1::GetConsumerGroupResponse* response, OperationEnd* end);
absl::Status HandleListConsumerGroups(Store& store, const v1::ListConsumerGroupsRequest& request,
                                      v1::ListConsumerGroupsResponse* response, OperationEnd* end);
absl::Status HandleDeleteConsumerGroup(Store& store, const v1::DeleteConsumerGroupRequest& request,
                                       v1::DeleteConsumerGroupResponse* response,
                                       OperationEnd* end);
absl::Status HandleResetConsumerGroup(Store& store, const v1::ResetConsumerGroupRequest& request,
                                      v1::ResetConsumerGroupResponse* response, OperationEnd* end);
absl::Status HandlePoll(Store& store, const v1::PollRequest& request, v1::PollResponse* response,
                        OperationEnd* end);
absl::Status HandleAck(Store& store, const v1::AckRequest& request, v1::AckResponse* response,
                       OperationEnd* end);
absl::Status HandleNack(Store& store, const v1::NackRequest& request, v1::NackResponse* response,
                        OperationEnd* end);
absl::Status HandleExtendLeases(Store& store, const v1::ExtendLeasesRequest& request,
                                v1::ExtendLeasesResponse* response, OperationEnd* end);
absl::Status HandleListDeadLetters(Store& store, const v1::ListDeadLettersRequest& request,
                                   v1::ListDeadLettersResponse* response, OperationEnd* end);
absl::Status HandleRedriveDeadLetters(Store& store, const v1::RedriveDeadLettersRequest& request,
                                      v1::RedriveDeadLettersResponse* response, OperationEnd* end);

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_CONSUMER_GROUP_HANDLERS_H_

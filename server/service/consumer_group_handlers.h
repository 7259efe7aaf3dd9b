// The consumer-group RPCs of lapse.v1.LapseService (CreateConsumerGroup ...
// RedriveDeadLetters): each converts its request to engine types, calls the
// Store and converts the answer, as LapseServiceImpl's other unary handlers
// do. The store (ConsumerGroups) validates names, options and limits and
// names the field at fault; these add only conversion errors (Durations,
// start positions, page tokens).
//
//   ServeUnary("Poll", &HandlePoll);  // in LapseServiceImpl's constructor
//
// Stateless functions: safe from any thread.
#ifndef LAPSE_SERVER_SERVICE_CONSUMER_GROUP_HANDLERS_H_
#define LAPSE_SERVER_SERVICE_CONSUMER_GROUP_HANDLERS_H_

#include "absl/status/status.h"
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

#include "server/service/consumer_group_handlers.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/engine/validate.h"
#include "server/service/proto_convert.h"
#include "server/service/reply.h"

namespace lapse {
namespace {

// Page tokens reuse the collection token, scoped so that one issued for
// another listing is refused.
constexpr absl::string_view kGroupPageScope = "consumer groups";

std::string DeadLetterPageScope(absl::string_view group) {
  return absl::StrCat("dead letters of ", group);
}

absl::StatusOr<GroupStart> StartOf(v1::StartPosition position, uint64_t after_sequence) {
  if (after_sequence != 0 && position != v1::START_POSITION_AFTER_SEQUENCE) {
    return InvalidField("after_sequence", "only allowed with START_POSITION_AFTER_SEQUENCE");
  }
  switch (position) {
    case v1::START_POSITION_UNSPECIFIED:
    case v1::START_POSITION_NEW:
      return GroupStart{.kind = GroupStart::Kind::kNew};
    case v1::START_POSITION_OLDEST:
      return GroupStart{.kind = GroupStart::Kind::kOldest};
    case v1::START_POSITION_AFTER_SEQUENCE:
      return GroupStart{.kind = GroupStart::Kind::kAfterSequence, .after_sequence = after_sequence};
    default:
      return InvalidField("start_position", absl::StrCat("unknown value ", position));
  }
}

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  if (std::optional<google::protobuf::Timestamp> ts = TimeToProto(t)) *out = *std::move(ts);
}

void GroupToProto(const ConsumerGroupInfo& info, v1::ConsumerGroup* out) {
  out->set_name(info.name);
  std::vector<std::string> collections(info.options.filter.collections.begin(),
                                       info.options.filter.collections.end());
  std::sort(collections.begin(), collections.end());
  for (std::string& name : collections) out->add_collections(std::move(name));
  out->set_collection_prefix(info.options.filter.prefix);
  out->set_include_values(info.options.filter.include_values);
  const absl::Duration timeout = info.options.visibility_timeout;
  out->mutable_visibility_timeout()->set_seconds(absl::ToInt64Seconds(timeout));
  out->mutable_visibility_timeout()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(timeout % absl::Seconds(1))));
  out->set_max_deliveries(info.options.max_deliveries);
  out->set_max_unacked_per_consumer(info.options.max_unacked_per_consumer);
  out->set_position(info.position);
  out->set_lag(info.lag);
  out->set_pending(info.pending);
  out->set_awaiting_redelivery(info.awaiting_redelivery);
  out->set_dead_lettered(info.dead_lettered);
  out->set_delivered_total(info.delivered_total);
  out->set_acked_total(info.acked_total);
  out->set_lost_sequences_total(info.lost_sequences_total);
  for (const ConsumerInfo& consumer : info.consumers) {
    v1::ConsumerGroupConsumer* c = out->add_consumers();
    c->set_name(consumer.name);
    c->set_unacked(consumer.unacked);
    SetTime(consumer.last_seen, c->mutable_last_seen());
  }
  for (const LeaseInfo& lease : info.leases) {
    v1::ConsumerGroupLease* l = out->add_leases();
    l->set_sequence(lease.sequence);
    l->set_consumer(lease.consumer);
    l->set_delivery_count(lease.delivery_count);
    SetTime(lease.deadline, l->mutable_deadline());
  }
}

// The answer of an RPC that answers one group.
template <typename Response>
StoreDone<ConsumerGroupInfo> ReplyGroup(OperationEnd* end, Response* response) {
  return Reply<ConsumerGroupInfo>(
      end, [response](ConsumerGroupInfo info) { GroupToProto(info, response->mutable_group()); });
}

// The answer of Ack, Nack and ExtendLeases: one result per lease, in order.
template <typename Request, typename Response>
StoreDone<std::vector<absl::Status>> ReplyLeases(OperationEnd* end, const Request& request,
                                                 Response* response) {
  return Reply<std::vector<absl::Status>>(
      end, [&request, response](std::vector<absl::Status> results) {
        LeaseResultsToProto(request.leases(), results, response->mutable_results());
      });
}

}  // namespace

std::vector<LeaseRef> LeasesOf(const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases) {
  std::vector<LeaseRef> refs;
  refs.reserve(leases.size());
  for (const v1::LeaseRef& lease : leases) {
    refs.push_back({.sequence = lease.sequence(), .delivery_count = lease.delivery_count()});
  }
  return refs;
}

void LeaseResultsToProto(const google::protobuf::RepeatedPtrField<v1::LeaseRef>& leases,
                         const std::vector<absl::Status>& results,
                         google::protobuf::RepeatedPtrField<v1::LeaseResult>* out) {
  for (size_t i = 0; i < results.size(); ++i) {
    v1::LeaseResult* result = out->Add();
    result->set_sequence(leases[static_cast<int>(i)].sequence());
    result->set_code(static_cast<int32_t>(results[i].code()));
    result->set_message(std::string(results[i].message()));
  }
}

void DeliveryToProto(const Delivery& delivery, v1::Delivery* out) {
  // The group keeps values only when it carries them.
  ExpiryEventToProto(delivery.event, /*include_value=*/true, out->mutable_event());
  out->set_delivery_count(delivery.delivery_count);
  SetTime(delivery.lease_deadline, out->mutable_lease_deadline());
}

absl::StatusOr<absl::Duration> PollWait(const v1::PollRequest& request) {
  absl::StatusOr<absl::Duration> wait = DurationFromProto(request.wait(), "wait");
  if (!wait.ok()) return wait.status();
  if (*wait < absl::ZeroDuration() || *wait > kMaxPollWait) {
    return InvalidField(
        "wait", absl::StrCat("must be between 0 and ", absl::FormatDuration(kMaxPollWait), ", not ",
                             absl::FormatDuration(*wait)));
  }
  return *wait;
}

absl::Status HandleCreateConsumerGroup(Store& store, const v1::CreateConsumerGroupRequest& request,
                                       v1::CreateConsumerGroupResponse* response,
                                       OperationEnd* end) {
  ConsumerGroupOptions options;
  options.filter.collections.insert(request.collections().begin(), request.collections().end());
  if (options.filter.collections.size() != static_cast<size_t>(request.collections_size())) {
    return InvalidField("collections", "lists a collection twice");
  }
  options.filter.prefix = request.collection_prefix();
  options.filter.include_values = request.include_values();
  options.visibility_timeout = kDefaultVisibilityTimeout;
  if (request.has_visibility_timeout()) {
    absl::StatusOr<absl::Duration> timeout =
        DurationFromProto(request.visibility_timeout(), "visibility_timeout");
    if (!timeout.ok()) return timeout.status();
    options.visibility_timeout = *timeout;
  }
  options.max_deliveries =
      request.max_deliveries() == 0 ? kDefaultMaxDeliveries : request.max_deliveries();
  options.max_unacked_per_consumer = request.max_unacked_per_consumer() == 0
                                         ? kDefaultMaxUnackedPerConsumer
                                         : request.max_unacked_per_consumer();
  absl::StatusOr<GroupStart> start = StartOf(request.start_position(), request.after_sequence());
  if (!start.ok()) return start.status();
  store.CreateConsumerGroup(request.name(), options, *start, ReplyGroup(end, response));
  return absl::OkStatus();
}

absl::Status HandleGetConsumerGroup(Store& store, const v1::GetConsumerGroupRequest& request,
                                    v1::GetConsumerGroupResponse* response, OperationEnd* end) {
  if (request.max_leases() > kMaxListedLeases) {
    return InvalidField("max_leases", absl::StrCat("at most ", kMaxListedLeases));
  }
  store.GetConsumerGroup(request.name(), request.max_leases(), ReplyGroup(end, response));
  return absl::OkStatus();
}

absl::Status HandleListConsumerGroups(Store& store, const v1::ListConsumerGroupsRequest& request,
                                      v1::ListConsumerGroupsResponse* response, OperationEnd* end) {
  absl::StatusOr<std::string> after = CollectionPageAfter(request.page_token(), kGroupPageScope);
  if (!after.ok()) return after.status();
  store.ListConsumerGroups(request.page_size(), *after,
                           Reply<ConsumerGroups::Page>(end, [response](ConsumerGroups::Page page) {
                             for (const ConsumerGroupInfo& info : page.groups) {
                               GroupToProto(info, response->add_groups());
                             }
                             if (page.next_after.has_value()) {
                               response->set_next_page_token(
                                   EncodeCollectionPageToken(kGroupPageScope, *page.next_after));
                             }
                           }));
  return absl::OkStatus();
}

absl::Status HandleDeleteConsumerGroup(Store& store, const v1::DeleteConsumerGroupRequest& request,
                                       v1::DeleteConsumerGroupResponse* response,
                                       OperationEnd* end) {
  store.DeleteConsumerGroup(request.name(), ReplyGroup(end, response));
  return absl::OkStatus();
}

absl::Status HandleResetConsumerGroup(Store& store, const v1::ResetConsumerGroupRequest& request,
                                      v1::ResetConsumerGroupResponse* response, OperationEnd* end) {
  absl::StatusOr<GroupStart> start = StartOf(request.start_position(), request.after_sequence());
  if (!start.ok()) return start.status();
  store.ResetConsumerGroup(request.name(), *start, ReplyGroup(end, response));
  return absl::OkStatus();
}

absl::Status HandlePoll(Store& store, const v1::PollRequest& request, v1::PollResponse* response,
                        OperationEnd* end) {
  store.Poll(request.group(), request.consumer(), std::max<uint32_t>(1, request.max_events()),
             Reply<PollResult>(
                 end, [response](PollResult result) { PollResultToProto(result, response); }));
  return absl::OkStatus();
}

absl::Status HandleAck(Store& store, const v1::AckRequest& request, v1::AckResponse* response,
                       OperationEnd* end) {
  store.Ack(request.group(), request.consumer(), LeasesOf(request.leases()),
            ReplyLeases(end, request, response));
  return absl::OkStatus();
}

absl::Status HandleNack(Store& store, const v1::NackRequest& request, v1::NackResponse* response,
                        OperationEnd* end) {
  store.Nack(request.group(), request.consumer(), LeasesOf(request.leases()),
             ReplyLeases(end, request, response));
  return absl::OkStatus();
}

absl::Status HandleExtendLeases(Store& store, const v1::ExtendLeasesRequest& request,
                                v1::ExtendLeasesResponse* response, OperationEnd* end) {
  absl::StatusOr<absl::Duration> extension = DurationFromProto(request.extension(), "extension");
  if (!extension.ok()) return extension.status();
  store.ExtendLeases(request.group(), request.consumer(), LeasesOf(request.leases()), *extension,
                     ReplyLeases(end, request, response));
  return absl::OkStatus();
}

absl::Status HandleListDeadLetters(Store& store, const v1::ListDeadLettersRequest& request,
                                   v1::ListDeadLettersResponse* response, OperationEnd* end) {
  uint64_t after = 0;
  if (!request.page_token().empty()) {
    absl::StatusOr<std::string> decoded =
        DecodeCollectionPageToken(request.page_token(), DeadLetterPageScope(request.group()));
    if (!decoded.ok()) return decoded.status();
    if (!absl::SimpleAtoi(*decoded, &after)) return InvalidField("page_token", "malformed");
  }
  store.ListDeadLetters(
      request.group(), after, request.page_size(),
      Reply<DeadLetterPage>(end, [&request, response](DeadLetterPage page) {
        for (const DeadLetter& letter : page.letters) {
          v1::DeadLetter* out = response->add_dead_letters();
          ExpiryEventToProto(letter.event, /*include_value=*/true, out->mutable_event());
          out->set_delivery_count(letter.delivery_count);
          out->set_consumer(letter.consumer);
          SetTime(letter.dead_lettered_at, out->mutable_dead_lettered_at());
        }
        if (page.next_after.has_value()) {
          response->set_next_page_token(EncodeCollectionPageToken(
              DeadLetterPageScope(request.group()), absl::StrCat(*page.next_after)));
        }
      }));
  return absl::OkStatus();
}

absl::Status HandleRedriveDeadLetters(Store& store, const v1::RedriveDeadLettersRequest& request,
                                      v1::RedriveDeadLettersResponse* response, OperationEnd* end) {
  const std::vector<uint64_t> sequences(request.sequences().begin(), request.sequences().end());
  store.RedriveDeadLetters(
      request.group(), sequences,
      Reply<size_t>(end, [response](size_t redriven) { response->set_redriven_count(redriven); }));
  return absl::OkStatus();
}

}  // namespace lapse

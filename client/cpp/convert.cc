#include "client/cpp/convert.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace lapse::client::internal {
namespace {

// A response the client cannot read, e.g. an outcome this client predates.
absl::Status Unexpected(absl::string_view rpc, absl::string_view what, int value) {
  return absl::UnknownError(
      absl::StrCat(rpc, ": unexpected ", what, " ", value, " in the response"));
}

// The client's value for a response enum `value`, or UNKNOWN naming `rpc`
// for a value this client predates.
template <typename Out, typename In>
absl::StatusOr<Out> OutcomeFromProto(absl::string_view rpc, In value,
                                     std::initializer_list<std::pair<In, Out>> known) {
  for (const auto& [in, out] : known) {
    if (in == value) return out;
  }
  return Unexpected(rpc, "outcome", value);
}

// Each of `protos` through `convert`, in order; the first error if any.
template <typename Result, typename Protos, typename Convert>
absl::StatusOr<std::vector<Result>> AllFromProto(const Protos& protos, Convert convert) {
  std::vector<Result> results;
  results.reserve(protos.size());
  for (const auto& proto : protos) {
    absl::StatusOr<Result> result = convert(proto);
    if (!result.ok()) return result.status();
    results.push_back(*std::move(result));
  }
  return results;
}

// Each of `protos` through `convert`, which cannot fail, in order.
template <typename Result, typename Protos, typename Convert>
std::vector<Result> EachFromProto(const Protos& protos, Convert convert) {
  std::vector<Result> results;
  results.reserve(protos.size());
  for (const auto& proto : protos) results.push_back(convert(proto));
  return results;
}

// Fills an AIP-214 `oneof expiration`: `set_time` and `set_ttl` return the
// arm to fill (mutable_expire_time, mutable_ttl).
template <typename TimeSetter, typename TtlSetter>
void SetExpiration(const Expiration& expiration, TimeSetter set_time, TtlSetter set_ttl) {
  switch (expiration.kind()) {
    case Expiration::Kind::kNone:
      break;
    case Expiration::Kind::kTtl:
      DurationToProto(expiration.ttl(), set_ttl());
      break;
    case Expiration::Kind::kAt:
      TimeToProto(expiration.time(), set_time());
      break;
  }
}

v1::ExpireCondition ExpireConditionToProto(ExpireCondition condition) {
  switch (condition) {
    case ExpireCondition::kAlways:
      break;
    case ExpireCondition::kIfNoExpiration:
      return v1::EXPIRE_CONDITION_IF_NO_EXPIRATION;
    case ExpireCondition::kIfHasExpiration:
      return v1::EXPIRE_CONDITION_IF_HAS_EXPIRATION;
    case ExpireCondition::kIfLater:
      return v1::EXPIRE_CONDITION_IF_LATER;
    case ExpireCondition::kIfEarlier:
      return v1::EXPIRE_CONDITION_IF_EARLIER;
  }
  return v1::EXPIRE_CONDITION_UNSPECIFIED;
}

// A members request addressed to `collection` and `keys`.
template <typename Request>
Request KeysRequest(const std::string& collection, const std::vector<std::string>& keys) {
  Request request;
  request.set_collection(collection);
  request.mutable_keys()->Reserve(static_cast<int>(keys.size()));
  for (const std::string& key : keys) request.add_keys(key);
  return request;
}

Member MemberFromProto(const v1::Member& member) {
  Member out;
  out.key = member.key();
  out.value = member.value();
  out.expire_time = ExpireTimeFromProto(member);
  return out;
}

CollectionInfo CollectionFromProto(const v1::CollectionInfo& info) {
  CollectionInfo out;
  out.name = info.name();
  out.member_count = info.member_count();
  out.expiring_count = info.expiring_count();
  if (info.has_next_expire_time()) {
    out.next_expire_time = TimeFromProto(info.next_expire_time());
  }
  return out;
}

absl::Duration DurationFromProto(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

ConsumerGroupInfo GroupFromProto(const v1::ConsumerGroup& group) {
  ConsumerGroupInfo out;
  out.name = group.name();
  out.collections.assign(group.collections().begin(), group.collections().end());
  out.collection_prefix = group.collection_prefix();
  out.include_values = group.include_values();
  out.visibility_timeout = DurationFromProto(group.visibility_timeout());
  out.max_deliveries = group.max_deliveries();
  out.max_unacked_per_consumer = group.max_unacked_per_consumer();
  out.position = group.position();
  out.lag = group.lag();
  out.pending = group.pending();
  out.awaiting_redelivery = group.awaiting_redelivery();
  out.dead_lettered = group.dead_lettered();
  out.delivered_total = group.delivered_total();
  out.acked_total = group.acked_total();
  out.lost_sequences_total = group.lost_sequences_total();
  out.consumers = EachFromProto<
      GroupConsumer>(group.consumers(), [](const v1::ConsumerGroupConsumer& consumer) {
    return GroupConsumer{consumer.name(), consumer.unacked(), TimeFromProto(consumer.last_seen())};
  });
  out.leases = EachFromProto<GroupLease>(group.leases(), [](const v1::ConsumerGroupLease& lease) {
    return GroupLease{lease.sequence(), lease.consumer(), lease.delivery_count(),
                      TimeFromProto(lease.deadline())};
  });
  return out;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status FromResultCode(int32_t code, absl::string_view message) {
  const bool canonical = code >= static_cast<int32_t>(absl::StatusCode::kCancelled) &&
                         code <= static_cast<int32_t>(absl::StatusCode::kUnauthenticated);
  return absl::Status(canonical ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
                      message);
}

// ---- Time -------------------------------------------------------------------

SecondsAndNanos TimeFields(absl::Time time) {
  const int64_t seconds = absl::ToUnixSeconds(time);
  return {seconds,
          static_cast<int32_t>(absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds)))};
}

SecondsAndNanos DurationFields(absl::Duration duration) {
  absl::Duration remainder;
  const int64_t seconds = absl::IDivDuration(duration, absl::Seconds(1), &remainder);
  return {seconds, static_cast<int32_t>(absl::ToInt64Nanoseconds(remainder))};
}

absl::Time TimeFromFields(int64_t seconds, int32_t nanos) {
  return absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos);
}

absl::Time TimeFromProto(const google::protobuf::Timestamp& timestamp) {
  return TimeFromFields(timestamp.seconds(), timestamp.nanos());
}

void TimeToProto(absl::Time time, google::protobuf::Timestamp* out) {
  const SecondsAndNanos fields = TimeFields(time);
  out->set_seconds(fields.seconds);
  out->set_nanos(fields.nanos);
}

void DurationToProto(absl::Duration duration, google::protobuf::Duration* out) {
  const SecondsAndNanos fields = DurationFields(duration);
  out->set_seconds(fields.seconds);
  out->set_nanos(fields.nanos);
}

v1::PutCondition PutConditionToProto(PutCondition condition) {
  switch (condition) {
    case PutCondition::kAlways:
      break;
    case PutCondition::kIfAbsent:
      return v1::PUT_CONDITION_IF_ABSENT;
    case PutCondition::kIfPresent:
      return v1::PUT_CONDITION_IF_PRESENT;
  }
  return v1::PUT_CONDITION_UNSPECIFIED;
}

// ---- Requests ---------------------------------------------------------------

v1::PutMembersRequest PutMembersRequestToProto(const std::string& collection,
                                               const std::vector<MemberWrite>& members,
                                               const PutOptions& options) {
  v1::PutMembersRequest request;
  request.set_collection(collection);
  request.set_max_members(options.max_members);
  SetExpiration(
      options.default_expiration, [&request] { return request.mutable_default_expire_time(); },
      [&request] { return request.mutable_default_ttl(); });
  request.set_omit_created_results(options.omit_created_results);
  request.mutable_members()->Reserve(static_cast<int>(members.size()));
  for (const MemberWrite& member : members) {
    v1::MemberWrite* write = request.add_members();
    write->set_key(member.key);
    write->set_value(member.value);
    SetExpiration(
        member.expiration, [write] { return write->mutable_expire_time(); },
        [write] { return write->mutable_ttl(); });
    write->set_condition(PutConditionToProto(member.condition));
    write->set_keep_expiration(member.keep_expiration);
  }
  return request;
}

v1::GetMembersRequest GetMembersRequestToProto(const std::string& collection,
                                               const std::vector<std::string>& keys,
                                               const GetOptions& options) {
  auto request = KeysRequest<v1::GetMembersRequest>(collection, keys);
  SetExpiration(
      options.refresh, [&request] { return request.mutable_refresh_expire_time(); },
      [&request] { return request.mutable_refresh_ttl(); });
  return request;
}

v1::RemoveMembersRequest RemoveMembersRequestToProto(const std::string& collection,
                                                     const std::vector<std::string>& keys) {
  return KeysRequest<v1::RemoveMembersRequest>(collection, keys);
}

v1::ExpireMembersRequest ExpireMembersRequestToProto(const std::string& collection,
                                                     const std::vector<std::string>& keys,
                                                     const Expiration& expiration,
                                                     ExpireCondition condition) {
  auto request = KeysRequest<v1::ExpireMembersRequest>(collection, keys);
  SetExpiration(
      expiration, [&request] { return request.mutable_expire_time(); },
      [&request] { return request.mutable_ttl(); });
  request.set_condition(ExpireConditionToProto(condition));
  return request;
}

v1::PersistMembersRequest PersistMembersRequestToProto(const std::string& collection,
                                                       const std::vector<std::string>& keys) {
  return KeysRequest<v1::PersistMembersRequest>(collection, keys);
}

v1::ListMembersRequest ListMembersRequestToProto(const std::string& collection,
                                                 const ListMembersOptions& options) {
  v1::ListMembersRequest request;
  request.set_collection(collection);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  request.set_order_by(options.order_by == MemberOrder::kExpireTime ? v1::MEMBER_ORDER_EXPIRE_TIME
                                                                    : v1::MEMBER_ORDER_KEY);
  request.set_keys_only(options.keys_only);
  return request;
}

v1::GetCollectionRequest GetCollectionRequestToProto(const std::string& name) {
  v1::GetCollectionRequest request;
  request.set_name(name);
  return request;
}

v1::ListCollectionsRequest ListCollectionsRequestToProto(const ListCollectionsOptions& options) {
  v1::ListCollectionsRequest request;
  request.set_prefix(options.prefix);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  return request;
}

v1::DeleteCollectionRequest DeleteCollectionRequestToProto(const std::string& name) {
  v1::DeleteCollectionRequest request;
  request.set_name(name);
  return request;
}

v1::WatchExpirationsRequest WatchRequest(const WatchOptions& options,
                                         std::optional<uint64_t> resume_after,
                                         const std::string& resume_token) {
  v1::WatchExpirationsRequest request;
  for (const std::string& collection : options.collections) {
    request.add_collections(collection);
  }
  request.set_collection_prefix(options.collection_prefix);
  request.set_include_values(options.include_values);
  if (!resume_token.empty()) {
    request.set_start_position(v1::START_POSITION_AFTER_TOKEN);
    request.set_resume_token(resume_token);
    return request;
  }
  if (resume_after.has_value()) {
    request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
    request.set_after_sequence(*resume_after);
    return request;
  }
  request.set_start_position(StartPositionToProto(options.start));
  if (options.start == StartPosition::kAfterSequence) {
    request.set_after_sequence(options.after_sequence);
  } else if (options.start == StartPosition::kAfterToken) {
    request.set_resume_token(options.resume_token);
  }
  return request;
}

v1::StartPosition StartPositionToProto(StartPosition start) {
  switch (start) {
    case StartPosition::kNew:
      return v1::START_POSITION_NEW;
    case StartPosition::kOldest:
      return v1::START_POSITION_OLDEST;
    case StartPosition::kAfterSequence:
      return v1::START_POSITION_AFTER_SEQUENCE;
    case StartPosition::kAfterToken:
      return v1::START_POSITION_AFTER_TOKEN;
  }
  return v1::START_POSITION_UNSPECIFIED;
}

v1::CreateConsumerGroupRequest CreateConsumerGroupRequestToProto(
    const ConsumerGroupOptions& options) {
  v1::CreateConsumerGroupRequest request;
  request.set_name(options.name);
  for (const std::string& collection : options.collections) request.add_collections(collection);
  request.set_collection_prefix(options.collection_prefix);
  request.set_include_values(options.include_values);
  request.set_start_position(StartPositionToProto(options.start));
  request.set_after_sequence(options.after_sequence);
  if (options.visibility_timeout.has_value()) {
    DurationToProto(*options.visibility_timeout, request.mutable_visibility_timeout());
  }
  request.set_max_deliveries(options.max_deliveries);
  request.set_max_unacked_per_consumer(options.max_unacked_per_consumer);
  return request;
}

v1::ResetConsumerGroupRequest ResetConsumerGroupRequestToProto(const std::string& name,
                                                               StartPosition start,
                                                               uint64_t after_sequence) {
  v1::ResetConsumerGroupRequest request;
  request.set_name(name);
  request.set_start_position(StartPositionToProto(start));
  request.set_after_sequence(after_sequence);
  return request;
}

v1::PollRequest PollRequestToProto(const std::string& group, const std::string& consumer,
                                   const PollOptions& options) {
  v1::PollRequest request;
  request.set_group(group);
  request.set_consumer(consumer);
  request.set_max_events(options.max_events);
  if (options.wait > absl::ZeroDuration()) DurationToProto(options.wait, request.mutable_wait());
  return request;
}

v1::ConsumeRequest ConsumeStartToProto(const std::string& group, const std::string& consumer,
                                       uint32_t max_in_flight, uint32_t max_batch) {
  v1::ConsumeRequest request;
  v1::ConsumeStart* start = request.mutable_start();
  start->set_group(group);
  start->set_consumer(consumer);
  start->set_max_in_flight(max_in_flight);
  start->set_max_batch(max_batch);
  return request;
}

void LeasesToProto(const std::vector<LeaseRef>& leases,
                   google::protobuf::RepeatedPtrField<v1::LeaseRef>* out) {
  out->Reserve(static_cast<int>(leases.size()));
  for (const LeaseRef& lease : leases) {
    v1::LeaseRef* ref = out->Add();
    ref->set_sequence(lease.sequence);
    ref->set_delivery_count(lease.delivery_count);
  }
}

// ---- Responses --------------------------------------------------------------

absl::StatusOr<std::vector<PutResult>> FromProto(const v1::PutMembersResponse& response) {
  return AllFromProto<PutResult>(
      response.results(), [](const v1::PutMemberResult& result) -> absl::StatusOr<PutResult> {
        absl::StatusOr<PutOutcome> outcome =
            OutcomeFromProto<PutOutcome>("PutMembers", result.outcome(),
                                         {{v1::PUT_OUTCOME_CREATED, PutOutcome::kCreated},
                                          {v1::PUT_OUTCOME_REPLACED, PutOutcome::kReplaced},
                                          {v1::PUT_OUTCOME_SKIPPED, PutOutcome::kSkipped}});
        if (!outcome.ok()) return outcome.status();
        return PutResult{result.key(), *outcome, ExpireTimeFromProto(result)};
      });
}

std::vector<GetResult> FromProto(const v1::GetMembersResponse& response) {
  return EachFromProto<GetResult>(response.results(), [](const v1::GetMemberResult& result) {
    return GetResult{result.found(), MemberFromProto(result.member())};
  });
}

std::vector<RemoveResult> FromProto(const v1::RemoveMembersResponse& response) {
  return EachFromProto<RemoveResult>(response.results(), [](const v1::RemoveMemberResult& result) {
    return RemoveResult{result.key(), result.existed()};
  });
}

absl::StatusOr<std::vector<ExpireResult>> FromProto(const v1::ExpireMembersResponse& response) {
  return AllFromProto<ExpireResult>(
      response.results(), [](const v1::ExpireMemberResult& result) -> absl::StatusOr<ExpireResult> {
        absl::StatusOr<ExpireOutcome> outcome = OutcomeFromProto<ExpireOutcome>(
            "ExpireMembers", result.outcome(),
            {{v1::EXPIRE_OUTCOME_UPDATED, ExpireOutcome::kUpdated},
             {v1::EXPIRE_OUTCOME_CONDITION_NOT_MET, ExpireOutcome::kConditionNotMet},
             {v1::EXPIRE_OUTCOME_NOT_FOUND, ExpireOutcome::kNotFound},
             {v1::EXPIRE_OUTCOME_EXPIRED, ExpireOutcome::kExpired}});
        if (!outcome.ok()) return outcome.status();
        return ExpireResult{result.key(), *outcome, ExpireTimeFromProto(result)};
      });
}

absl::StatusOr<std::vector<PersistResult>> FromProto(const v1::PersistMembersResponse& response) {
  return AllFromProto<PersistResult>(
      response.results(),
      [](const v1::PersistMemberResult& result) -> absl::StatusOr<PersistResult> {
        absl::StatusOr<PersistOutcome> outcome = OutcomeFromProto<PersistOutcome>(
            "PersistMembers", result.outcome(),
            {{v1::PERSIST_OUTCOME_PERSISTED, PersistOutcome::kPersisted},
             {v1::PERSIST_OUTCOME_NO_EXPIRATION, PersistOutcome::kNoExpiration},
             {v1::PERSIST_OUTCOME_NOT_FOUND, PersistOutcome::kNotFound}});
        if (!outcome.ok()) return outcome.status();
        return PersistResult{result.key(), *outcome};
      });
}

MemberPage FromProto(const v1::ListMembersResponse& response) {
  MemberPage page;
  page.members = EachFromProto<Member>(response.members(), &MemberFromProto);
  page.next_page_token = response.next_page_token();
  return page;
}

CollectionInfo FromProto(const v1::GetCollectionResponse& response) {
  return CollectionFromProto(response.collection());
}

CollectionPage FromProto(const v1::ListCollectionsResponse& response) {
  CollectionPage page;
  page.collections = EachFromProto<CollectionInfo>(response.collections(), &CollectionFromProto);
  page.next_page_token = response.next_page_token();
  return page;
}

uint64_t FromProto(const v1::DeleteCollectionResponse& response) {
  return response.removed_count();
}

ConsumerGroupInfo FromProto(const v1::CreateConsumerGroupResponse& response) {
  return GroupFromProto(response.group());
}

ConsumerGroupInfo FromProto(const v1::GetConsumerGroupResponse& response) {
  return GroupFromProto(response.group());
}

ConsumerGroupPage FromProto(const v1::ListConsumerGroupsResponse& response) {
  ConsumerGroupPage page;
  page.groups = EachFromProto<ConsumerGroupInfo>(response.groups(), &GroupFromProto);
  page.next_page_token = response.next_page_token();
  return page;
}

ConsumerGroupInfo FromProto(const v1::DeleteConsumerGroupResponse& response) {
  return GroupFromProto(response.group());
}

ConsumerGroupInfo FromProto(const v1::ResetConsumerGroupResponse& response) {
  return GroupFromProto(response.group());
}

PollResult FromProto(const v1::PollResponse& response) {
  PollResult result;
  result.deliveries = EachFromProto<Delivery>(response.deliveries(), &DeliveryFromProto);
  result.lost_first_sequence = response.lost_first_sequence();
  result.lost_last_sequence = response.lost_last_sequence();
  return result;
}

std::vector<LeaseResult> FromProto(const v1::AckResponse& response) {
  return EachFromProto<LeaseResult>(response.results(), &LeaseResultFromProto);
}

std::vector<LeaseResult> FromProto(const v1::NackResponse& response) {
  return EachFromProto<LeaseResult>(response.results(), &LeaseResultFromProto);
}

std::vector<LeaseResult> FromProto(const v1::ExtendLeasesResponse& response) {
  return EachFromProto<LeaseResult>(response.results(), &LeaseResultFromProto);
}

DeadLetterPage FromProto(const v1::ListDeadLettersResponse& response) {
  DeadLetterPage page;
  page.dead_letters =
      EachFromProto<DeadLetter>(response.dead_letters(), [](const v1::DeadLetter& letter) {
        return DeadLetter{EventFromProto(letter.event()), letter.delivery_count(),
                          letter.consumer(), TimeFromProto(letter.dead_lettered_at())};
      });
  page.next_page_token = response.next_page_token();
  return page;
}

uint64_t FromProto(const v1::RedriveDeadLettersResponse& response) {
  return response.redriven_count();
}

Delivery DeliveryFromProto(const v1::Delivery& delivery) {
  return Delivery{EventFromProto(delivery.event()), delivery.delivery_count(),
                  TimeFromProto(delivery.lease_deadline())};
}

LeaseResult LeaseResultFromProto(const v1::LeaseResult& result) {
  return LeaseResult{result.sequence(),
                     absl::Status(static_cast<absl::StatusCode>(result.code()), result.message())};
}

ExpiryEvent EventFromProto(const v1::ExpiryEvent& event) {
  ExpiryEvent out;
  EventFromProto(event, &out);
  return out;
}

void EventFromProto(const v1::ExpiryEvent& event, ExpiryEvent* out) {
  out->sequence = event.sequence();
  out->collection = event.collection();
  out->key = event.key();
  out->value = event.value();
  out->expire_time = TimeFromProto(event.expire_time());
  out->expired_at = TimeFromProto(event.expired_at());
}

}  // namespace lapse::client::internal

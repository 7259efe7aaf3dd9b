#include "lapse/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cpp/connection.h"
#include "client/cpp/convert.h"
#include "client/cpp/event_queue.h"
#include "client/cpp/watch_loop.h"
#include "grpcpp/security/credentials.h"

namespace lapse::client {
namespace {

using internal::Connection;
using internal::DurationToProto;
using internal::ExpireTimeFromProto;
using internal::Idempotency;
using internal::TimeFromProto;
using internal::TimeToProto;

// A response the client cannot read, e.g. an outcome this client predates.
absl::Status Unexpected(absl::string_view rpc, absl::string_view what, int value) {
  return absl::UnknownError(
      absl::StrCat(rpc, ": unexpected ", what, " ", value, " in the response"));
}

// Fills an AIP-214 `oneof expiration`: `set_time` and `set_ttl` return the
// arm to fill (mutable_expire_time, mutable_ttl).
template <typename TimeSetter, typename TtlSetter>
void SetExpiration(const Expiration& expiration, TimeSetter set_time,
                   TtlSetter set_ttl) {
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

template <typename Request>
void AddKeys(const std::vector<std::string>& keys, Request* request) {
  request->mutable_keys()->Reserve(static_cast<int>(keys.size()));
  for (const std::string& key : keys) request->add_keys(key);
}

}  // namespace

// ---- Subscription and EventStream --------------------------------------------

Subscription::Subscription(std::unique_ptr<internal::WatchLoop> loop)
    : loop_(std::move(loop)) {}

Subscription::~Subscription() { Cancel(); }

void Subscription::Cancel() { loop_->Cancel(); }

uint64_t Subscription::position() const { return loop_->position(); }

EventStream::EventStream(std::unique_ptr<internal::EventQueue> queue,
                         std::unique_ptr<Subscription> subscription)
    : queue_(std::move(queue)), subscription_(std::move(subscription)) {}

EventStream::~EventStream() { Cancel(); }

absl::StatusOr<ExpiryEvent> EventStream::Next(absl::Duration timeout) {
  return queue_->Next(timeout);
}

void EventStream::Cancel() {
  // Closing first frees a handler waiting for room, so the join is prompt.
  queue_->Close();
  subscription_->Cancel();
}

// ---- Client -----------------------------------------------------------------

Client::Client(const std::string& target, const ClientOptions& options)
    : Client(target, grpc::InsecureChannelCredentials(), options) {}

Client::Client(const std::string& target,
               std::shared_ptr<grpc::ChannelCredentials> credentials,
               const ClientOptions& options)
    : options_(options),
      connection_(std::make_shared<Connection>(target, std::move(credentials),
                                               options)) {}

Client::~Client() = default;

absl::StatusOr<std::vector<PutResult>> Client::PutMembers(
    const std::string& collection, const std::vector<MemberWrite>& members,
    const PutOptions& options, const CallOptions& call) {
  v1::PutMembersRequest request;
  request.set_collection(collection);
  request.set_max_members(options.max_members);
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
  absl::StatusOr<v1::PutMembersResponse> response =
      connection_->Call<v1::PutMembersResponse>(
          Idempotency::kNotIdempotent, call,
          [&](grpc::ClientContext* context, v1::PutMembersResponse* out) {
            return connection_->stub().PutMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  std::vector<PutResult> results;
  results.reserve(response->results_size());
  for (const v1::PutMemberResult& result : response->results()) {
    PutResult out;
    out.key = result.key();
    switch (result.outcome()) {
      case v1::PUT_OUTCOME_CREATED:
        out.outcome = PutOutcome::kCreated;
        break;
      case v1::PUT_OUTCOME_REPLACED:
        out.outcome = PutOutcome::kReplaced;
        break;
      case v1::PUT_OUTCOME_SKIPPED:
        out.outcome = PutOutcome::kSkipped;
        break;
      default:
        return Unexpected("PutMembers", "outcome", result.outcome());
    }
    out.expire_time = ExpireTimeFromProto(result);
    results.push_back(std::move(out));
  }
  return results;
}

absl::StatusOr<std::vector<GetResult>> Client::GetMembers(
    const std::string& collection, const std::vector<std::string>& keys,
    const GetOptions& options, const CallOptions& call) {
  v1::GetMembersRequest request;
  request.set_collection(collection);
  AddKeys(keys, &request);
  SetExpiration(
      options.refresh,
      [&request] { return request.mutable_refresh_expire_time(); },
      [&request] { return request.mutable_refresh_ttl(); });
  // A refresh moves deadlines relative to when it runs: a repeat after an
  // applied attempt would move them again.
  const Idempotency idempotency = options.refresh.kind() == Expiration::Kind::kNone
                                      ? Idempotency::kIdempotent
                                      : Idempotency::kNotIdempotent;
  absl::StatusOr<v1::GetMembersResponse> response =
      connection_->Call<v1::GetMembersResponse>(
          idempotency, call,
          [&](grpc::ClientContext* context, v1::GetMembersResponse* out) {
            return connection_->stub().GetMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  std::vector<GetResult> results;
  results.reserve(response->results_size());
  for (const v1::GetMemberResult& result : response->results()) {
    GetResult out;
    out.found = result.found();
    out.member = MemberFromProto(result.member());
    results.push_back(std::move(out));
  }
  return results;
}

absl::StatusOr<std::vector<RemoveResult>> Client::RemoveMembers(
    const std::string& collection, const std::vector<std::string>& keys,
    const CallOptions& call) {
  v1::RemoveMembersRequest request;
  request.set_collection(collection);
  AddKeys(keys, &request);
  absl::StatusOr<v1::RemoveMembersResponse> response =
      connection_->Call<v1::RemoveMembersResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::RemoveMembersResponse* out) {
            return connection_->stub().RemoveMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  std::vector<RemoveResult> results;
  results.reserve(response->results_size());
  for (const v1::RemoveMemberResult& result : response->results()) {
    results.push_back({result.key(), result.existed()});
  }
  return results;
}

absl::StatusOr<std::vector<ExpireResult>> Client::ExpireMembers(
    const std::string& collection, const std::vector<std::string>& keys,
    const Expiration& expiration, ExpireCondition condition,
    const CallOptions& call) {
  v1::ExpireMembersRequest request;
  request.set_collection(collection);
  AddKeys(keys, &request);
  SetExpiration(
      expiration, [&request] { return request.mutable_expire_time(); },
      [&request] { return request.mutable_ttl(); });
  request.set_condition(ExpireConditionToProto(condition));
  absl::StatusOr<v1::ExpireMembersResponse> response =
      connection_->Call<v1::ExpireMembersResponse>(
          Idempotency::kNotIdempotent, call,
          [&](grpc::ClientContext* context, v1::ExpireMembersResponse* out) {
            return connection_->stub().ExpireMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  std::vector<ExpireResult> results;
  results.reserve(response->results_size());
  for (const v1::ExpireMemberResult& result : response->results()) {
    ExpireResult out;
    out.key = result.key();
    switch (result.outcome()) {
      case v1::EXPIRE_OUTCOME_UPDATED:
        out.outcome = ExpireOutcome::kUpdated;
        break;
      case v1::EXPIRE_OUTCOME_CONDITION_NOT_MET:
        out.outcome = ExpireOutcome::kConditionNotMet;
        break;
      case v1::EXPIRE_OUTCOME_NOT_FOUND:
        out.outcome = ExpireOutcome::kNotFound;
        break;
      case v1::EXPIRE_OUTCOME_EXPIRED:
        out.outcome = ExpireOutcome::kExpired;
        break;
      default:
        return Unexpected("ExpireMembers", "outcome", result.outcome());
    }
    out.expire_time = ExpireTimeFromProto(result);
    results.push_back(std::move(out));
  }
  return results;
}

absl::StatusOr<std::vector<PersistResult>> Client::PersistMembers(
    const std::string& collection, const std::vector<std::string>& keys,
    const CallOptions& call) {
  v1::PersistMembersRequest request;
  request.set_collection(collection);
  AddKeys(keys, &request);
  absl::StatusOr<v1::PersistMembersResponse> response =
      connection_->Call<v1::PersistMembersResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::PersistMembersResponse* out) {
            return connection_->stub().PersistMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  std::vector<PersistResult> results;
  results.reserve(response->results_size());
  for (const v1::PersistMemberResult& result : response->results()) {
    PersistResult out;
    out.key = result.key();
    switch (result.outcome()) {
      case v1::PERSIST_OUTCOME_PERSISTED:
        out.outcome = PersistOutcome::kPersisted;
        break;
      case v1::PERSIST_OUTCOME_NO_EXPIRATION:
        out.outcome = PersistOutcome::kNoExpiration;
        break;
      case v1::PERSIST_OUTCOME_NOT_FOUND:
        out.outcome = PersistOutcome::kNotFound;
        break;
      default:
        return Unexpected("PersistMembers", "outcome", result.outcome());
    }
    results.push_back(std::move(out));
  }
  return results;
}

absl::StatusOr<MemberPage> Client::ListMembers(const std::string& collection,
                                               const ListMembersOptions& options,
                                               const CallOptions& call) {
  v1::ListMembersRequest request;
  request.set_collection(collection);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  request.set_order_by(options.order_by == MemberOrder::kExpireTime
                           ? v1::MEMBER_ORDER_EXPIRE_TIME
                           : v1::MEMBER_ORDER_KEY);
  request.set_keys_only(options.keys_only);
  absl::StatusOr<v1::ListMembersResponse> response =
      connection_->Call<v1::ListMembersResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::ListMembersResponse* out) {
            return connection_->stub().ListMembers(context, request, out);
          });
  if (!response.ok()) return response.status();
  MemberPage page;
  page.members.reserve(response->members_size());
  for (const v1::Member& member : response->members()) {
    page.members.push_back(MemberFromProto(member));
  }
  page.next_page_token = response->next_page_token();
  return page;
}

absl::StatusOr<CollectionInfo> Client::GetCollection(const std::string& name,
                                                     const CallOptions& call) {
  v1::GetCollectionRequest request;
  request.set_name(name);
  absl::StatusOr<v1::GetCollectionResponse> response =
      connection_->Call<v1::GetCollectionResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::GetCollectionResponse* out) {
            return connection_->stub().GetCollection(context, request, out);
          });
  if (!response.ok()) return response.status();
  return CollectionFromProto(response->collection());
}

absl::StatusOr<CollectionPage> Client::ListCollections(
    const ListCollectionsOptions& options, const CallOptions& call) {
  v1::ListCollectionsRequest request;
  request.set_prefix(options.prefix);
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  absl::StatusOr<v1::ListCollectionsResponse> response =
      connection_->Call<v1::ListCollectionsResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::ListCollectionsResponse* out) {
            return connection_->stub().ListCollections(context, request, out);
          });
  if (!response.ok()) return response.status();
  CollectionPage page;
  page.collections.reserve(response->collections_size());
  for (const v1::CollectionInfo& info : response->collections()) {
    page.collections.push_back(CollectionFromProto(info));
  }
  page.next_page_token = response->next_page_token();
  return page;
}

absl::StatusOr<uint64_t> Client::DeleteCollection(const std::string& name,
                                                  const CallOptions& call) {
  v1::DeleteCollectionRequest request;
  request.set_name(name);
  absl::StatusOr<v1::DeleteCollectionResponse> response =
      connection_->Call<v1::DeleteCollectionResponse>(
          Idempotency::kIdempotent, call,
          [&](grpc::ClientContext* context, v1::DeleteCollectionResponse* out) {
            return connection_->stub().DeleteCollection(context, request, out);
          });
  if (!response.ok()) return response.status();
  return response->removed_count();
}

absl::StatusOr<std::unique_ptr<Subscription>> Client::Watch(
    const WatchOptions& options, WatchHandlers handlers) {
  if (!handlers.on_event) {
    return absl::InvalidArgumentError("Watch: handlers.on_event is required");
  }
  if (!options.collections.empty() && !options.collection_prefix.empty()) {
    return absl::InvalidArgumentError(
        "Watch: at most one of collections and collection_prefix may be set");
  }
  return std::unique_ptr<Subscription>(
      new Subscription(std::make_unique<internal::WatchLoop>(
          connection_, options, std::move(handlers), options_.watch_backoff)));
}

absl::StatusOr<std::unique_ptr<EventStream>> Client::WatchStream(
    const WatchOptions& options, size_t queue_capacity) {
  auto queue = std::make_unique<internal::EventQueue>(queue_capacity);
  internal::EventQueue* events = queue.get();
  WatchHandlers handlers;
  handlers.on_event = [events](const ExpiryEvent& event) { events->Push(event); };
  handlers.on_error = [events](const absl::Status& status) { events->End(status); };
  absl::StatusOr<std::unique_ptr<Subscription>> subscription =
      Watch(options, std::move(handlers));
  if (!subscription.ok()) return subscription.status();
  return std::unique_ptr<EventStream>(
      new EventStream(std::move(queue), *std::move(subscription)));
}

}  // namespace lapse::client

#include "server/service/lapse_service.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "server/service/proto_convert.h"
#include "server/service/watch_reactor.h"

namespace lapse {
namespace {

using KeyList = google::protobuf::RepeatedPtrField<std::string>;

grpc::Status Draining() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
}

// A WatchExpirations stream refused before it starts.
class RejectedWatch final
    : public grpc::ServerWriteReactor<v1::WatchExpirationsResponse> {
 public:
  explicit RejectedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

std::vector<absl::string_view> KeyViews(const KeyList& keys) {
  return std::vector<absl::string_view>(keys.begin(), keys.end());
}

absl::StatusOr<Expiration> WriteExpiration(const v1::MemberWrite& write,
                                           absl::string_view field) {
  switch (write.expiration_case()) {
    case v1::MemberWrite::kExpireTime:
      return ExpirationAt(write.expire_time(),
                          absl::StrCat(field, ".expire_time"));
    case v1::MemberWrite::kTtl:
      return ExpirationTtl(write.ttl(), absl::StrCat(field, ".ttl"));
    case v1::MemberWrite::EXPIRATION_NOT_SET:
      break;
  }
  return Expiration::None();
}

absl::StatusOr<Expiration> RefreshExpiration(
    const v1::GetMembersRequest& request) {
  switch (request.refresh_expiration_case()) {
    case v1::GetMembersRequest::kRefreshExpireTime:
      return ExpirationAt(request.refresh_expire_time(), "refresh_expire_time");
    case v1::GetMembersRequest::kRefreshTtl:
      return ExpirationTtl(request.refresh_ttl(), "refresh_ttl");
    case v1::GetMembersRequest::REFRESH_EXPIRATION_NOT_SET:
      break;
  }
  return Expiration::None();
}

absl::StatusOr<Expiration> NewExpiration(
    const v1::ExpireMembersRequest& request) {
  switch (request.expiration_case()) {
    case v1::ExpireMembersRequest::kExpireTime:
      return ExpirationAt(request.expire_time(), "expire_time");
    case v1::ExpireMembersRequest::kTtl:
      return ExpirationTtl(request.ttl(), "ttl");
    case v1::ExpireMembersRequest::EXPIRATION_NOT_SET:
      break;
  }
  return Expiration::None();
}

absl::Status HandlePutMembers(Engine& engine,
                              const v1::PutMembersRequest& request,
                              v1::PutMembersResponse* response) {
  std::vector<MemberWrite> writes;
  writes.reserve(request.members_size());
  for (int i = 0; i < request.members_size(); ++i) {
    const v1::MemberWrite& member = request.members(i);
    const std::string field = absl::StrCat("members[", i, "]");
    absl::StatusOr<Expiration> expiration = WriteExpiration(member, field);
    if (!expiration.ok()) return expiration.status();
    absl::StatusOr<PutCondition> condition = PutConditionFromProto(
        member.condition(), absl::StrCat(field, ".condition"));
    if (!condition.ok()) return condition.status();
    MemberWrite& write = writes.emplace_back();
    write.key = member.key();
    write.value = member.value();
    write.expiration = *expiration;
    write.condition = *condition;
    write.keep_expiration = member.keep_expiration();
  }
  PutOptions options;
  options.max_members = request.max_members();
  absl::StatusOr<std::vector<PutResult>> results =
      engine.Put(request.collection(), writes, options);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < results->size(); ++i) {
    const PutResult& result = (*results)[i];
    v1::PutMemberResult* out = response->add_results();
    out->set_key(request.members(static_cast<int>(i)).key());
    out->set_outcome(PutOutcomeToProto(result.outcome));
    if (auto ts = TimeToProto(result.expire_time)) {
      *out->mutable_expire_time() = *std::move(ts);
    }
  }
  return absl::OkStatus();
}

absl::Status HandleGetMembers(Engine& engine,
                              const v1::GetMembersRequest& request,
                              v1::GetMembersResponse* response) {
  absl::StatusOr<Expiration> refresh = RefreshExpiration(request);
  if (!refresh.ok()) return refresh.status();
  absl::StatusOr<std::vector<GetResult>> results =
      engine.Get(request.collection(), KeyViews(request.keys()), *refresh);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < results->size(); ++i) {
    const GetResult& result = (*results)[i];
    v1::GetMemberResult* out = response->add_results();
    out->set_found(result.found);
    v1::Member* member = out->mutable_member();
    member->set_key(request.keys(static_cast<int>(i)));
    if (!result.found) continue;
    member->set_value(result.value);
    if (auto ts = TimeToProto(result.expire_time)) {
      *member->mutable_expire_time() = *std::move(ts);
    }
  }
  return absl::OkStatus();
}

absl::Status HandleRemoveMembers(Engine& engine,
                                 const v1::RemoveMembersRequest& request,
                                 v1::RemoveMembersResponse* response) {
  absl::StatusOr<std::vector<bool>> existed =
      engine.Remove(request.collection(), KeyViews(request.keys()));
  if (!existed.ok()) return existed.status();
  for (size_t i = 0; i < existed->size(); ++i) {
    v1::RemoveMemberResult* out = response->add_results();
    out->set_key(request.keys(static_cast<int>(i)));
    out->set_existed((*existed)[i]);
  }
  return absl::OkStatus();
}

absl::Status HandleExpireMembers(Engine& engine,
                                 const v1::ExpireMembersRequest& request,
                                 v1::ExpireMembersResponse* response) {
  absl::StatusOr<Expiration> expiration = NewExpiration(request);
  if (!expiration.ok()) return expiration.status();
  absl::StatusOr<ExpireCondition> condition =
      ExpireConditionFromProto(request.condition(), "condition");
  if (!condition.ok()) return condition.status();
  absl::StatusOr<std::vector<ExpireResult>> results =
      engine.Expire(request.collection(), KeyViews(request.keys()),
                    *expiration, *condition);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < results->size(); ++i) {
    const ExpireResult& result = (*results)[i];
    v1::ExpireMemberResult* out = response->add_results();
    out->set_key(request.keys(static_cast<int>(i)));
    out->set_outcome(ExpireOutcomeToProto(result.outcome));
    if (auto ts = TimeToProto(result.expire_time)) {
      *out->mutable_expire_time() = *std::move(ts);
    }
  }
  return absl::OkStatus();
}

absl::Status HandlePersistMembers(Engine& engine,
                                  const v1::PersistMembersRequest& request,
                                  v1::PersistMembersResponse* response) {
  absl::StatusOr<std::vector<PersistOutcome>> outcomes =
      engine.Persist(request.collection(), KeyViews(request.keys()));
  if (!outcomes.ok()) return outcomes.status();
  for (size_t i = 0; i < outcomes->size(); ++i) {
    v1::PersistMemberResult* out = response->add_results();
    out->set_key(request.keys(static_cast<int>(i)));
    out->set_outcome(PersistOutcomeToProto((*outcomes)[i]));
  }
  return absl::OkStatus();
}

absl::Status HandleListMembers(Engine& engine,
                               const v1::ListMembersRequest& request,
                               v1::ListMembersResponse* response) {
  absl::StatusOr<MemberOrder> order =
      MemberOrderFromProto(request.order_by(), "order_by");
  if (!order.ok()) return order.status();
  ListMembersOptions options;
  options.order = *order;
  options.page_size = request.page_size();
  options.keys_only = request.keys_only();
  if (!request.page_token().empty()) {
    absl::StatusOr<MemberCursor> after = DecodeMemberPageToken(
        request.page_token(), request.collection(), *order);
    if (!after.ok()) return after.status();
    options.after = *std::move(after);
  }
  absl::StatusOr<MemberPage> page =
      engine.ListMembers(request.collection(), options);
  if (!page.ok()) return page.status();
  for (const MemberData& member : page->members) {
    MemberToProto(member, response->add_members());
  }
  if (page->next.has_value()) {
    response->set_next_page_token(
        EncodeMemberPageToken(request.collection(), *order, *page->next));
  }
  return absl::OkStatus();
}

absl::Status HandleGetCollection(Engine& engine,
                                 const v1::GetCollectionRequest& request,
                                 v1::GetCollectionResponse* response) {
  absl::StatusOr<CollectionInfo> info = engine.GetCollection(request.name());
  if (!info.ok()) return info.status();
  CollectionInfoToProto(*info, response->mutable_collection());
  return absl::OkStatus();
}

absl::Status HandleListCollections(Engine& engine,
                                   const v1::ListCollectionsRequest& request,
                                   v1::ListCollectionsResponse* response) {
  std::string after;
  if (!request.page_token().empty()) {
    absl::StatusOr<std::string> decoded =
        DecodeCollectionPageToken(request.page_token(), request.prefix());
    if (!decoded.ok()) return decoded.status();
    after = *std::move(decoded);
  }
  absl::StatusOr<CollectionPage> page =
      engine.ListCollections(request.prefix(), request.page_size(), after);
  if (!page.ok()) return page.status();
  for (const CollectionInfo& info : page->collections) {
    CollectionInfoToProto(info, response->add_collections());
  }
  if (page->next_after.has_value()) {
    response->set_next_page_token(
        EncodeCollectionPageToken(request.prefix(), *page->next_after));
  }
  return absl::OkStatus();
}

absl::Status HandleDeleteCollection(Engine& engine,
                                    const v1::DeleteCollectionRequest& request,
                                    v1::DeleteCollectionResponse* response) {
  absl::StatusOr<uint64_t> removed = engine.DeleteCollection(request.name());
  if (!removed.ok()) return removed.status();
  response->set_removed_count(*removed);
  return absl::OkStatus();
}

absl::StatusOr<EventFilter> WatchFilter(const v1::WatchExpirationsRequest& request,
                                        const Limits& limits) {
  if (request.collections_size() > 0 && !request.collection_prefix().empty()) {
    return absl::InvalidArgumentError(
        "collections: at most one of collections and collection_prefix may "
        "be set");
  }
  if (static_cast<size_t>(request.collections_size()) >
      limits.max_watch_collections) {
    return absl::InvalidArgumentError(
        absl::StrCat("collections: ", request.collections_size(),
                     " entries exceed the limit of ",
                     limits.max_watch_collections));
  }
  EventFilter filter;
  for (int i = 0; i < request.collections_size(); ++i) {
    const std::string& name = request.collections(i);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("collections[", i, "]: must not be empty"));
    }
    if (name.size() > limits.max_collection_name_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("collections[", i, "]: ", name.size(),
                       " bytes exceeds the limit of ",
                       limits.max_collection_name_bytes));
    }
    filter.collections.insert(name);
  }
  if (request.collection_prefix().size() > limits.max_collection_name_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("collection_prefix: ", request.collection_prefix().size(),
                     " bytes exceeds the limit of ",
                     limits.max_collection_name_bytes));
  }
  filter.prefix = request.collection_prefix();
  filter.include_values = request.include_values();
  return filter;
}

// The sequence the stream starts after.
absl::StatusOr<uint64_t> WatchStart(const v1::WatchExpirationsRequest& request,
                                    const EventLog& log) {
  const v1::StartPosition position = request.start_position();
  if (request.after_sequence() != 0 &&
      position != v1::START_POSITION_AFTER_SEQUENCE) {
    return absl::InvalidArgumentError(
        "after_sequence: only allowed with START_POSITION_AFTER_SEQUENCE");
  }
  switch (position) {
    case v1::START_POSITION_UNSPECIFIED:
    case v1::START_POSITION_NEW:
      return log.last_sequence();
    case v1::START_POSITION_OLDEST:
      return log.oldest_retained_sequence() - 1;
    case v1::START_POSITION_AFTER_SEQUENCE: {
      if (absl::Status s = log.CheckPosition(request.after_sequence());
          !s.ok()) {
        return s;
      }
      return request.after_sequence();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("start_position: unknown value ", position));
  }
}

}  // namespace

LapseServiceImpl::LapseServiceImpl(Engine* engine, const EventLog* log,
                                   WatchHub* hub, DurableStore* store)
    : engine_(engine), log_(log), hub_(hub), store_(store) {}

void LapseServiceImpl::StartDraining() { draining_.store(true); }

template <typename Request, typename Response>
grpc::ServerUnaryReactor* LapseServiceImpl::Answer(
    grpc::CallbackServerContext* context, const Request& request,
    Response* response,
    absl::Status (*handler)(Engine&, const Request&, Response*),
    Changes changes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (draining_.load()) {
    reactor->Finish(Draining());
    return reactor;
  }
  const absl::Status status = handler(*engine_, request, response);
  if (!status.ok() || changes == Changes::kNone || store_ == nullptr) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  store_->WhenDurable([reactor](absl::Status durable) {
    reactor->Finish(ToGrpcStatus(durable));
  });
  return reactor;
}

grpc::ServerUnaryReactor* LapseServiceImpl::PutMembers(
    grpc::CallbackServerContext* context, const v1::PutMembersRequest* request,
    v1::PutMembersResponse* response) {
  return Answer(context, *request, response, &HandlePutMembers,
                Changes::kDurableBeforeAnswer);
}

grpc::ServerUnaryReactor* LapseServiceImpl::GetMembers(
    grpc::CallbackServerContext* context, const v1::GetMembersRequest* request,
    v1::GetMembersResponse* response) {
  // Only a Get that slides deadlines changes anything.
  const bool refreshes = request->refresh_expiration_case() !=
                         v1::GetMembersRequest::REFRESH_EXPIRATION_NOT_SET;
  return Answer(context, *request, response, &HandleGetMembers,
                refreshes ? Changes::kDurableBeforeAnswer : Changes::kNone);
}

grpc::ServerUnaryReactor* LapseServiceImpl::RemoveMembers(
    grpc::CallbackServerContext* context,
    const v1::RemoveMembersRequest* request,
    v1::RemoveMembersResponse* response) {
  return Answer(context, *request, response, &HandleRemoveMembers,
                Changes::kDurableBeforeAnswer);
}

grpc::ServerUnaryReactor* LapseServiceImpl::ExpireMembers(
    grpc::CallbackServerContext* context,
    const v1::ExpireMembersRequest* request,
    v1::ExpireMembersResponse* response) {
  return Answer(context, *request, response, &HandleExpireMembers,
                Changes::kDurableBeforeAnswer);
}

grpc::ServerUnaryReactor* LapseServiceImpl::PersistMembers(
    grpc::CallbackServerContext* context,
    const v1::PersistMembersRequest* request,
    v1::PersistMembersResponse* response) {
  return Answer(context, *request, response, &HandlePersistMembers,
                Changes::kDurableBeforeAnswer);
}

grpc::ServerUnaryReactor* LapseServiceImpl::ListMembers(
    grpc::CallbackServerContext* context, const v1::ListMembersRequest* request,
    v1::ListMembersResponse* response) {
  return Answer(context, *request, response, &HandleListMembers,
                Changes::kNone);
}

grpc::ServerUnaryReactor* LapseServiceImpl::GetCollection(
    grpc::CallbackServerContext* context,
    const v1::GetCollectionRequest* request,
    v1::GetCollectionResponse* response) {
  return Answer(context, *request, response, &HandleGetCollection,
                Changes::kNone);
}

grpc::ServerUnaryReactor* LapseServiceImpl::ListCollections(
    grpc::CallbackServerContext* context,
    const v1::ListCollectionsRequest* request,
    v1::ListCollectionsResponse* response) {
  return Answer(context, *request, response, &HandleListCollections,
                Changes::kNone);
}

grpc::ServerUnaryReactor* LapseServiceImpl::DeleteCollection(
    grpc::CallbackServerContext* context,
    const v1::DeleteCollectionRequest* request,
    v1::DeleteCollectionResponse* response) {
  return Answer(context, *request, response, &HandleDeleteCollection,
                Changes::kDurableBeforeAnswer);
}

grpc::ServerWriteReactor<v1::WatchExpirationsResponse>*
LapseServiceImpl::WatchExpirations(grpc::CallbackServerContext* context,
                                   const v1::WatchExpirationsRequest* request) {
  if (draining_.load()) return new RejectedWatch(Draining());
  absl::StatusOr<EventFilter> filter = WatchFilter(*request, engine_->limits());
  if (!filter.ok()) return new RejectedWatch(ToGrpcStatus(filter.status()));
  absl::StatusOr<uint64_t> after = WatchStart(*request, *log_);
  if (!after.ok()) return new RejectedWatch(ToGrpcStatus(after.status()));
  return new WatchReactor(hub_, log_, *std::move(filter), *after);
}

}  // namespace lapse

#include "server/service/lapse_service.h"

#include <array>
#include <cassert>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/support/message_allocator.h"
#include "server/base/deadline.h"
#include "server/base/log.h"
#include "server/service/authorizer.h"
#include "server/service/consume_reactor.h"
#include "server/service/consumer_group_handlers.h"
#include "server/service/operation.h"
#include "server/service/poll_reactor.h"
#include "server/service/proto_convert.h"
#include "server/service/reply.h"
#include "server/service/request_parser.h"
#include "server/service/watch_reactor.h"
#include "server/service/write_stream_reactor.h"

namespace lapse {
namespace {

using KeyList = google::protobuf::RepeatedPtrField<std::string>;

grpc::Status Draining() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
}

// A WatchExpirations stream refused before it starts.
class RejectedWatch final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RejectedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// A unary call's reactor: finishes the call when its operation ends.
class UnaryCall final : public grpc::ServerUnaryReactor, public OperationEnd {
 public:
  void End(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// The messages of one unary call on one protobuf arena: the request bytes,
// the request parsed from them and the response, every string and
// submessage in them included, are freed at once when the call ends instead
// of one by one (a PutMembersRequest of 1000 members is some 4000 objects).
// gRPC releases it after the reactor's OnDone, so the store's answer may
// read the request until the call finishes.
template <typename Request, typename Response>
class ArenaCall final : public grpc::MessageHolder<grpc::ByteBuffer, Response> {
 public:
  ArenaCall() : arena_(MessageArenaOptions()), request_(NewRequest(&arena_)) {
    this->set_request(&bytes_);
    this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
  }
  ArenaCall(const ArenaCall&) = delete;
  ArenaCall& operator=(const ArenaCall&) = delete;

  // The call's ArenaCall, which ArenaMessages made for it.
  static ArenaCall& Of(grpc::CallbackServerContext& context) {
    return *static_cast<ArenaCall*>(context.GetRpcAllocatorState());
  }

  Request& parsed() { return *request_; }
  void Release() override { delete this; }

 private:
  // A generated message, or a PutMembersView (destroyed with the arena).
  static Request* NewRequest(google::protobuf::Arena* arena) {
    if constexpr (std::is_base_of_v<google::protobuf::MessageLite, Request>) {
      return google::protobuf::Arena::CreateMessage<Request>(arena);
    } else {
      return google::protobuf::Arena::Create<Request>(arena);
    }
  }

  google::protobuf::Arena arena_;
  grpc::ByteBuffer bytes_;
  Request* const request_;
};

template <typename Request, typename Response>
class ArenaMessages final : public grpc::MessageAllocator<grpc::ByteBuffer, Response> {
 public:
  grpc::MessageHolder<grpc::ByteBuffer, Response>* AllocateMessages() override {
    return new ArenaCall<Request, Response>;
  }
};

// The position of `method` in lapse.v1.LapseService, which is its index in
// the generated service's method table.
int MethodIndex(const char* method) {
  const google::protobuf::MethodDescriptor* found = v1::PutMembersRequest::descriptor()
                                                        ->file()
                                                        ->FindServiceByName("LapseService")
                                                        ->FindMethodByName(method);
  assert(found != nullptr);
  return found->index();
}

// Malformed requests are logged, but any client can send them: a few lines
// a minute at most.
void LogMalformed(const grpc::CallbackServerContext& context, const absl::Status& status) {
  static RateLimitedLog* const log = new RateLimitedLog(10, absl::Minutes(1));
  log->Log(LogLevel::kWarning, "refused a malformed request from %s: %s", context.peer(),
           status.message());
}

std::vector<absl::string_view> KeyViews(const KeyList& keys) {
  return std::vector<absl::string_view>(keys.begin(), keys.end());
}

// An `oneof expiration` of a PutMembersRequest: `time_field` or `ttl_field`.
absl::StatusOr<Expiration> ExpirationOf(const PutMembersView::Expiry& expiry,
                                        absl::string_view time_field, absl::string_view ttl_field) {
  switch (expiry.kind) {
    case PutMembersView::Expiry::Kind::kTime:
      return ExpirationAt(expiry.seconds, expiry.nanos, time_field);
    case PutMembersView::Expiry::Kind::kTtl:
      return ExpirationTtl(expiry.seconds, expiry.nanos, ttl_field);
    case PutMembersView::Expiry::Kind::kNone:
      break;
  }
  return Expiration::None();
}

// `status`, an error about a field of members[i] ("ttl: ..."), with the
// field named in full ("members[2].ttl: ..."). Formatted only for an error:
// the conversions run per member.
absl::Status InMember(int i, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("members[", i, "].", status.message()));
}

// Whether `write` takes the request's default expiration.
bool TakesDefault(const MemberWrite& write) {
  return write.expiration.kind == Expiration::Kind::kNone && !write.keep_expiration;
}

absl::StatusOr<Expiration> RefreshExpiration(const v1::GetMembersRequest& request) {
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

absl::StatusOr<Expiration> NewExpiration(const v1::ExpireMembersRequest& request) {
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

// A PutMembersResponse message filled through PutMembersBytes' interface
// (proto_convert.h), so that one Put serves both.
class PutMembersMessage {
 public:
  explicit PutMembersMessage(v1::PutMembersResponse* out) : out_(out) {}

  void Reserve(int results) { out_->mutable_results()->Reserve(results); }

  void AddResult(absl::string_view key, v1::PutOutcome outcome, absl::Time expire_time) {
    v1::PutMemberResult* result = out_->add_results();
    result->set_key(key.data(), key.size());
    result->set_outcome(outcome);
    if (expire_time != NoDeadline()) TimeToProto(expire_time, result->mutable_expire_time());
  }
  void set_created_count(uint32_t count) { out_->set_created_count(count); }
  bool has_default_expire_time() const { return out_->has_default_expire_time(); }
  void set_default_expire_time(absl::Time t) {
    TimeToProto(t, out_->mutable_default_expire_time());
  }
  void Finish() {}

 private:
  v1::PutMembersResponse* const out_;
};

// PutMembers' work, its answer written into `answer` (PutMembersMessage or
// PutMembersBytes) when the store has applied it.
template <typename Answer>
absl::Status Put(Store& store, const PutMembersView& request, Answer answer,
                 OperationEnd* reactor) {
  // The response names the members by the writes' keys: the writes stay
  // with it until the store answers. One inline: a single put allocates
  // them with the unique_ptr.
  auto writes = std::make_unique<absl::InlinedVector<MemberWrite, 1>>();
  writes->reserve(request.members.size());
  for (size_t i = 0; i < request.members.size(); ++i) {
    const PutMembersView::Member& member = request.members[i];
    absl::StatusOr<Expiration> expiration = ExpirationOf(member.expiration, "expire_time", "ttl");
    if (!expiration.ok()) return InMember(static_cast<int>(i), expiration.status());
    absl::StatusOr<PutCondition> condition =
        PutConditionFromProto(static_cast<v1::PutCondition>(member.condition), "condition");
    if (!condition.ok()) return InMember(static_cast<int>(i), condition.status());
    MemberWrite& write = writes->emplace_back();
    write.key = member.key;
    write.value = member.value;
    write.expiration = *expiration;
    write.condition = *condition;
    write.keep_expiration = member.keep_expiration;
  }
  PutOptions options;
  options.max_members = request.max_members;
  absl::StatusOr<Expiration> default_expiration =
      ExpirationOf(request.default_expiration, "default_expire_time", "default_ttl");
  if (!default_expiration.ok()) return default_expiration.status();
  options.default_expiration = *default_expiration;
  const bool has_default = request.default_expiration.kind != PutMembersView::Expiry::Kind::kNone;
  const bool omit_created = request.omit_created_results;
  const absl::Span<const MemberWrite> written(*writes);
  store.PutMembers(
      request.collection, written, options,
      Reply<std::vector<PutResult>>(reactor, [writes = std::move(writes), has_default, omit_created,
                                              answer](std::vector<PutResult> results) mutable {
        if (!omit_created) answer.Reserve(static_cast<int>(results.size()));
        uint32_t created = 0;
        for (size_t i = 0; i < results.size(); ++i) {
          const PutResult& result = results[i];
          const MemberWrite& write = (*writes)[i];
          if (has_default && !answer.has_default_expire_time() &&
              result.outcome != PutOutcome::kSkipped && TakesDefault(write) &&
              result.expire_time != NoDeadline()) {
            answer.set_default_expire_time(result.expire_time);
          }
          if (result.outcome == PutOutcome::kCreated) {
            ++created;
            if (omit_created) continue;
          }
          answer.AddResult(write.key, PutOutcomeToProto(result.outcome), result.expire_time);
        }
        answer.set_created_count(created);
        answer.Finish();
      }));
  return absl::OkStatus();
}

absl::Status HandlePutMembers(Store& store, const PutMembersView& request,
                              v1::PutMembersResponse* response, OperationEnd* reactor) {
  return Put(store, request, PutMembersMessage(response), reactor);
}

absl::Status HandleGetMembers(Store& store, const v1::GetMembersRequest& request,
                              v1::GetMembersResponse* response, OperationEnd* reactor) {
  absl::StatusOr<Expiration> refresh = RefreshExpiration(request);
  if (!refresh.ok()) return refresh.status();
  store.GetMembers(
      request.collection(), KeyViews(request.keys()), *refresh,
      Reply<std::vector<GetResult>>(reactor, [&request, response](std::vector<GetResult> results) {
        for (size_t i = 0; i < results.size(); ++i) {
          GetResult& result = results[i];
          v1::GetMemberResult* out = response->add_results();
          out->set_found(result.found);
          v1::Member* member = out->mutable_member();
          member->set_key(request.keys(static_cast<int>(i)));
          if (!result.found) continue;
          member->set_value(std::move(result.value));
          if (auto ts = TimeToProto(result.expire_time)) {
            *member->mutable_expire_time() = *std::move(ts);
          }
        }
      }));
  return absl::OkStatus();
}

absl::Status HandleRemoveMembers(Store& store, const v1::RemoveMembersRequest& request,
                                 v1::RemoveMembersResponse* response, OperationEnd* reactor) {
  store.RemoveMembers(
      request.collection(), KeyViews(request.keys()),
      Reply<std::vector<bool>>(reactor, [&request, response](std::vector<bool> existed) {
        for (size_t i = 0; i < existed.size(); ++i) {
          v1::RemoveMemberResult* out = response->add_results();
          out->set_key(request.keys(static_cast<int>(i)));
          out->set_existed(existed[i]);
        }
      }));
  return absl::OkStatus();
}

absl::Status HandleExpireMembers(Store& store, const v1::ExpireMembersRequest& request,
                                 v1::ExpireMembersResponse* response, OperationEnd* reactor) {
  absl::StatusOr<Expiration> expiration = NewExpiration(request);
  if (!expiration.ok()) return expiration.status();
  absl::StatusOr<ExpireCondition> condition =
      ExpireConditionFromProto(request.condition(), "condition");
  if (!condition.ok()) return condition.status();
  store.ExpireMembers(request.collection(), KeyViews(request.keys()), *expiration, *condition,
                      Reply<std::vector<ExpireResult>>(
                          reactor, [&request, response](std::vector<ExpireResult> results) {
                            for (size_t i = 0; i < results.size(); ++i) {
                              const ExpireResult& result = results[i];
                              v1::ExpireMemberResult* out = response->add_results();
                              out->set_key(request.keys(static_cast<int>(i)));
                              out->set_outcome(ExpireOutcomeToProto(result.outcome));
                              if (auto ts = TimeToProto(result.expire_time)) {
                                *out->mutable_expire_time() = *std::move(ts);
                              }
                            }
                          }));
  return absl::OkStatus();
}

absl::Status HandlePersistMembers(Store& store, const v1::PersistMembersRequest& request,
                                  v1::PersistMembersResponse* response, OperationEnd* reactor) {
  store.PersistMembers(request.collection(), KeyViews(request.keys()),
                       Reply<std::vector<PersistOutcome>>(
                           reactor, [&request, response](std::vector<PersistOutcome> outcomes) {
                             for (size_t i = 0; i < outcomes.size(); ++i) {
                               v1::PersistMemberResult* out = response->add_results();
                               out->set_key(request.keys(static_cast<int>(i)));
                               out->set_outcome(PersistOutcomeToProto(outcomes[i]));
                             }
                           }));
  return absl::OkStatus();
}

absl::Status HandleListMembers(Store& store, const v1::ListMembersRequest& request,
                               v1::ListMembersResponse* response, OperationEnd* reactor) {
  absl::StatusOr<MemberOrder> order = MemberOrderFromProto(request.order_by(), "order_by");
  if (!order.ok()) return order.status();
  ListMembersOptions options;
  options.order = *order;
  options.page_size = request.page_size();
  options.keys_only = request.keys_only();
  if (!request.page_token().empty()) {
    absl::StatusOr<MemberCursor> after =
        DecodeMemberPageToken(request.page_token(), request.collection(), *order);
    if (!after.ok()) return after.status();
    options.after = *std::move(after);
  }
  store.ListMembers(
      request.collection(), options,
      Reply<MemberPage>(reactor, [&request, response, order = *order](MemberPage page) {
        for (const ListedMember& member : page.members) {
          MemberToProto(member, response->add_members());
        }
        if (page.next.has_value()) {
          response->set_next_page_token(
              EncodeMemberPageToken(request.collection(), order, *page.next));
        }
      }));
  return absl::OkStatus();
}

absl::Status HandleGetCollection(Store& store, const v1::GetCollectionRequest& request,
                                 v1::GetCollectionResponse* response, OperationEnd* reactor) {
  store.GetCollection(request.name(),
                      Reply<CollectionInfo>(reactor, [response](CollectionInfo info) {
                        CollectionInfoToProto(info, response->mutable_collection());
                      }));
  return absl::OkStatus();
}

absl::Status HandleListCollections(Store& store, const v1::ListCollectionsRequest& request,
                                   v1::ListCollectionsResponse* response, OperationEnd* reactor) {
  absl::StatusOr<std::string> after = CollectionPageAfter(request.page_token(), request.prefix());
  if (!after.ok()) return after.status();
  store.ListCollections(request.prefix(), request.page_size(), *after,
                        Reply<CollectionPage>(reactor, [&request, response](CollectionPage page) {
                          for (const CollectionInfo& info : page.collections) {
                            CollectionInfoToProto(info, response->add_collections());
                          }
                          if (page.next_after.has_value()) {
                            response->set_next_page_token(
                                EncodeCollectionPageToken(request.prefix(), *page.next_after));
                          }
                        }));
  return absl::OkStatus();
}

absl::Status HandleDeleteCollection(Store& store, const v1::DeleteCollectionRequest& request,
                                    v1::DeleteCollectionResponse* response, OperationEnd* reactor) {
  store.DeleteCollection(request.name(), Reply<uint64_t>(reactor, [response](uint64_t removed) {
                           response->set_removed_count(removed);
                         }));
  return absl::OkStatus();
}

absl::StatusOr<EventFilter> WatchFilter(const v1::WatchExpirationsRequest& request,
                                        const Limits& limits) {
  if (request.collections_size() > 0 && !request.collection_prefix().empty()) {
    return absl::InvalidArgumentError(
        "collections: at most one of collections and collection_prefix may "
        "be set");
  }
  if (static_cast<size_t>(request.collections_size()) > limits.max_watch_collections) {
    return absl::InvalidArgumentError(absl::StrCat("collections: ", request.collections_size(),
                                                   " entries exceed the limit of ",
                                                   limits.max_watch_collections));
  }
  EventFilter filter;
  for (int i = 0; i < request.collections_size(); ++i) {
    const std::string& name = request.collections(i);
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("collections[", i, "]: must not be empty"));
    }
    if (name.size() > limits.max_collection_name_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("collections[", i, "]: ", name.size(),
                                                     " bytes exceeds the limit of ",
                                                     limits.max_collection_name_bytes));
    }
    filter.collections.insert(name);
  }
  if (request.collection_prefix().size() > limits.max_collection_name_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("collection_prefix: ", request.collection_prefix().size(),
                     " bytes exceeds the limit of ", limits.max_collection_name_bytes));
  }
  filter.prefix = request.collection_prefix();
  filter.include_values = request.include_values();
  return filter;
}

// The sequence the stream starts after.
absl::StatusOr<uint64_t> WatchStart(const v1::WatchExpirationsRequest& request,
                                    const EventSource& log) {
  const v1::StartPosition position = request.start_position();
  if (request.after_sequence() != 0 && position != v1::START_POSITION_AFTER_SEQUENCE) {
    return absl::InvalidArgumentError(
        "after_sequence: only allowed with START_POSITION_AFTER_SEQUENCE");
  }
  if (!request.resume_token().empty() && position != v1::START_POSITION_AFTER_TOKEN) {
    return absl::InvalidArgumentError("resume_token: only allowed with START_POSITION_AFTER_TOKEN");
  }
  switch (position) {
    case v1::START_POSITION_UNSPECIFIED:
    case v1::START_POSITION_NEW:
      return log.last_sequence();
    case v1::START_POSITION_OLDEST:
      return log.oldest_retained_sequence() - 1;
    case v1::START_POSITION_AFTER_SEQUENCE: {
      if (absl::Status s = log.CheckPosition(request.after_sequence()); !s.ok()) {
        return s;
      }
      return request.after_sequence();
    }
    case v1::START_POSITION_AFTER_TOKEN:
      return log.PositionOfToken(request.resume_token());
    default:
      return absl::InvalidArgumentError(absl::StrCat("start_position: unknown value ", position));
  }
}

// What each RPC needs of an auth file (README.md, "Security", has the table).
// Answer calls Required for every request type: an RPC without an overload
// here does not compile.
// PutMembers: an array, not a vector (a write stream checks it per put).
std::array<Access, 1> Required(const PutMembersView& r) {
  return {{{Permission::kWrite, r.collection, Access::kCollection}}};
}
std::vector<Access> Required(const v1::GetMembersRequest& r) {
  std::vector<Access> needs = {{Permission::kRead, r.collection(), Access::kCollection}};
  // Sliding deadlines writes.
  if (r.refresh_expiration_case() != v1::GetMembersRequest::REFRESH_EXPIRATION_NOT_SET) {
    needs.push_back({Permission::kWrite, r.collection(), Access::kCollection});
  }
  return needs;
}
std::vector<Access> Required(const v1::RemoveMembersRequest& r) {
  return {{Permission::kWrite, r.collection(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ExpireMembersRequest& r) {
  return {{Permission::kWrite, r.collection(), Access::kCollection}};
}
std::vector<Access> Required(const v1::PersistMembersRequest& r) {
  return {{Permission::kWrite, r.collection(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ListMembersRequest& r) {
  return {{Permission::kRead, r.collection(), Access::kCollection}};
}
std::vector<Access> Required(const v1::GetCollectionRequest& r) {
  return {{Permission::kRead, r.name(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ListCollectionsRequest& r) {
  return {{Permission::kRead, r.prefix(), Access::kPrefix}};
}
std::vector<Access> Required(const v1::DeleteCollectionRequest& r) {
  return {{Permission::kAdmin, r.name(), Access::kCollection}};
}
// A watch of named collections needs each; otherwise its prefix, where the
// empty one (everything) needs a grant of "*": a filter is refused, never
// narrowed, so a stream never silently misses events its caller asked for.
std::vector<Access> Required(const v1::WatchExpirationsRequest& r) {
  std::vector<Access> needs;
  for (const std::string& name : r.collections()) {
    needs.push_back({Permission::kWatch, name, Access::kCollection});
  }
  if (needs.empty()) needs.push_back({Permission::kWatch, r.collection_prefix(), Access::kPrefix});
  return needs;
}

// Consumer groups: a group is reached by its name, checked against the
// caller's grants as a collection's name is; creating one also needs consume
// on what it reads, by the watch rule above. Deleting or resetting one (which
// drops its pending events) needs admin.
std::vector<Access> Required(const v1::CreateConsumerGroupRequest& r) {
  std::vector<Access> needs = {{Permission::kConsume, r.name(), Access::kCollection}};
  for (const std::string& name : r.collections()) {
    needs.push_back({Permission::kConsume, name, Access::kCollection});
  }
  if (r.collections().empty()) {
    needs.push_back({Permission::kConsume, r.collection_prefix(), Access::kPrefix});
  }
  return needs;
}
std::vector<Access> Required(const v1::GetConsumerGroupRequest& r) {
  return {{Permission::kConsume, r.name(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ListConsumerGroupsRequest&) {
  return {{Permission::kConsume, "", Access::kPrefix}};
}
std::vector<Access> Required(const v1::DeleteConsumerGroupRequest& r) {
  return {{Permission::kAdmin, r.name(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ResetConsumerGroupRequest& r) {
  return {{Permission::kAdmin, r.name(), Access::kCollection}};
}
std::vector<Access> Required(const v1::PollRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
std::vector<Access> Required(const v1::AckRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
std::vector<Access> Required(const v1::NackRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ExtendLeasesRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
std::vector<Access> Required(const v1::ListDeadLettersRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
std::vector<Access> Required(const v1::RedriveDeadLettersRequest& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}
// A Consume stream, by its first request's start.
std::vector<Access> Required(const v1::ConsumeStart& r) {
  return {{Permission::kConsume, r.group(), Access::kCollection}};
}

}  // namespace

LapseServiceImpl::LapseServiceImpl(Store* store, WatchHub* hub, GroupHub* group_hub,
                                   const AuthFile* auth)
    : store_(store), hub_(hub), group_hub_(group_hub), authorizer_(auth) {
  RouteProtobufLogs();
  ServeUnary("PutMembers", &HandlePutMembers);
  ServeUnary("GetMembers", &HandleGetMembers);
  ServeUnary("RemoveMembers", &HandleRemoveMembers);
  ServeUnary("ExpireMembers", &HandleExpireMembers);
  ServeUnary("PersistMembers", &HandlePersistMembers);
  ServeUnary("ListMembers", &HandleListMembers);
  ServeUnary("GetCollection", &HandleGetCollection);
  ServeUnary("ListCollections", &HandleListCollections);
  ServeUnary("DeleteCollection", &HandleDeleteCollection);
  ServeWatch();
  ServeWriteStreams();
  ServeUnary("CreateConsumerGroup", &HandleCreateConsumerGroup);
  ServeUnary("GetConsumerGroup", &HandleGetConsumerGroup);
  ServeUnary("ListConsumerGroups", &HandleListConsumerGroups);
  ServeUnary("DeleteConsumerGroup", &HandleDeleteConsumerGroup);
  ServeUnary("ResetConsumerGroup", &HandleResetConsumerGroup);
  ServeUnary("Poll", &HandlePoll);
  ServeUnary("Ack", &HandleAck);
  ServeUnary("Nack", &HandleNack);
  ServeUnary("ExtendLeases", &HandleExtendLeases);
  ServeUnary("ListDeadLetters", &HandleListDeadLetters);
  ServeUnary("RedriveDeadLetters", &HandleRedriveDeadLetters);
}

void LapseServiceImpl::StartDraining() {
  draining_.store(true);
  write_streams_.StartDraining();
}

template <typename Request, typename Response>
void LapseServiceImpl::ServeUnary(const char* method, Handler<Request, Response> handler) {
  // Stateless, and never destroyed: gRPC may call it until the process ends.
  static auto* const messages = new ArenaMessages<Request, Response>;
  auto* unary = new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, Response>(
      [this, handler](grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes,
                      Response* response) { return Answer(context, *bytes, response, handler); });
  unary->SetMessageAllocator(messages);
  MarkMethodRawCallback(MethodIndex(method), unary);
}

void LapseServiceImpl::ServeWatch() {
  MarkMethodRawCallback(
      MethodIndex("WatchExpirations"),
      new grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](grpc::CallbackServerContext* context,
                 const grpc::ByteBuffer* bytes) -> grpc::ServerWriteReactor<grpc::ByteBuffer>* {
            absl::StatusOr<Caller> caller = authorizer_.Authenticate(*context);
            if (!caller.ok()) return new RejectedWatch(ToGrpcStatus(caller.status()));
            v1::WatchExpirationsRequest request;
            if (absl::Status parsed = ParseRequest(*bytes, &request); !parsed.ok()) {
              LogMalformed(*context, parsed);
              return new RejectedWatch(ToGrpcStatus(parsed));
            }
            if (absl::Status allowed = Authorize(*caller, Required(request)); !allowed.ok()) {
              return new RejectedWatch(ToGrpcStatus(allowed));
            }
            return StartWatch(context, request);
          }));
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* LapseServiceImpl::Answer(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer& bytes,
                                                   Response* response,
                                                   Handler<Request, Response> handler) {
  absl::Status status =
      draining_.load() ? absl::UnavailableError("server shutting down") : absl::OkStatus();
  absl::StatusOr<Caller> caller = authorizer_.Authenticate(*context);
  if (status.ok()) status = caller.status();
  Request& request = ArenaCall<Request, Response>::Of(*context).parsed();
  if (status.ok()) {
    status = ParseRequest(bytes, &request);
    if (!status.ok()) LogMalformed(*context, status);
  }
  if (status.ok()) status = Authorize(*caller, Required(request));
  if constexpr (std::is_same_v<Request, v1::PollRequest>) {
    absl::StatusOr<absl::Duration> wait = PollWait(request);
    if (status.ok()) status = wait.status();
    if (status.ok() && *wait > absl::ZeroDuration()) {
      return new PollReactor(store_, group_hub_, &request, response, *wait);
    }
  }
  auto* call = new UnaryCall;
  if (status.ok()) status = handler(*store_, request, response, call);
  if (!status.ok()) call->Finish(ToGrpcStatus(status));
  return call;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* LapseServiceImpl::StartWatch(
    grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest& request) {
  if (draining_.load()) return new RejectedWatch(Draining());
  absl::StatusOr<EventFilter> filter = WatchFilter(request, store_->limits());
  if (!filter.ok()) return new RejectedWatch(ToGrpcStatus(filter.status()));
  absl::StatusOr<uint64_t> after = WatchStart(request, store_->events());
  if (!after.ok()) return new RejectedWatch(ToGrpcStatus(after.status()));
  return new WatchReactor(hub_, context, &store_->events(), *std::move(filter), *after);
}

void LapseServiceImpl::ServeWriteStreams() {
  MarkMethodRawCallback(
      MethodIndex("StreamWrites"),
      new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](grpc::CallbackServerContext* context) { return StartWriteStream(context); }));
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* LapseServiceImpl::StartWriteStream(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<Caller> caller = authorizer_.Authenticate(*context);
  if (!caller.ok())
    return new WriteStreamReactor(store_, nullptr, &write_streams_, caller.status());
  return new WriteStreamReactor(
      store_,
      [caller = *std::move(caller)](Store& store, const PutMembersView& request,
                                    std::string* answer, OperationEnd* end) {
        if (absl::Status allowed = Authorize(caller, Required(request)); !allowed.ok()) {
          return allowed;
        }
        return Put(store, request, PutMembersBytes(answer), end);
      },
      &write_streams_);
}

grpc::ServerBidiReactor<v1::ConsumeRequest, v1::ConsumeResponse>* LapseServiceImpl::Consume(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<Caller> caller = authorizer_.Authenticate(*context);
  absl::Status refusal =
      draining_.load() ? absl::UnavailableError("server shutting down") : caller.status();
  ConsumeReactor::Authorize authorize;
  if (caller.ok()) {
    authorize = [caller = *std::move(caller)](const v1::ConsumeStart& start) {
      return Authorize(caller, Required(start));
    };
  }
  return new ConsumeReactor(store_, group_hub_, std::move(authorize), refusal);
}

}  // namespace lapse

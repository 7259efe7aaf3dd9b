#include "lapse/client.h"

#include <utility>

#include "client/cpp/connection.h"
#include "client/cpp/convert.h"
#include "client/cpp/event_queue.h"
#include "client/cpp/watch_loop.h"
#include "client/cpp/write_coding.h"
#include "grpcpp/security/credentials.h"

namespace lapse::client {
namespace {

using internal::Connection;
using internal::Idempotency;
using Stub = v1::LapseService::Stub;

// An Ack, Nack or ExtendLeases request.
template <typename Request>
Request LeaseRequest(const std::string& group, const std::string& consumer,
                     const std::vector<LeaseRef>& leases) {
  Request request;
  request.set_group(group);
  request.set_consumer(consumer);
  internal::LeasesToProto(leases, request.mutable_leases());
  return request;
}

}  // namespace

// ---- Subscription and EventStream --------------------------------------------

Subscription::Subscription(std::unique_ptr<internal::WatchLoop> loop) : loop_(std::move(loop)) {}

Subscription::~Subscription() { Cancel(); }

void Subscription::Cancel() { loop_->Cancel(); }

uint64_t Subscription::position() const { return loop_->position(); }

std::string Subscription::resume_token() const { return loop_->resume_token(); }

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
    : options_(options),
      connection_(std::make_shared<Connection>(NewChannel(target, options), options)) {}

Client::Client(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
               const ClientOptions& options)
    : options_(options),
      connection_(std::make_shared<Connection>(
          internal::ChannelWith(target, std::move(credentials), options), options)) {}

Client::~Client() = default;

absl::StatusOr<std::vector<PutResult>> Client::PutMembers(const std::string& collection,
                                                          const std::vector<MemberWrite>& members,
                                                          const PutOptions& options,
                                                          const CallOptions& call) {
  return connection_->PutMembers(internal::PutMembersRequestToProto(collection, members, options),
                                 call);
}

void Client::PutMembersAsync(const std::string& collection, const std::vector<MemberWrite>& members,
                             PutCallback done, const PutOptions& options, const CallOptions& call) {
  // Encoded straight into the write stream's next request: no message of its
  // own to build and serialize.
  connection_->PutMembersAsync(
      [&](std::string* request) {
        internal::AppendPutMembers(collection, members, options, request);
      },
      call, std::move(done));
}

absl::StatusOr<std::vector<GetResult>> Client::GetMembers(const std::string& collection,
                                                          const std::vector<std::string>& keys,
                                                          const GetOptions& options,
                                                          const CallOptions& call) {
  // A refresh moves deadlines relative to when it runs: a repeat after an
  // applied attempt would move them again.
  const Idempotency idempotency = options.refresh.kind() == Expiration::Kind::kNone
                                      ? Idempotency::kIdempotent
                                      : Idempotency::kNotIdempotent;
  return connection_->Call<std::vector<GetResult>>(
      &Stub::GetMembers, internal::GetMembersRequestToProto(collection, keys, options), idempotency,
      call);
}

absl::StatusOr<std::vector<RemoveResult>> Client::RemoveMembers(
    const std::string& collection, const std::vector<std::string>& keys, const CallOptions& call) {
  return connection_->Call<std::vector<RemoveResult>>(
      &Stub::RemoveMembers, internal::RemoveMembersRequestToProto(collection, keys),
      Idempotency::kIdempotent, call);
}

absl::StatusOr<std::vector<ExpireResult>> Client::ExpireMembers(
    const std::string& collection, const std::vector<std::string>& keys,
    const Expiration& expiration, ExpireCondition condition, const CallOptions& call) {
  return connection_->Call<std::vector<ExpireResult>>(
      &Stub::ExpireMembers,
      internal::ExpireMembersRequestToProto(collection, keys, expiration, condition),
      Idempotency::kNotIdempotent, call);
}

absl::StatusOr<std::vector<PersistResult>> Client::PersistMembers(
    const std::string& collection, const std::vector<std::string>& keys, const CallOptions& call) {
  return connection_->Call<std::vector<PersistResult>>(
      &Stub::PersistMembers, internal::PersistMembersRequestToProto(collection, keys),
      Idempotency::kIdempotent, call);
}

absl::StatusOr<MemberPage> Client::ListMembers(const std::string& collection,
                                               const ListMembersOptions& options,
                                               const CallOptions& call) {
  return connection_->Call<MemberPage>(&Stub::ListMembers,
                                       internal::ListMembersRequestToProto(collection, options),
                                       Idempotency::kIdempotent, call);
}

absl::StatusOr<CollectionInfo> Client::GetCollection(const std::string& name,
                                                     const CallOptions& call) {
  return connection_->Call<CollectionInfo>(&Stub::GetCollection,
                                           internal::GetCollectionRequestToProto(name),
                                           Idempotency::kIdempotent, call);
}

absl::StatusOr<CollectionPage> Client::ListCollections(const ListCollectionsOptions& options,
                                                       const CallOptions& call) {
  return connection_->Call<CollectionPage>(&Stub::ListCollections,
                                           internal::ListCollectionsRequestToProto(options),
                                           Idempotency::kIdempotent, call);
}

absl::StatusOr<uint64_t> Client::DeleteCollection(const std::string& name,
                                                  const CallOptions& call) {
  return connection_->Call<uint64_t>(&Stub::DeleteCollection,
                                     internal::DeleteCollectionRequestToProto(name),
                                     Idempotency::kIdempotent, call);
}

absl::StatusOr<ConsumerGroupInfo> Client::CreateConsumerGroup(const ConsumerGroupOptions& options,
                                                              const CallOptions& call) {
  return connection_->Call<ConsumerGroupInfo>(&Stub::CreateConsumerGroup,
                                              internal::CreateConsumerGroupRequestToProto(options),
                                              Idempotency::kNotIdempotent, call);
}

absl::StatusOr<ConsumerGroupInfo> Client::GetConsumerGroup(const std::string& name,
                                                           uint32_t max_leases,
                                                           const CallOptions& call) {
  v1::GetConsumerGroupRequest request;
  request.set_name(name);
  request.set_max_leases(max_leases);
  return connection_->Call<ConsumerGroupInfo>(&Stub::GetConsumerGroup, request,
                                              Idempotency::kIdempotent, call);
}

absl::StatusOr<ConsumerGroupPage> Client::ListConsumerGroups(
    const ListConsumerGroupsOptions& options, const CallOptions& call) {
  v1::ListConsumerGroupsRequest request;
  request.set_page_size(options.page_size);
  request.set_page_token(options.page_token);
  return connection_->Call<ConsumerGroupPage>(&Stub::ListConsumerGroups, request,
                                              Idempotency::kIdempotent, call);
}

absl::StatusOr<ConsumerGroupInfo> Client::DeleteConsumerGroup(const std::string& name,
                                                              const CallOptions& call) {
  v1::DeleteConsumerGroupRequest request;
  request.set_name(name);
  return connection_->Call<ConsumerGroupInfo>(&Stub::DeleteConsumerGroup, request,
                                              Idempotency::kNotIdempotent, call);
}

absl::StatusOr<ConsumerGroupInfo> Client::ResetConsumerGroup(const std::string& name,
                                                             StartPosition start,
                                                             uint64_t after_sequence,
                                                             const CallOptions& call) {
  return connection_->Call<ConsumerGroupInfo>(
      &Stub::ResetConsumerGroup,
      internal::ResetConsumerGroupRequestToProto(name, start, after_sequence),
      Idempotency::kNotIdempotent, call);
}

absl::StatusOr<PollResult> Client::Poll(const std::string& group, const std::string& consumer,
                                        const PollOptions& options, const CallOptions& call) {
  // The server may hold the call for the whole wait before it answers.
  CallOptions waiting = call;
  waiting.timeout = call.timeout.value_or(options_.default_timeout) + options.wait;
  return connection_->Call<PollResult>(&Stub::Poll,
                                       internal::PollRequestToProto(group, consumer, options),
                                       Idempotency::kNotIdempotent, waiting);
}

absl::StatusOr<std::vector<LeaseResult>> Client::Ack(const std::string& group,
                                                     const std::string& consumer,
                                                     const std::vector<LeaseRef>& leases,
                                                     const CallOptions& call) {
  return connection_->Call<std::vector<LeaseResult>>(
      &Stub::Ack, LeaseRequest<v1::AckRequest>(group, consumer, leases),
      Idempotency::kNotIdempotent, call);
}

absl::StatusOr<std::vector<LeaseResult>> Client::Nack(const std::string& group,
                                                      const std::string& consumer,
                                                      const std::vector<LeaseRef>& leases,
                                                      const CallOptions& call) {
  return connection_->Call<std::vector<LeaseResult>>(
      &Stub::Nack, LeaseRequest<v1::NackRequest>(group, consumer, leases),
      Idempotency::kNotIdempotent, call);
}

absl::StatusOr<std::vector<LeaseResult>> Client::ExtendLeases(const std::string& group,
                                                              const std::string& consumer,
                                                              const std::vector<LeaseRef>& leases,
                                                              absl::Duration extension,
                                                              const CallOptions& call) {
  v1::ExtendLeasesRequest request = LeaseRequest<v1::ExtendLeasesRequest>(group, consumer, leases);
  internal::DurationToProto(extension, request.mutable_extension());
  return connection_->Call<std::vector<LeaseResult>>(&Stub::ExtendLeases, request,
                                                     Idempotency::kNotIdempotent, call);
}

absl::StatusOr<DeadLetterPage> Client::ListDeadLetters(const std::string& group, int page_size,
                                                       const std::string& page_token,
                                                       const CallOptions& call) {
  v1::ListDeadLettersRequest request;
  request.set_group(group);
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return connection_->Call<DeadLetterPage>(&Stub::ListDeadLetters, request,
                                           Idempotency::kIdempotent, call);
}

absl::StatusOr<uint64_t> Client::RedriveDeadLetters(const std::string& group,
                                                    const std::vector<uint64_t>& sequences,
                                                    const CallOptions& call) {
  v1::RedriveDeadLettersRequest request;
  request.set_group(group);
  for (uint64_t sequence : sequences) request.add_sequences(sequence);
  return connection_->Call<uint64_t>(&Stub::RedriveDeadLetters, request,
                                     Idempotency::kNotIdempotent, call);
}

absl::StatusOr<std::unique_ptr<Subscription>> Client::Watch(const WatchOptions& options,
                                                            WatchHandlers handlers) {
  if (!connection_->channel_status().ok()) return connection_->channel_status();
  if (!handlers.on_event) {
    return absl::InvalidArgumentError("Watch: handlers.on_event is required");
  }
  if (!options.collections.empty() && !options.collection_prefix.empty()) {
    return absl::InvalidArgumentError(
        "Watch: at most one of collections and collection_prefix may be set");
  }
  if ((options.start == StartPosition::kAfterToken) == options.resume_token.empty()) {
    return absl::InvalidArgumentError(
        "Watch: resume_token must be set with StartPosition::kAfterToken, and only then");
  }
  return std::unique_ptr<Subscription>(new Subscription(std::make_unique<internal::WatchLoop>(
      connection_, options, std::move(handlers), options_.watch_backoff)));
}

absl::StatusOr<std::unique_ptr<EventStream>> Client::WatchStream(const WatchOptions& options,
                                                                 size_t queue_capacity) {
  auto queue = std::make_unique<internal::EventQueue>(queue_capacity);
  internal::EventQueue* events = queue.get();
  WatchHandlers handlers;
  handlers.on_event = [events](const ExpiryEvent& event) { events->Push(event); };
  handlers.on_error = [events](const absl::Status& status) { events->End(status); };
  absl::StatusOr<std::unique_ptr<Subscription>> subscription = Watch(options, std::move(handlers));
  if (!subscription.ok()) return subscription.status();
  return std::unique_ptr<EventStream>(new EventStream(std::move(queue), *std::move(subscription)));
}

}  // namespace lapse::client

// lapse/client.h: the C++ client of lapse.v1.LapseService.
//
// A Client owns one gRPC channel to a lapse server and offers one method per
// RPC, taking and returning plain C++ types (no protobuf in this header).
// Every call has a deadline: ClientOptions::default_timeout, or
// CallOptions::timeout for that call. Calls that are safe to repeat are
// retried on UNAVAILABLE with exponential backoff and jitter, within that
// deadline; writes whose repetition could change the outcome (PutMembers,
// ExpireMembers, a refreshing GetMembers) are attempted exactly once. Other
// errors are never retried, RESOURCE_EXHAUSTED included: a limit, or a full
// disk on the server, which takes seconds or an operator to clear.
//
//   lapse::client::Client client("127.0.0.1:50051");
//   lapse::client::MemberWrite order;
//   order.key = "order-17";
//   order.value = "{\"total\": 12}";
//   order.expiration = lapse::client::Expiration::Ttl(absl::Minutes(30));
//   absl::StatusOr<std::vector<lapse::client::PutResult>> put =
//       client.PutMembers("unpaid:user-42", {order});
//
//   lapse::client::WatchHandlers handlers;
//   handlers.on_event = [](const lapse::client::ExpiryEvent& e) { ... };
//   handlers.on_error = [](const absl::Status& s) { ... };  // e.g. OUT_OF_RANGE
//   absl::StatusOr<std::unique_ptr<lapse::client::Subscription>> watch =
//       client.Watch(lapse::client::WatchOptions(), std::move(handlers));
//
// A Subscription reconnects by itself when its stream breaks (UNAVAILABLE,
// a dropped connection, a server restart) and resumes right after the last
// position it examined, with the server's resume token, so its events form
// one stream with no gap and no duplicate. The ways to lose events are for
// the server to no longer hold them, or to serve another store (a
// memory-only server restarted): OUT_OF_RANGE, and the subscription reports
// that error and stops. Subscription::resume_token() is that position, to
// persist and resume from in a later run (StartPosition::kAfterToken).
// One caveat: a kNew subscription learns its position from its first
// response (events or a heartbeat); if that first stream drops before any
// response without the server naming its position (a draining lapse server
// does), the subscription starts new again.
//
// The types live in lapse::client because the server's engine already uses
// the natural names (lapse::Expiration, lapse::ExpiryEvent, ...).
//
// Thread-safety: a Client is safe for concurrent use from many threads. A
// Subscription's handlers run on the subscription's own thread, one at a
// time; Cancel() may be called from any thread, including from a handler.
// An EventStream's methods are thread-safe.
#ifndef LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CLIENT_H_
#define LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace lapse::client {

class Consumer;

namespace internal {
class Connection;
class EventQueue;
class WatchLoop;
}  // namespace internal

// ---- Values -----------------------------------------------------------------

// The expiration of a write (AIP-214): none (persistent), a time to live
// counted from the server's clock, or an absolute time.
class Expiration final {
 public:
  enum class Kind { kNone, kTtl, kAt };

  static Expiration None() { return Expiration(); }
  static Expiration Ttl(absl::Duration ttl) {
    return Expiration(Kind::kTtl, ttl, absl::InfinitePast());
  }
  static Expiration At(absl::Time time) {
    return Expiration(Kind::kAt, absl::ZeroDuration(), time);
  }

  // None.
  Expiration() = default;

  Kind kind() const { return kind_; }
  // Meaningful with Kind::kTtl.
  absl::Duration ttl() const { return ttl_; }
  // Meaningful with Kind::kAt.
  absl::Time time() const { return time_; }

 private:
  Expiration(Kind kind, absl::Duration ttl, absl::Time time)
      : kind_(kind), ttl_(ttl), time_(time) {}

  Kind kind_ = Kind::kNone;
  absl::Duration ttl_;
  absl::Time time_ = absl::InfinitePast();
};

// A member as the server holds it.
struct Member {
  std::string key;
  std::string value;
  // Unset for a persistent member.
  std::optional<absl::Time> expire_time;
};

enum class PutCondition { kAlways, kIfAbsent, kIfPresent };

struct MemberWrite {
  std::string key;
  std::string value;
  Expiration expiration;
  PutCondition condition = PutCondition::kAlways;
  // Overwrite the value but keep the existing deadline (like KEEPTTL); must
  // not be combined with an expiration.
  bool keep_expiration = false;
};

struct PutOptions {
  // Non-zero: if the collection would then hold more live members, nothing is
  // written and PutMembers fails with FAILED_PRECONDITION.
  uint32_t max_members = 0;
  // The expiration of every member whose own expiration is None and that
  // does not keep_expiration: one for the whole call instead of one per
  // member (like HPEXPIRE key ms FIELDS n ...). None: such members are
  // persistent.
  Expiration default_expiration;
  // Return only the results that say more than "created": members replaced
  // or skipped, in request order. Every member not listed was created, with
  // the deadline it asked for (the default expiration resolved by the server
  // for those that took it). Saves the server and the network an echo of
  // every key.
  bool omit_created_results = false;
};

enum class PutOutcome { kCreated, kReplaced, kSkipped };

struct PutResult {
  std::string key;
  PutOutcome outcome = PutOutcome::kCreated;
  // The member's deadline after the call; unset when persistent.
  std::optional<absl::Time> expire_time;
};

struct GetOptions {
  // Anything but None slides the deadline of every member found (like
  // HGETEX); such a call is never retried.
  Expiration refresh;
};

struct GetResult {
  bool found = false;
  // The key is always set; value and expire_time only when found.
  Member member;
};

struct RemoveResult {
  std::string key;
  // Whether a live member was removed.
  bool existed = false;
};

// Like HEXPIRE's NX / XX / GT / LT; a persistent member counts as expiring
// infinitely late.
enum class ExpireCondition { kAlways, kIfNoExpiration, kIfHasExpiration, kIfLater, kIfEarlier };

enum class ExpireOutcome { kUpdated, kConditionNotMet, kNotFound, kExpired };

struct ExpireResult {
  std::string key;
  ExpireOutcome outcome = ExpireOutcome::kUpdated;
  // The deadline after the call; unset if persistent, not found or expired.
  std::optional<absl::Time> expire_time;
};

enum class PersistOutcome { kPersisted, kNoExpiration, kNotFound };

struct PersistResult {
  std::string key;
  PersistOutcome outcome = PersistOutcome::kPersisted;
};

enum class MemberOrder { kKey, kExpireTime };

struct ListMembersOptions {
  MemberOrder order_by = MemberOrder::kKey;
  // 0: the server's default (100); larger than its maximum is coerced down.
  int page_size = 0;
  // From the previous page, with the same collection and order_by.
  std::string page_token;
  bool keys_only = false;
};

struct MemberPage {
  std::vector<Member> members;
  // Empty when there are no more members.
  std::string next_page_token;
};

struct CollectionInfo {
  std::string name;
  uint64_t member_count = 0;
  uint64_t expiring_count = 0;
  // Unset when no member expires.
  std::optional<absl::Time> next_expire_time;
};

struct ListCollectionsOptions {
  std::string prefix;
  int page_size = 0;
  std::string page_token;
};

struct CollectionPage {
  // Ordered by name, byte-wise.
  std::vector<CollectionInfo> collections;
  std::string next_page_token;
};

// ---- Watching ---------------------------------------------------------------

struct ExpiryEvent {
  // Strictly increasing across the server, never reused.
  uint64_t sequence = 0;
  std::string collection;
  std::string key;
  // Empty unless WatchOptions::include_values.
  std::string value;
  // The deadline the member had, and when the server expired it.
  absl::Time expire_time;
  absl::Time expired_at;
};

enum class StartPosition {
  // Only events that expire after the subscription starts.
  kNew,
  // The oldest event the server still holds.
  kOldest,
  // The events right after WatchOptions::after_sequence (resume within one
  // store: a bare sequence does not name the store it came from).
  kAfterSequence,
  // The events right after WatchOptions::resume_token (resume). Fails with
  // OUT_OF_RANGE, through on_error, when the token belongs to another store
  // (a memory-only server that restarted, another data directory).
  kAfterToken,
};

struct WatchOptions {
  // Only these collections; at most one of collections and collection_prefix
  // may be set, and neither means every collection.
  std::vector<std::string> collections;
  std::string collection_prefix;
  bool include_values = false;
  StartPosition start = StartPosition::kNew;
  // With StartPosition::kAfterSequence: the last sequence already handled,
  // e.g. a previous Subscription::position().
  uint64_t after_sequence = 0;
  // With StartPosition::kAfterToken: a previous Subscription::resume_token(),
  // byte for byte.
  std::string resume_token;
};

// What a Subscription calls, on its own thread, one call at a time. Only
// on_event is required. A handler may call Subscription::Cancel() but must not
// destroy the Subscription.
struct WatchHandlers {
  // Each event once, in sequence order.
  std::function<void(const ExpiryEvent&)> on_event;
  // A stream is in place: its start position is fixed, so every event after
  // it will be delivered. Called again after each reconnect.
  std::function<void()> on_connected;
  // The stream broke with this retryable status; the subscription reconnects
  // after a backoff and resumes where it was.
  std::function<void(const absl::Status&)> on_reconnecting;
  // The subscription ended by itself with this (non-OK) status and delivers
  // nothing more: OUT_OF_RANGE when the events it needed are no longer held
  // by the server, INVALID_ARGUMENT for a bad filter, ... Not called for the
  // end that Cancel() causes, nor after Cancel() returns.
  std::function<void(const absl::Status&)> on_error;
};

// A running watch (see Client::Watch). Destroying it cancels it.
class Subscription final {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // Stops the subscription. Once it returns, no handler runs any more and the
  // subscription's thread has ended (when called from a handler: no handler
  // runs after that one returns). Idempotent.
  void Cancel();

  // Every event up to and including this sequence has been examined and, if
  // it matched, handed to on_event (which returned): a later subscription
  // with StartPosition::kAfterSequence from here continues with no gap and no
  // duplicate. The start position until the first response arrives, and 0 if
  // that is not known yet (kNew, kOldest, kAfterToken).
  uint64_t position() const;

  // The same position as an opaque token that also names the server's store:
  // persist it, and a later subscription with StartPosition::kAfterToken from
  // it continues with no gap and no duplicate, or fails with OUT_OF_RANGE if
  // the server now serves another store, never silently starting over. It
  // moves once all the events of a response have been handed to on_event;
  // when Cancel() stops a response's events halfway, it stands before that
  // response (resuming from it hands those events again; position() stands
  // after the last one handed). The start token until the first response
  // arrives, and empty while not known (kNew, kOldest, kAfterSequence).
  // The subscription itself resumes from it after a reconnect.
  std::string resume_token() const;

 private:
  friend class Client;
  explicit Subscription(std::unique_ptr<internal::WatchLoop> loop);

  std::unique_ptr<internal::WatchLoop> loop_;
};

// A watch read with blocking Next() calls instead of handlers (see
// Client::WatchStream). At most `queue_capacity` events wait in memory; when
// the queue is full the subscription stops reading, which slows the server's
// stream rather than dropping anything. Destroying it cancels it.
class EventStream final {
 public:
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // The next event, in sequence order. Otherwise, once the events received
  // before it have been returned, the error that ended the subscription (e.g.
  // OUT_OF_RANGE); CANCELLED after Cancel(); DEADLINE_EXCEEDED if nothing
  // arrived within `timeout`.
  absl::StatusOr<ExpiryEvent> Next(absl::Duration timeout = absl::InfiniteDuration());

  // Stops the subscription and wakes any Next() with CANCELLED. Idempotent.
  void Cancel();

 private:
  friend class Client;
  EventStream(std::unique_ptr<internal::EventQueue> queue,
              std::unique_ptr<Subscription> subscription);

  std::unique_ptr<internal::EventQueue> queue_;
  // Fills queue_; declared last so that it is destroyed (cancelled) first.
  std::unique_ptr<Subscription> subscription_;
};

// ---- Consumer groups --------------------------------------------------------
//
// Every event matching a group's filter is leased to one consumer of the
// group at a time and redelivered when not acknowledged within the group's
// visibility timeout (README.md, "Consumer groups"). A worker takes them
// through a Consumer (lapse/consumer.h), over the Consume stream.

struct ConsumerGroupOptions {
  // Printable ASCII without spaces, like a collection name.
  std::string name;
  // The filter, as WatchOptions': at most one of the two.
  std::vector<std::string> collections;
  std::string collection_prefix;
  bool include_values = false;
  // kNew, kOldest or kAfterSequence (with after_sequence).
  StartPosition start = StartPosition::kNew;
  uint64_t after_sequence = 0;
  // Unset or 0: the server's defaults (30 s, 5, 100).
  std::optional<absl::Duration> visibility_timeout;
  uint32_t max_deliveries = 0;
  uint32_t max_unacked_per_consumer = 0;
};

struct GroupLease {
  uint64_t sequence = 0;
  std::string consumer;
  // 1 for the first delivery.
  uint32_t delivery_count = 0;
  absl::Time deadline;
};

struct GroupConsumer {
  std::string name;
  // Events leased to it and not yet acknowledged.
  uint64_t unacked = 0;
  absl::Time last_seen;
};

struct ConsumerGroupInfo {
  std::string name;
  std::vector<std::string> collections;
  std::string collection_prefix;
  bool include_values = false;
  absl::Duration visibility_timeout;
  uint32_t max_deliveries = 0;
  uint32_t max_unacked_per_consumer = 0;
  // Every event up to this sequence has been received by the group.
  uint64_t position = 0;
  // Sequences after `position` in the server's feed (an upper bound).
  uint64_t lag = 0;
  // Leased, or awaiting redelivery.
  uint64_t pending = 0;
  uint64_t awaiting_redelivery = 0;
  uint64_t dead_lettered = 0;
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t lost_sequences_total = 0;
  std::vector<GroupConsumer> consumers;
  // GetConsumerGroup with max_leases only.
  std::vector<GroupLease> leases;
};

struct ListConsumerGroupsOptions {
  int page_size = 0;
  std::string page_token;
};

struct ConsumerGroupPage {
  std::vector<ConsumerGroupInfo> groups;
  std::string next_page_token;
};

// An event leased to a consumer until lease_deadline.
struct Delivery {
  ExpiryEvent event;
  uint32_t delivery_count = 0;
  absl::Time lease_deadline;
};

// A lease as Ack, Nack and ExtendLeases name it.
struct LeaseRef {
  uint64_t sequence = 0;
  uint32_t delivery_count = 0;
};

struct LeaseResult {
  uint64_t sequence = 0;
  // OK, or FAILED_PRECONDITION: the lease is no longer held (it expired,
  // went to another consumer, or was acked already), so the event may be
  // handled twice.
  absl::Status status;
};

struct PollOptions {
  // Events to lease at most (the server's default is 1, its maximum 1000).
  uint32_t max_events = 1;
  // How long to wait for an event when none is deliverable (at most 60 s).
  // The call's deadline is this plus the call's timeout.
  absl::Duration wait = absl::ZeroDuration();
};

struct PollResult {
  // Redeliveries first, then new events; empty when nothing is deliverable.
  std::vector<Delivery> deliveries;
  // Set (non-zero) when retention discarded events the group had not
  // received: the sequences lost, told once.
  uint64_t lost_first_sequence = 0;
  uint64_t lost_last_sequence = 0;
};

struct DeadLetter {
  ExpiryEvent event;
  uint32_t delivery_count = 0;
  // The consumer of the last delivery.
  std::string consumer;
  absl::Time dead_lettered_at;
};

struct DeadLetterPage {
  std::vector<DeadLetter> dead_letters;
  std::string next_page_token;
};

// ---- The client -------------------------------------------------------------

// Exponential backoff: delays grow from `initial` by `multiplier` up to `max`;
// each actual delay is drawn uniformly from [delay / 2, delay] (jitter), so
// clients that failed together do not retry together.
struct BackoffPolicy {
  absl::Duration initial = absl::Milliseconds(50);
  absl::Duration max = absl::Seconds(2);
  double multiplier = 2.0;
};

// TLS for a Client's channel (ClientOptions::tls). The files are PEM, read
// when the Client is made.
struct TlsOptions {
  // CA certificates that verify the server; empty: the system's roots.
  std::string ca_file;
  // mTLS: this client's certificate (chain) and its private key; both or
  // neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry, when it is not the
  // target's host (tests; a server reached by IP address or Unix socket).
  std::string server_name;
};

struct ClientOptions {
  // The deadline of a call (all its attempts) unless CallOptions says
  // otherwise.
  absl::Duration default_timeout = absl::Seconds(10);
  // Attempts of a retryable call, the first included; 1 disables retries.
  int max_attempts = 4;
  // Between retries of a call.
  BackoffPolicy retry_backoff;
  // Between reconnects of a Subscription or a Consumer (lapse/consumer.h);
  // reset by every response.
  BackoffPolicy watch_backoff = {absl::Milliseconds(100), absl::Seconds(10), 2.0};
  // PutMembers calls on the write stream (PutMembersAsync's, and
  // PutMembers' while another is in flight) not yet answered, at most; a
  // call beyond waits for room until its deadline (a PutMembersAsync made
  // inside a PutCallback does not wait). 0 counts as 1.
  size_t max_writes_in_flight = 1024;

  // Channel: HTTP/2 keepalive pings while calls are open, so a dead
  // connection under an idle watch is noticed. Infinite disables them; the
  // server must allow the interval (gRPC servers refuse pings more frequent
  // than every 5 minutes by default).
  absl::Duration keepalive_time = absl::InfiniteDuration();
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // Match the server's --max_message_bytes.
  int max_receive_message_bytes = 16 << 20;
  int max_send_message_bytes = 16 << 20;
  // gRPC's own backoff between connection attempts.
  absl::Duration reconnect_backoff_initial = absl::Seconds(1);
  absl::Duration reconnect_backoff_max = absl::Seconds(30);
  // Unset: plaintext. The constructor that takes credentials uses only its
  // server_name.
  std::optional<TlsOptions> tls;

  // Credentials for a server with --auth_file: sent with every call as
  // "authorization: Bearer TOKEN". Either the token itself, or a file that
  // holds it (surrounding whitespace ignored), read again when it changes so
  // a rotated token is used from the next call on; a call fails
  // UNAUTHENTICATED, naming the file, when it cannot be read (a watch
  // attempt is then made without a token, and the server refuses it).
  std::string bearer_token;
  std::string bearer_token_file;
};

// The channel a Client(target, options) talks over, for the server's other
// services (e.g. grpc.health.v1). INVALID_ARGUMENT naming the file of
// options.tls that cannot be read, or a certificate given without its key.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(const std::string& target,
                                                          const ClientOptions& options);

// Called once with the outcome of a PutMembersAsync.
using PutCallback = std::function<void(absl::StatusOr<std::vector<PutResult>>)>;

struct CallOptions {
  // This call's deadline, from now; unset: ClientOptions::default_timeout.
  std::optional<absl::Duration> timeout;
};

class Client final {
 public:
  // A channel to `target` ("host:port" or any gRPC target), TLS with
  // options.tls. When NewChannel refuses options.tls, every call and Watch
  // fails with its error.
  explicit Client(const std::string& target, const ClientOptions& options = ClientOptions());
  // A channel with `credentials`, e.g. grpc::SslCredentials(...).
  Client(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
         const ClientOptions& options = ClientOptions());
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Writes `members` (unique keys) atomically. One result per member, in
  // order. Never retried. While another PutMembers of this Client is in
  // flight, the call travels as an operation of a StreamWrites stream the
  // Client keeps open (same results, far cheaper per call than a unary call
  // each); the stream is reopened after it ends.
  absl::StatusOr<std::vector<PutResult>> PutMembers(const std::string& collection,
                                                    const std::vector<MemberWrite>& members,
                                                    const PutOptions& options = PutOptions(),
                                                    const CallOptions& call = CallOptions());

  // PutMembers without waiting: queues the call on the write stream (after
  // waiting for room while ClientOptions::max_writes_in_flight calls are
  // unanswered) and returns. `done` gets what PutMembers would return, on the
  // write stream's thread (one per Client, which reads the answers and runs
  // every `done`, in order), or on this thread when the call fails before it
  // is queued. A PutMembers made inside `done` is sent as a unary call.
  // Calls are applied in the order they were made. Many such calls in flight
  // from one thread go to the server a few per message: this is the fast way
  // to make many small writes. A call whose deadline passes before it is
  // sent is not sent (DEADLINE_EXCEEDED); one sent is answered by the server
  // or by the stream's end (UNAVAILABLE: it may or may not have been
  // applied). `done` should return promptly (the answers after it wait for
  // it) and must not wait for another call's answer. Every `done` has run
  // when the Client and its Subscriptions are destroyed.
  void PutMembersAsync(const std::string& collection, const std::vector<MemberWrite>& members,
                       PutCallback done, const PutOptions& options = PutOptions(),
                       const CallOptions& call = CallOptions());

  // One result per key, in order. Retried unless options.refresh is set.
  absl::StatusOr<std::vector<GetResult>> GetMembers(const std::string& collection,
                                                    const std::vector<std::string>& keys,
                                                    const GetOptions& options = GetOptions(),
                                                    const CallOptions& call = CallOptions());

  // Deletes members; no expiry events. Retried.
  absl::StatusOr<std::vector<RemoveResult>> RemoveMembers(const std::string& collection,
                                                          const std::vector<std::string>& keys,
                                                          const CallOptions& call = CallOptions());

  // Sets a new deadline (not None) under `condition`. A deadline in the past
  // expires the members now, with their events. Never retried.
  absl::StatusOr<std::vector<ExpireResult>> ExpireMembers(
      const std::string& collection, const std::vector<std::string>& keys,
      const Expiration& expiration, ExpireCondition condition = ExpireCondition::kAlways,
      const CallOptions& call = CallOptions());

  // Clears deadlines. Retried.
  absl::StatusOr<std::vector<PersistResult>> PersistMembers(
      const std::string& collection, const std::vector<std::string>& keys,
      const CallOptions& call = CallOptions());

  // One page of a collection. Retried.
  absl::StatusOr<MemberPage> ListMembers(const std::string& collection,
                                         const ListMembersOptions& options = ListMembersOptions(),
                                         const CallOptions& call = CallOptions());

  // NOT_FOUND when the collection has no live member. Retried.
  absl::StatusOr<CollectionInfo> GetCollection(const std::string& name,
                                               const CallOptions& call = CallOptions());

  // One page of collection names. Retried.
  absl::StatusOr<CollectionPage> ListCollections(
      const ListCollectionsOptions& options = ListCollectionsOptions(),
      const CallOptions& call = CallOptions());

  // Removes a collection; returns how many live members it had (0 if it did
  // not exist). No expiry events. Retried.
  absl::StatusOr<uint64_t> DeleteCollection(const std::string& name,
                                            const CallOptions& call = CallOptions());

  // Starts a subscription that calls `handlers` until it is cancelled or ends
  // with an error. INVALID_ARGUMENT without handlers.on_event or with both
  // filters set. The subscription may outlive the Client.
  absl::StatusOr<std::unique_ptr<Subscription>> Watch(const WatchOptions& options,
                                                      WatchHandlers handlers);

  // The same subscription, read with EventStream::Next().
  absl::StatusOr<std::unique_ptr<EventStream>> WatchStream(const WatchOptions& options,
                                                           size_t queue_capacity = 1024);

  // ---- Consumer groups. Calls that change a group (create, delete, reset,
  // poll, ack, nack, extend, redrive) are never retried: a repeat after an
  // applied attempt would answer differently (ALREADY_EXISTS, NOT_FOUND, a
  // lease no longer held) or lease other events.

  // ALREADY_EXISTS when the name is taken.
  absl::StatusOr<ConsumerGroupInfo> CreateConsumerGroup(const ConsumerGroupOptions& options,
                                                        const CallOptions& call = CallOptions());
  // With up to `max_leases` of its leases (at most 1000). Retried.
  absl::StatusOr<ConsumerGroupInfo> GetConsumerGroup(const std::string& name,
                                                     uint32_t max_leases = 0,
                                                     const CallOptions& call = CallOptions());
  // One page of groups, by name. Retried.
  absl::StatusOr<ConsumerGroupPage> ListConsumerGroups(
      const ListConsumerGroupsOptions& options = ListConsumerGroupsOptions(),
      const CallOptions& call = CallOptions());
  // The group as it was.
  absl::StatusOr<ConsumerGroupInfo> DeleteConsumerGroup(const std::string& name,
                                                        const CallOptions& call = CallOptions());
  // Moves the group's position (kNew, kOldest, kAfterSequence); its pending
  // events are dropped.
  absl::StatusOr<ConsumerGroupInfo> ResetConsumerGroup(const std::string& name, StartPosition start,
                                                       uint64_t after_sequence = 0,
                                                       const CallOptions& call = CallOptions());
  // Leases events to `consumer` (named, so that it keeps its leases when it
  // reconnects) until the group's visibility timeout.
  absl::StatusOr<PollResult> Poll(const std::string& group, const std::string& consumer,
                                  const PollOptions& options = PollOptions(),
                                  const CallOptions& call = CallOptions());
  // One result per lease, in order.
  absl::StatusOr<std::vector<LeaseResult>> Ack(const std::string& group,
                                               const std::string& consumer,
                                               const std::vector<LeaseRef>& leases,
                                               const CallOptions& call = CallOptions());
  // Releases leases at once, for redelivery.
  absl::StatusOr<std::vector<LeaseResult>> Nack(const std::string& group,
                                                const std::string& consumer,
                                                const std::vector<LeaseRef>& leases,
                                                const CallOptions& call = CallOptions());
  // Each lease then ends `extension` after now (at most 12 h).
  absl::StatusOr<std::vector<LeaseResult>> ExtendLeases(const std::string& group,
                                                        const std::string& consumer,
                                                        const std::vector<LeaseRef>& leases,
                                                        absl::Duration extension,
                                                        const CallOptions& call = CallOptions());
  // One page of the events that used up their deliveries. Retried.
  absl::StatusOr<DeadLetterPage> ListDeadLetters(const std::string& group, int page_size = 0,
                                                 const std::string& page_token = "",
                                                 const CallOptions& call = CallOptions());
  // Makes the dead letters with these sequences (all when empty) pending
  // again; returns how many.
  absl::StatusOr<uint64_t> RedriveDeadLetters(const std::string& group,
                                              const std::vector<uint64_t>& sequences = {},
                                              const CallOptions& call = CallOptions());

 private:
  // Shares the channel (connection_) and options_.
  friend class Consumer;

  // Constant after construction.
  const ClientOptions options_;
  const std::shared_ptr<internal::Connection> connection_;
};

}  // namespace lapse::client

#endif  // LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CLIENT_H_

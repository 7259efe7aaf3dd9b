// Store: what the gRPC service needs from a backend — every RPC's operation,
// the expiry events for watchers, and "answer once this is durable".
//
// The service (server/service) talks only to this interface. Today it is
// implemented by EmbeddedStore (embedded_store.h: the in-process engine, with
// the write-ahead log when a data directory is set); a store on a network
// engine (Redis Cluster) implements the same contract, and every store must
// pass the same conformance suite (tests/integration, run against each).
//
//   store->PutMembers("orders:42", writes, {.max_members = 3},
//                     [reactor](absl::StatusOr<std::vector<PutResult>> r) {
//                       ... reactor->Finish(...);
//                     });
//
// Contract, for every implementation:
// - Asynchronous completion. Each operation takes a `done` callback and calls
//   it exactly once, with the result or the error. It may be called before
//   the operation returns (an in-memory answer) or later on a thread of the
//   store's (the WAL's flusher, a network client's I/O thread). An operation
//   never blocks its caller on I/O or on the network: gRPC reactors call it.
//   `done` must not block either, and must not call back into the store
//   synchronously in a way that waits on the store's threads.
// - Arguments. String views and spans need only stay valid until the
//   operation returns; the store copies what it keeps.
// - Semantics. Those of Engine (server/engine/engine.h), which states them
//   per operation: validation against Limits with errors naming the API
//   field, a due member never returned, counted or listed, exactly one event
//   per expiry, a failing request writes nothing. Consumer groups: those of
//   ConsumerGroups (server/engine/consumer_groups.h); a group that can
//   deliver something other than new events (or was deleted) is announced to
//   the store's group listener, cheaply and without blocking (new events are announced
//   by the events listener).
// - Durability. A mutating operation (put, get with a refresh, remove,
//   expire, persist, delete collection; for consumer groups create, delete,
//   reset, poll, ack, nack, extend, re-drive) calls `done` with OK only once its
//   changes are as durable as the store promises (for EmbeddedStore: the
//   --fsync policy; memory-only: at once). If that fails, `done` gets the
//   error. Reads answer as soon as they have read.
// - Visibility. A read issued after `done` of a write was called with OK
//   sees that write. A read concurrent with a write may see it before it is
//   durable; if it then fails, it is undone before `done` hears of the
//   error, so no read issued after sees it, and no restart brings it back. Events become readable
//   from events() only once they are durable, so no watcher sees an expiry a crash could take back.
// - Events. events() is an EventSource: sequences strictly increase and are
//   never reused, a position no longer retained is OUT_OF_RANGE. The
//   listener given to the store at construction is told, cheaply and without
//   blocking, whenever new events become readable. Its store_id() is the same
//   for as long as the history its positions refer to (EmbeddedStore: the
//   data directory's life; memory-only: one run), and a resume token of
//   another id is OUT_OF_RANGE. A store whose events come from several
//   partitions (each with its own sequence) merges them into this one
//   sequence locally and maps it to and from resume tokens that hold one
//   sequence per partition (EventSource::ResumeTokenAfter, PositionOfToken).
//
// Thread safety: every method may be called from many threads at once.
#ifndef LAPSE_SERVER_STORAGE_STORE_H_
#define LAPSE_SERVER_STORAGE_STORE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/engine/consumer_groups.h"
#include "server/engine/engine.h"
#include "server/engine/event_source.h"
#include "server/engine/limits.h"

namespace lapse {

// A store's answer to one operation; called exactly once.
template <typename T>
using StoreDone = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

class Store {
 public:
  virtual ~Store() = default;

  // The limits requests are validated against.
  virtual const Limits& limits() const = 0;

  // Runs `start`, which starts several operations on this thread one after
  // another (one StreamWrites request), and lets the store make their changes
  // durable together rather than one at a time (EmbeddedStore: one log write,
  // and under --fsync=always one fdatasync, for all of them). Each operation
  // still calls `done` as the contract says, only once its changes are
  // durable, possibly after `start` returns; `start` must not wait for any
  // of them. By default it just runs `start`.
  virtual void StartTogether(absl::FunctionRef<void()> start) { start(); }

  virtual void PutMembers(absl::string_view collection, absl::Span<const MemberWrite> writes,
                          const PutOptions& options, StoreDone<std::vector<PutResult>> done) = 0;
  // `refresh` other than None moves the deadline of every member found.
  virtual void GetMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                          const Expiration& refresh, StoreDone<std::vector<GetResult>> done) = 0;
  // Per key: whether a live member was removed.
  virtual void RemoveMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                             StoreDone<std::vector<bool>> done) = 0;
  virtual void ExpireMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                             const Expiration& expiration, ExpireCondition condition,
                             StoreDone<std::vector<ExpireResult>> done) = 0;
  virtual void PersistMembers(absl::string_view collection,
                              absl::Span<const absl::string_view> keys,
                              StoreDone<std::vector<PersistOutcome>> done) = 0;
  virtual void ListMembers(absl::string_view collection, const ListMembersOptions& options,
                           StoreDone<MemberPage> done) = 0;
  // NOT_FOUND when the collection has no live member.
  virtual void GetCollection(absl::string_view name, StoreDone<CollectionInfo> done) = 0;
  // Collections whose name starts with `prefix`, after `after` (exclusive).
  virtual void ListCollections(absl::string_view prefix, int page_size, absl::string_view after,
                               StoreDone<CollectionPage> done) = 0;
  // Live members removed; 0 if there was no such collection.
  virtual void DeleteCollection(absl::string_view name, StoreDone<uint64_t> done) = 0;

  // The expiry events, for watchers.
  virtual const EventSource& events() const = 0;

  // Consumer groups.
  virtual void CreateConsumerGroup(absl::string_view name, const ConsumerGroupOptions& options,
                                   const GroupStart& start, StoreDone<ConsumerGroupInfo> done) = 0;
  // At most `max_leases` leases are listed.
  virtual void GetConsumerGroup(absl::string_view name, size_t max_leases,
                                StoreDone<ConsumerGroupInfo> done) = 0;
  virtual void ListConsumerGroups(int page_size, absl::string_view after,
                                  StoreDone<ConsumerGroups::Page> done) = 0;
  // Answers the group as it was.
  virtual void DeleteConsumerGroup(absl::string_view name, StoreDone<ConsumerGroupInfo> done) = 0;
  virtual void ResetConsumerGroup(absl::string_view name, const GroupStart& start,
                                  StoreDone<ConsumerGroupInfo> done) = 0;
  // Never waits for events: an empty result means none is deliverable now.
  virtual void Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
                    StoreDone<PollResult> done) = 0;
  // Per lease: OK, or FAILED_PRECONDITION when the consumer does not hold it.
  virtual void Ack(absl::string_view group, absl::string_view consumer,
                   absl::Span<const LeaseRef> leases,
                   StoreDone<std::vector<absl::Status>> done) = 0;
  virtual void Nack(absl::string_view group, absl::string_view consumer,
                    absl::Span<const LeaseRef> leases,
                    StoreDone<std::vector<absl::Status>> done) = 0;
  virtual void ExtendLeases(absl::string_view group, absl::string_view consumer,
                            absl::Span<const LeaseRef> leases, absl::Duration extension,
                            StoreDone<std::vector<absl::Status>> done) = 0;
  virtual void ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                               StoreDone<DeadLetterPage> done) = 0;
  // How many were re-driven.
  virtual void RedriveDeadLetters(absl::string_view group, absl::Span<const uint64_t> sequences,
                                  StoreDone<size_t> done) = 0;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_STORE_H_

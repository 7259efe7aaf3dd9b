// ConsumerGroups: named groups of workers that share the expiry events of one
// EventSource, each event handled by one worker of a group at a time.
//
// A group has a filter (collections or a prefix, as a watch has), a position
// in the event feed, and options: how long a delivered event stays leased to
// its consumer (visibility timeout), how many deliveries it gets before it is
// dead-lettered, how many unacknowledged events one consumer may hold, and
// whether values are carried. Consumers are named, created by their first
// Poll, and keep their leases across reconnections.
//
// Every event matching a group's filter is leased to one consumer at a time
// by Poll and stays pending until acknowledged. A lease that expires, or that
// its consumer releases (Nack), makes the event due for redelivery, which the
// next Poll of any consumer serves before new events, with the delivery
// count one higher. After max_deliveries the event is moved to the group's
// dead-letter list, where it stays until re-driven or the group is deleted;
// while that list is full the event stays pending and is delivered again.
// Acking, releasing or extending a lease that is no longer held (it expired,
// went to another consumer or was acked already) is refused with
// FAILED_PRECONDITION, so the worker knows the event may be handled twice.
//
// Events a group has not yet received are read from the source, which keeps
// them within its own retention bounds; events received and not acknowledged
// are kept by the group (pending and dead letters, bounded by Limits). When
// the source discards events a group had not received, the group is told,
// once, which range of sequences it lost: the Poll that reaches the gap
// carries it in PollResult::lost. Nothing is skipped silently.
//
// Time moves leases: an operation on the groups first expires the leases
// that are due, and ExpireLeases does it for a thread that sleeps until
// NextLeaseDeadline (an Expirer built with ConsumerGroups::Work()).
//
// Durability, as in the engine (journal.h): with a journal, every operation
// that changes a group encodes its changes as records (kGroup*), with the
// records that undo them, applies them through Apply — the code replay runs
// — and commits them to the journal under the groups' lock, handing out the
// CommitTicket for the store to wait on before it answers. While the journal
// refuses changes, those operations fail with its status. What time alone
// decides is not journaled: a lease whose deadline passed expires again, the
// same way, once its records are replayed. Consumers holding no lease, and
// the *_total counters, are not kept either.

//
//   lapse::ConsumerGroups groups({}, lapse::RealClock(), &feed);
//   groups.Create("billing", {.filter = {.prefix = "orders:"}}, {});
//   absl::StatusOr<lapse::PollResult> got = groups.Poll("billing", "worker-1", 10);
//   for (const lapse::Delivery& d : got->deliveries) {
//     Handle(d.event);
//     groups.Ack("billing", "worker-1", {{d.event.sequence, d.delivery_count}});
//   }
//
// Thread safety: safe for concurrent use. One lock covers every group; it is
// taken before the source's, and the listeners run outside it.
#ifndef LAPSE_SERVER_ENGINE_CONSUMER_GROUPS_H_
#define LAPSE_SERVER_ENGINE_CONSUMER_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/engine/deadline_queue.h"
#include "server/engine/event_source.h"
#include "server/engine/expirer.h"
#include "server/engine/journal.h"
#include "server/engine/limits.h"

namespace lapse {

struct ConsumerGroupOptions {
  EventFilter filter;
  // How long a delivered event stays leased to its consumer.
  absl::Duration visibility_timeout = absl::Seconds(30);
  // Deliveries before an event is dead-lettered.
  uint32_t max_deliveries = 5;
  // Leased events one consumer may hold unacknowledged; a Poll hands out no
  // more (flow control).
  uint32_t max_unacked_per_consumer = 100;
};

// Where a new (or reset) group starts in the event feed.
struct GroupStart {
  enum class Kind { kNew, kOldest, kAfterSequence };
  Kind kind = Kind::kNew;
  // With kAfterSequence: the first event delivered is the one after it.
  uint64_t after_sequence = 0;
};

// Sequences first..last (inclusive) that the source discarded before the
// group received them. Some of them may not have matched the group's filter.
struct LostRange {
  uint64_t first = 0;
  uint64_t last = 0;

  bool operator==(const LostRange& other) const {
    return first == other.first && last == other.last;
  }
};

// One event leased to the consumer that polled.
struct Delivery {
  ExpiryEvent event;
  // 1 for the first delivery.
  uint32_t delivery_count = 0;
  absl::Time lease_deadline;
};

struct PollResult {
  // Redeliveries first, then new events, each in sequence order.
  std::vector<Delivery> deliveries;
  // Set on the one Poll that tells the group of a loss (see the top comment).
  std::optional<LostRange> lost;
};

// Names one lease: the event and which delivery of it.
struct LeaseRef {
  uint64_t sequence = 0;
  uint32_t delivery_count = 0;
};

struct LeaseInfo {
  uint64_t sequence = 0;
  std::string consumer;
  uint32_t delivery_count = 0;
  absl::Time deadline;
};

struct ConsumerInfo {
  std::string name;
  size_t unacked = 0;
  absl::Time last_seen;
};

struct ConsumerGroupInfo {
  std::string name;
  ConsumerGroupOptions options;
  // Every event up to this sequence has been received by the group (or did
  // not match its filter).
  uint64_t position = 0;
  // Sequences in the source after `position`: an upper bound on the matching
  // events the group has not received yet.
  uint64_t lag = 0;
  // Leased or awaiting redelivery.
  size_t pending = 0;
  size_t awaiting_redelivery = 0;
  size_t dead_lettered = 0;
  // Bytes of the events the group keeps (pending and dead letters).
  size_t bytes = 0;
  // Totals since the group was created (or the process started).
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t lost_sequences_total = 0;
  std::vector<ConsumerInfo> consumers;
  // The leases held, in sequence order, at most as many as asked for.
  std::vector<LeaseInfo> leases;
};

struct DeadLetter {
  ExpiryEvent event;
  uint32_t delivery_count = 0;
  // The consumer of the last delivery.
  std::string consumer;
  absl::Time dead_lettered_at;
};

struct DeadLetterPage {
  std::vector<DeadLetter> letters;
  // The sequence to continue after, when more may follow.
  std::optional<uint64_t> next_after;
};

// INVALID_ARGUMENT naming the field when `options` break `limits` (the
// filter's names, visibility_timeout, max_deliveries,
// max_unacked_per_consumer). Every store checks a new group with it.
absl::Status ValidateConsumerGroupOptions(const ConsumerGroupOptions& options,
                                          const Limits& limits);

// FAILED_PRECONDITION for leases[index] (`ref`), which the consumer does not
// hold, saying `why` and that the event may be handled more than once.
absl::Status LostLeaseError(size_t index, const LeaseRef& ref, absl::string_view why);

class ConsumerGroups {
 public:
  struct Options {
    Limits limits = {};
    // Called with a group's name whenever it can deliver events that are not
    // new in the source: a lease expired or was released, a dead letter was
    // re-driven, a consumer acked (and may take more), the group was reset
    // or deleted (its waiters then learn NOT_FOUND).
    // New events are announced by the source's own listener. Runs outside the
    // groups' lock; must be cheap and must not block. None when empty.
    std::function<void(absl::string_view group)> on_readable = nullptr;
    // Called with the new earliest lease deadline whenever it moves earlier
    // (ExpirerWakeup::Listener). Runs under the groups' lock: must be cheap
    // and must not call into the groups. None when empty.
    std::function<void(absl::Time)> earlier_deadline_listener = nullptr;
    // Where changes are recorded for durability; none when null. Not owned;
    // must outlive the groups.
    Journal* journal = nullptr;
  };

  // `clock` and `source` are not owned and must outlive the groups.
  ConsumerGroups(const Options& options, Clock* clock, const EventSource* source);
  ~ConsumerGroups();
  ConsumerGroups(const ConsumerGroups&) = delete;
  ConsumerGroups& operator=(const ConsumerGroups&) = delete;

  // ALREADY_EXISTS if a group has the name; RESOURCE_EXHAUSTED past
  // Limits::max_consumer_groups; OUT_OF_RANGE for a start the source cannot
  // serve (EventSource::CheckPosition).
  //
  // The operations that change groups take `committed`: when not null, it
  // receives the ticket of the batch the operation committed to the journal
  // (left alone when it committed none).
  absl::StatusOr<ConsumerGroupInfo> Create(absl::string_view name,
                                           const ConsumerGroupOptions& options,
                                           const GroupStart& start,
                                           CommitTicket* committed = nullptr);
  // NOT_FOUND when there is no such group, INVALID_ARGUMENT naming the field
  // ("name" or "group") when no group could have the name (ValidateName), as
  // for every operation below.
  // At most `max_leases` leases are listed.
  absl::StatusOr<ConsumerGroupInfo> Get(absl::string_view name, size_t max_leases = 0);
  // Groups after `after` (exclusive) in name order, without their leases;
  // `page_size` as in AIP-158 (validate.h). `next_after` is set when more may
  // follow.
  struct Page {
    std::vector<ConsumerGroupInfo> groups;
    std::optional<std::string> next_after;
  };
  absl::StatusOr<Page> List(int page_size, absl::string_view after);
  // Deletes the group, its leases and its dead letters. Returns the group as
  // it was.
  absl::StatusOr<ConsumerGroupInfo> Delete(absl::string_view name,
                                           CommitTicket* committed = nullptr);
  // Moves the group's position; its pending events are dropped (acks of
  // their leases are then refused). Dead letters stay. Returns the group as
  // it is then.
  absl::StatusOr<ConsumerGroupInfo> Reset(absl::string_view name, const GroupStart& start,
                                          CommitTicket* committed = nullptr);

  // Leases up to `max_events` events to `consumer`, fewer if it would then
  // hold more than max_unacked_per_consumer, if the group holds
  // Limits::max_group_pending events (or max_group_bytes), or if the answer
  // would pass Limits::max_response_bytes (counted as in ListMembers; it
  // holds at least one event; new events are read only while there is room
  // for the largest one). Never waits: an empty result means nothing is
  // deliverable now.
  absl::StatusOr<PollResult> Poll(absl::string_view group, absl::string_view consumer,
                                  size_t max_events, CommitTicket* committed = nullptr);
  // Per lease: OK once acknowledged (the event is done), or
  // FAILED_PRECONDITION when `consumer` does not hold it.
  absl::StatusOr<std::vector<absl::Status>> Ack(absl::string_view group, absl::string_view consumer,
                                                absl::Span<const LeaseRef> leases,
                                                CommitTicket* committed = nullptr);
  // Per lease, as Ack: releases it at once for redelivery (or the dead-letter
  // list after max_deliveries).
  absl::StatusOr<std::vector<absl::Status>> Nack(absl::string_view group,
                                                 absl::string_view consumer,
                                                 absl::Span<const LeaseRef> leases,
                                                 CommitTicket* committed = nullptr);
  // Per lease, as Ack: its deadline becomes now + `extension` (at most
  // Limits::max_visibility_timeout).
  absl::StatusOr<std::vector<absl::Status>> ExtendLeases(absl::string_view group,
                                                         absl::string_view consumer,
                                                         absl::Span<const LeaseRef> leases,
                                                         absl::Duration extension,
                                                         CommitTicket* committed = nullptr);

  // Dead letters after sequence `after`, in sequence order.
  absl::StatusOr<DeadLetterPage> ListDeadLetters(absl::string_view group, uint64_t after,
                                                 int page_size);
  // Makes the named dead letters (all of them when `sequences` is empty)
  // pending again, with their delivery counts reset, as far as
  // Limits::max_group_pending allows. Returns how many were re-driven;
  // sequences that are not dead letters are skipped.
  absl::StatusOr<size_t> RedriveDeadLetters(absl::string_view group,
                                            absl::Span<const uint64_t> sequences,
                                            CommitTicket* committed = nullptr);

  // Releases every lease whose deadline has passed. Returns how many.
  size_t ExpireLeases();
  // The earliest lease deadline; NoDeadline() when none.
  absl::Time NextLeaseDeadline() const;
  // What an Expirer drives to expire leases on time.
  ExpiryWork Work();

  // ---- Durability: used by the store in storage/. ----

  // Applies one replayed record as it was recorded, through the code the
  // live operations change state with; records that are not a group's
  // (IsGroupRecord) are ignored. DATA_LOSS when a kGroupCreate's options do
  // not decode.
  absl::Status Apply(const JournalRecord& record);
  // Undoes changes whose batches could not be made durable: under the
  // groups' lock, calls `refuse` (as Engine::RollBack does; the store passes
  // one that also rolls the engine back) and applies the group records of
  // the undo batches it returns, newest first, each batch's in reverse.
  void RollBack(const std::function<std::vector<std::string>()>& refuse);
  // Calls `fn` with records that rebuild every group as it is now (each
  // group's kGroupCreate, then its pending events and dead letters), under
  // the groups' lock, for a snapshot; stops at the first error `fn` returns.
  absl::Status ForEachStateRecord(
      const std::function<absl::Status(const JournalRecord&)>& fn) const;

 private:
  struct Group;
  struct Pending;
  struct FeedRead;
  // One operation's changes and what undoes them, for the journal.
  struct Change {
    BatchEncoder redo;
    BatchEncoder undo;
  };
  using PerLease = std::function<absl::Status(Group& group, Pending& pending, Change& change)>;

  absl::StatusOr<Group*> FindLocked(absl::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK while changes can be recorded; the journal's status otherwise.
  absl::Status WritableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> StartPositionOf(const GroupStart& start) const;
  ConsumerGroupInfo InfoLocked(const Group& group, size_t max_leases) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<absl::Status>> ForEachHeldLease(absl::string_view group,
                                                             absl::string_view consumer,
                                                             absl::Span<const LeaseRef> leases,
                                                             CommitTicket* committed,
                                                             const PerLease& fn);
  // Reads up to `want` events after the group's position, about
  // `response_bytes` of answer at most, without changing anything.
  absl::Status ReadFeedLocked(const Group& group, size_t want, size_t response_bytes,
                              FeedRead* read) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Changes: `undo` is recorded before, and `redo` applied as soon as,
  // each is called.
  void UndoLocked(Change& change, const JournalRecord& undo) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RedoLocked(Change& change, const JournalRecord& redo) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the change to the journal, if there is one and it changed anything.
  void CommitLocked(Change& change, CommitTicket* committed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that rebuild `group`: its kGroupCreate (unless `pending_only`),
  // its pending events, its dead letters (unless `pending_only`). Their views
  // point into the group.
  void ForEachGroupRecordLocked(const Group& group, bool pending_only,
                                const std::function<void(const JournalRecord&)>& fn) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyLocked(const JournalRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The state changes ApplyLocked makes.
  void ErasePendingLocked(Group& group, uint64_t sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases `pending` to `consumer` until `deadline_ms`; with no consumer,
  // the event awaits redelivery.
  void SetLeaseLocked(Group& group, Pending& pending, absl::string_view consumer,
                      int64_t deadline_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the lease under `deadline_ms`, telling the listener when it is the
  // earliest.
  void QueueLeaseLocked(Pending& pending, int64_t deadline_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLeaseLocked(Group& group, Pending& pending) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropPendingLocked(Group& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The record that ends `pending`'s lease at `now`: due for redelivery, or
  // dead-lettered after max_deliveries while the dead-letter list has room.
  JournalRecord ReleaseRecordLocked(const Group& group, const Pending& pending,
                                    absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases due leases (not journaled: replay expires them the same way);
  // appends the groups that became readable.
  size_t ExpireLeasesLocked(absl::Time now, std::vector<std::string>* readable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TouchConsumerLocked(Group& group, absl::string_view consumer, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Announce(const std::vector<std::string>& readable) const;
  // Announces `groups` when it goes out of scope, which is after the lock
  // taken in a narrower scope is released, however the scope is left.
  class Announcer {
   public:
    explicit Announcer(const ConsumerGroups* owner) : owner_(owner) {}
    ~Announcer() { owner_->Announce(groups); }
    Announcer(const Announcer&) = delete;
    Announcer& operator=(const Announcer&) = delete;

    std::vector<std::string> groups;

   private:
    const ConsumerGroups* const owner_;
  };

  // Constant after construction.
  const Options options_;
  Clock* const clock_;
  const EventSource* const source_;

  // State below is protected by mu_, and so is every Group, reached only
  // through groups_.
  mutable Mutex mu_;
  absl::btree_map<std::string, std::unique_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
  // Every lease held, by deadline.
  DeadlineQueue<Pending> leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_CONSUMER_GROUPS_H_

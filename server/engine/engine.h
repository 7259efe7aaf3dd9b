// Engine: the in-memory store of expiring collections.
//
// A collection is a named map of members (key -> value), created by its first
// write and gone when its last member goes. Each member has a deadline or none.
// A member whose deadline has passed is never returned, counted or listed, and
// produces exactly one ExpiryEvent in the EventFeed: when the Expirer calls
// ExpireDue, or earlier when an operation touches its collection. Removing,
// overwriting with a new deadline, persisting or deleting a member before its
// deadline produces no event.
//
//   lapse::EventFeed log({});
//   lapse::Engine engine({.shards = 16}, lapse::RealClock(), &log);
//   engine.Put("orders:42", {{.key = "o1", .value = "...",
//                             .expiration = lapse::Expiration::Ttl(absl::Minutes(30))}}, {});
//
// The engine is pure C++ and Abseil: no gRPC, no proto. Requests are validated
// against Limits (validate.h), and errors name the API field at fault
// ("members[2].ttl"); a request that fails writes nothing.
//
// With a journal (durability), a write is applied in memory first and made
// durable afterwards; each mutating operation hands out the CommitTicket of
// its batch for the store to wait on. A read concurrent with a write whose
// batch is not yet durable may see that write. If the batch fails, the store
// rolls the engine back (RollBack) before it tells the writer, so a write
// reported as failed is never seen afterwards. While the journal refuses
// changes, writes fail with its status, and so do reads that meet members past
// their deadline (they can be neither expired nor returned); the Expirer
// pauses.
//
// Thread safety: an Engine is safe for concurrent use from many threads.
// Collections are sharded by name, one lock per shard; an operation on one
// collection takes exactly one shard lock.
#ifndef LAPSE_SERVER_ENGINE_ENGINE_H_
#define LAPSE_SERVER_ENGINE_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/base/clock.h"
#include "server/base/deadline.h"
#include "server/engine/event_feed.h"
#include "server/engine/expiration.h"
#include "server/engine/journal.h"
#include "server/engine/limits.h"

namespace lapse {

enum class PutCondition { kAlways, kIfAbsent, kIfPresent };
enum class PutOutcome { kCreated, kReplaced, kSkipped };

// One member to write. The views must stay valid during the call.
struct MemberWrite {
  absl::string_view key;
  absl::string_view value;
  Expiration expiration;
  PutCondition condition = PutCondition::kAlways;
  // Keep the existing member's deadline; a new member is persistent.
  bool keep_expiration = false;
};

struct PutOptions {
  // Non-zero: fail with FAILED_PRECONDITION, writing nothing, if the
  // collection would hold more live members than this after the write.
  uint32_t max_members = 0;
  // The expiration of every write with none of its own and without
  // keep_expiration. Errors name "default_ttl" / "default_expire_time".
  Expiration default_expiration;
};

struct PutResult {
  PutOutcome outcome;
  // NoDeadline() when persistent.
  absl::Time expire_time;
};

struct GetResult {
  bool found = false;
  std::string value;
  absl::Time expire_time = NoDeadline();
};

enum class ExpireCondition { kAlways, kIfNoExpiration, kIfHasExpiration, kIfLater, kIfEarlier };
enum class ExpireOutcome { kUpdated, kConditionNotMet, kNotFound, kExpired };

struct ExpireResult {
  ExpireOutcome outcome;
  // The deadline after the call; NoDeadline() if persistent or gone.
  absl::Time expire_time;
};

enum class PersistOutcome { kPersisted, kNoExpiration, kNotFound };

enum class MemberOrder { kKey, kExpireTime };

// A position in a member listing: the last member of the previous page.
struct MemberCursor {
  absl::Time expire_time;  // Used only with MemberOrder::kExpireTime.
  std::string key;
};

struct ListMembersOptions {
  MemberOrder order = MemberOrder::kKey;
  // 0 means Limits::default_page_size.
  int page_size = 0;
  std::optional<MemberCursor> after;
  bool keys_only = false;
};

struct ListedMember {
  std::string key;
  std::string value;
  absl::Time expire_time;
};

struct MemberPage {
  std::vector<ListedMember> members;
  // Set when more members may follow (also after a page cut short to fit in
  // one response).
  std::optional<MemberCursor> next;
};

struct CollectionInfo {
  std::string name;
  uint64_t member_count = 0;
  uint64_t expiring_count = 0;
  // NoDeadline() when no member expires.
  absl::Time next_expire_time = NoDeadline();
};

struct CollectionPage {
  std::vector<CollectionInfo> collections;
  // Name of the last collection returned, when more may follow.
  std::optional<std::string> next_after;
};

class Engine {
 public:
  struct Options {
    size_t shards = 16;
    Limits limits = {};
    // Upper bound on members expired under one shard lock hold, so writers
    // are never stalled by a large expiry burst.
    size_t expire_batch = 1024;
    // Where changes are recorded for durability; none when null (memory-only).
    // Not owned; must outlive the engine.
    Journal* journal = nullptr;
    // Called with the new deadline whenever a shard's earliest deadline moves
    // earlier, so a sleeping Expirer can wake sooner (ExpirerWakeup::Listener).
    // Runs under a shard lock: must be cheap and must not call into the
    // engine. None when empty.
    std::function<void(absl::Time)> earlier_deadline_listener = nullptr;
    // Test only: called by Put under its shard lock once the request passed
    // every check (and its new members are counted against
    // max_total_members), before anything is written, so a test can hold a
    // writer there. Must not call into the engine. None when empty.
    std::function<void()> put_checked_hook_for_testing = nullptr;
  };

  // `clock` and `log` are not owned and must outlive the engine.
  Engine(const Options& options, Clock* clock, EventFeed* log);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The operations that may change state take `committed`: when not null, it
  // receives the ticket of the batch the operation committed to the journal
  // (left alone when it committed none).
  absl::StatusOr<std::vector<PutResult>> Put(absl::string_view collection,
                                             absl::Span<const MemberWrite> writes,
                                             const PutOptions& options,
                                             CommitTicket* committed = nullptr);
  // `refresh` other than None moves the deadline of every member found.
  // RESOURCE_EXHAUSTED, refreshing nothing, when the answer would pass
  // Limits::max_response_bytes.
  absl::StatusOr<std::vector<GetResult>> Get(absl::string_view collection,
                                             absl::Span<const absl::string_view> keys,
                                             const Expiration& refresh = Expiration::None(),
                                             CommitTicket* committed = nullptr);
  // Per key: whether a live member was removed.
  absl::StatusOr<std::vector<bool>> Remove(absl::string_view collection,
                                           absl::Span<const absl::string_view> keys,
                                           CommitTicket* committed = nullptr);
  absl::StatusOr<std::vector<ExpireResult>> Expire(absl::string_view collection,
                                                   absl::Span<const absl::string_view> keys,
                                                   const Expiration& expiration,
                                                   ExpireCondition condition,
                                                   CommitTicket* committed = nullptr);
  absl::StatusOr<std::vector<PersistOutcome>> Persist(absl::string_view collection,
                                                      absl::Span<const absl::string_view> keys,
                                                      CommitTicket* committed = nullptr);
  // A page ends early, with `next` set, before a member that would pass
  // Limits::max_response_bytes; it always holds at least one member.
  absl::StatusOr<MemberPage> ListMembers(absl::string_view collection,
                                         const ListMembersOptions& options);
  // NOT_FOUND when the collection has no live member.
  absl::StatusOr<CollectionInfo> GetCollection(absl::string_view name);
  // Collections whose name starts with `prefix`, after `after` (exclusive);
  // a page ends early as ListMembers' does.
  absl::StatusOr<CollectionPage> ListCollections(absl::string_view prefix, int page_size,
                                                 absl::string_view after);
  // Live members removed; 0 if there was no such collection.
  absl::StatusOr<uint64_t> DeleteCollection(absl::string_view name,
                                            CommitTicket* committed = nullptr);

  // Expires every member whose deadline is at or before the clock's now,
  // appending their events. Returns how many expired; none while the journal
  // refuses changes. The event feed's readers are told (on_readable) once
  // per Options::expire_batch events and once at the end, never under a
  // shard lock. Called by the Expirer; tests call it directly after moving a
  // FakeClock.
  size_t ExpireDue();
  // OK while changes can be recorded (always without a journal); otherwise
  // the journal's status, why writes are refused.
  absl::Status Writable() const;
  // The earliest deadline of any member; NoDeadline() when none.
  absl::Time NextDeadline() const;

  // ---- Durability: used by the store in storage/. ----

  // Applies one replayed record (kPut, kRemove, kSetDeadline,
  // kDeleteCollection, kExpiry) as it was recorded: no validation, no
  // events, no journaling, nothing expired on the way. The state changes
  // through the same code as in the live operations. Records of kEvent and
  // kNextSequence type, and the consumer groups' (IsGroupRecord), are not
  // the engine's and are ignored.
  void Apply(const JournalRecord& record);

  // Undoes changes whose batches could not be made durable. Takes every
  // shard lock (in index order), so that no operation is between its changes
  // and its commit; calls `refuse`, which must make the journal refuse
  // changes and return the undo batches of every committed batch that is not
  // durable, newest first; drops the event feed's events that are not yet
  // visible (those batches' expiries); releases the locks and applies the
  // undos (each batch's records in reverse order) through Apply. Called by the
  // store on its own thread, never under a shard lock.
  void RollBack(const std::function<std::vector<std::string>()>& refuse);

  // A position in Scan: the last member visited.
  struct ScanCursor {
    size_t shard = 0;
    bool started = false;
    std::string collection;
    std::string key;
  };
  using ScanFn = std::function<void(absl::string_view collection, absl::string_view key,
                                    absl::string_view value, int64_t deadline_ms)>;
  // Calls `fn` for up to `max_members` members after `cursor` in (shard,
  // collection, key) order, holding one shard lock at a time, and advances
  // the cursor. Returns false once every member has been visited. Members
  // changed while a scan is under way may be seen in either state.
  bool Scan(ScanCursor* cursor, size_t max_members, const ScanFn& fn);

  // Live members across all collections (members past their deadline that
  // are not yet expired included), and the members a Put under way has
  // counted against max_total_members before writing them.
  uint64_t total_members() const;

  struct Counts {
    uint64_t collections = 0;
    // Members with a deadline (due ones not yet expired included).
    uint64_t pending_deadlines = 0;
  };
  // For metrics: visits every collection, holding one shard lock at a time.
  Counts CountCollections() const;

  const Limits& limits() const { return options_.limits; }

  // Test only: the index of the shard that holds `collection`, so a test can
  // pick collections under different locks.
  size_t ShardIndexForTesting(absl::string_view collection) const { return ShardIndex(collection); }

 private:
  class Shard;
  class ShardOp;

  size_t ShardIndex(absl::string_view collection) const;
  Shard& ShardFor(absl::string_view collection) const;
  // The checks a request on `keys` of `collection` starts with.
  absl::Status CheckKeyedRequest(absl::string_view collection,
                                 absl::Span<const absl::string_view> keys) const;

  // Constant after construction.
  const Options options_;
  Clock* const clock_;
  EventFeed* const log_;
  std::vector<std::unique_ptr<Shard>> shards_;

  std::atomic<uint64_t> total_members_{0};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_ENGINE_H_

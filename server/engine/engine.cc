#include "server/engine/engine.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "server/base/coding.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/engine/collection.h"
#include "server/engine/deadline_queue.h"
#include "server/engine/pages.h"
#include "server/engine/validate.h"

namespace lapse {
namespace {

// Debug builds check that a thread holds at most one shard lock: an operation
// takes exactly one, and what runs under one (the earlier-deadline listener,
// the journal, the event feed, a Scan callback) must not call into the engine.
class OneShardLockPerThread {
 public:
  OneShardLockPerThread() {
#ifndef NDEBUG
    assert(!held_ && "a shard lock taken under another: called into the engine under a lock");
    held_ = true;
#endif
  }
  ~OneShardLockPerThread() {
#ifndef NDEBUG
    held_ = false;
#endif
  }
  OneShardLockPerThread(const OneShardLockPerThread&) = delete;
  OneShardLockPerThread& operator=(const OneShardLockPerThread&) = delete;

 private:
#ifndef NDEBUG
  inline static thread_local bool held_ = false;
#endif
};

// The buffers a thread's journaled operations encode their batch and its
// undo into, one operation at a time (OneShardLockPerThread). Kept from one
// operation to the next, so that journaling a put allocates nothing once they
// have grown; the journal copies what it keeps (Journal::Commit).
struct JournalBuffers {
  std::string batch;
  std::string undo;
};
thread_local JournalBuffers journal_buffers;
// What an operation may leave a thread's journal buffers holding: a larger
// one (many members put, expired or deleted at once) is given back.
constexpr size_t kJournalBufferKeptBytes = size_t{64} << 10;

void TrimJournalBuffer(std::string* buffer) {
  if (buffer->capacity() > kJournalBufferKeptBytes) std::string().swap(*buffer);
}

CollectionInfo InfoOf(const Collection& c) {
  return {std::string(c.name()), c.size(), c.expiring_count(),
          TimeOfDeadline(c.next_deadline_ms())};
}

}  // namespace

// ---- Shard -------------------------------------------------------------------

// The collections under one lock. Only a ShardOp changes them.
class Engine::Shard {
 public:
  Shard() = default;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  Mutex mu;

  // Calls `fn` for up to `max` members after `cursor` in this shard, and
  // advances the cursor. Returns how many.
  size_t Scan(Engine::ScanCursor* cursor, size_t max, const Engine::ScanFn& fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    size_t n = 0;
    while (n < max) {
      // cursor->key is the last member visited in cursor->collection, or
      // empty once that collection is done.
      auto it = collections_.begin();
      bool resume = false;
      if (cursor->started && !cursor->key.empty()) {
        it = collections_.lower_bound(cursor->collection);
        resume = it != collections_.end() && (*it)->name() == cursor->collection;
      } else if (cursor->started) {
        it = collections_.upper_bound(cursor->collection);
      }
      if (it == collections_.end()) return n;
      const Collection* c = it->get();
      const absl::string_view after = cursor->key;
      bool more = false;
      std::vector<const StoredMember*> page =
          c->PageByKey(resume ? &after : nullptr, max - n, &more);
      for (const StoredMember* m : page) fn(c->name(), m->key(), m->value(), c->DeadlineOf(*m));
      n += page.size();
      cursor->started = true;
      cursor->collection = std::string(c->name());
      cursor->key = more ? std::string(page.back()->key()) : std::string();
    }
    return n;
  }

  // The earliest deadline in the shard, or kNoDeadlineMs.
  int64_t NextDeadline() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return queue_.NextDeadline(); }

  void AddCounts(Engine::Counts* counts) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    counts->collections += collections_.size();
    for (const auto& c : collections_) counts->pending_deadlines += c->expiring_count();
  }

 private:
  friend class Engine::ShardOp;

  static absl::string_view NameOf(absl::string_view name) { return name; }
  static absl::string_view NameOf(const Collection::Ptr& c) { return c->name(); }
  struct NameLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NameOf(a) < NameOf(b);
    }
  };

  // The collection named `name` as it is, due members included; nullptr when
  // there is none.
  Collection* Find(absl::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = collections_.find(name);
    return it == collections_.end() ? nullptr : it->get();
  }

  // The shard's collections in name order: the one index for lookups and for
  // ordered listing. An entry is the collection's pointer, compared through
  // its name, so the name is stored once: some 11 bytes a collection, where a
  // hash table beside a name b-tree took some 30 (its slots 9 bytes each, at
  // a load of 7/16 to 7/8). A lookup costs a b-tree search, each comparison
  // reading another collection's name.
  absl::btree_set<Collection::Ptr, NameLess> collections_ ABSL_GUARDED_BY(mu);
  // Every collection with a member that has a deadline, by its earliest one.
  DeadlineQueue<Collection> queue_ ABSL_GUARDED_BY(mu);
};

// ---- ShardOp -----------------------------------------------------------------

// One operation on one shard, holding the shard's lock from construction to
// destruction: the frame every operation shares, and the only way state
// changes. Live operations and replay (Engine::Apply) make their changes
// through the same calls, PutMember, SetDeadline, RemoveMember, ExpireMember
// and DropCollection, each of which changes the collection, records the change
// and keeps the member count in step, so replay cannot drift from the live
// path (LevelDB's WriteBatchInternal::InsertInto serves both the same way).
//
// A live operation on a collection first expires the collection's due
// members, with their events. Its changes are recorded in a journal batch when
// the engine has a journal, together with their undo: the records that put
// back what each change replaced, which Engine::RollBack applies, newest
// first, if the batch cannot be made durable. When it ends, before the lock is
// released, it brings the collection's place in the deadline queue up to date,
// adjusts the member count, appends its events to the log and commits its
// batch: one shard's events and batches are logged in the order they happened,
// and across shards batches reach the journal in the order of their events'
// sequences (the commit runs under the event feed's lock).
//
// While the journal refuses changes (Writable()), a live operation changes
// nothing: a write must fail, and so must a read that meets members past their
// deadline, as it can neither expire them nor leave them out (status()).
//
// A replayed change records nothing, emits no event and expires nothing on the
// way.
class ABSL_SCOPED_LOCKABLE Engine::ShardOp {
 public:
  struct ReplayTag {};
  static constexpr ReplayTag kReplay{};

  // A live operation at `now` on the collection `name`. The ticket of the
  // batch it commits, if any, goes to `*committed` when that is not null.
  ShardOp(Engine& engine, absl::string_view name, absl::Time now, CommitTicket* committed = nullptr)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(shard_.mu)
      : ShardOp(engine, engine.ShardFor(name), name, now, /*live=*/true) {
    committed_ = committed;
    c_ = FindLive(name);
  }

  // The replay of one recorded change to the collection `name`.
  ShardOp(Engine& engine, absl::string_view name, ReplayTag) ABSL_EXCLUSIVE_LOCK_FUNCTION(shard_.mu)
      : ShardOp(engine, engine.ShardFor(name), name, absl::InfinitePast(), /*live=*/false) {
    c_ = shard_.Find(name);
  }

  // A live operation at `now` on a whole shard (ExpireDue, ListCollections).
  // With EventFeed::Notify::kLater its events wake no reader: the caller
  // calls EventFeed::NotifyReadable once it released the lock.
  ShardOp(Engine& engine, Shard& shard, absl::Time now,
          EventFeed::Notify notify = EventFeed::Notify::kNow)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(shard_.mu)
      : ShardOp(engine, shard, absl::string_view(), now, /*live=*/true) {
    notify_ = notify;
  }

  ~ShardOp() ABSL_UNLOCK_FUNCTION() {
    Finish();
    shard_.mu.Unlock();
  }

  ShardOp(const ShardOp&) = delete;
  ShardOp& operator=(const ShardOp&) = delete;

  // The operation's collection; nullptr when there is none, or no longer.
  Collection* collection() const { return c_; }
  // The collection's member `key`; nullptr when absent.
  const StoredMember* Find(absl::string_view key) const {
    return c_ == nullptr ? nullptr : c_->Find(key);
  }
  // Find's member with where the collection keeps `key` (Collection::Locate);
  // an empty place when there is no collection.
  Collection::Place Locate(absl::string_view key) const {
    return c_ == nullptr ? Collection::Place() : c_->Locate(key);
  }
  // A deadline d has passed iff d <= now_ms() (deadlines are whole ms).
  int64_t now_ms() const { return now_ms_; }
  // OK while the journal records changes (always without one); otherwise why
  // not, and the operation must change nothing. It cannot change while the
  // shard lock is held (Journal::status).
  absl::Status Writable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (!journaling_) return absl::OkStatus();
    if (!journal_checked_) {
      journal_status_ = engine_.options_.journal->status();
      journal_checked_ = true;
    }
    return journal_status_;
  }
  // OK unless the operation met members past their deadline that it could
  // not expire because the journal refuses changes; it must then fail.
  const absl::Status& status() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) { return refused_; }

  // Makes room in the batch and its undo for `batch_bytes` and `undo_bytes`
  // of records.
  void ReserveJournal(size_t batch_bytes, size_t undo_bytes) {
    if (!journaling_) return;
    journal_->Reserve(batch_bytes);
    undo_->Reserve(undo_bytes);
  }

  // Counts `n` members this operation is about to create in the engine's
  // total at once, so that writers on other shards see them before they are
  // written; false, counting nothing, when the total would then pass `max`.
  // The members created later count against the reservation, not again.
  bool ReserveMembers(uint64_t n, uint64_t max) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    uint64_t total = engine_.total_members_.load(std::memory_order_relaxed);
    do {
      // member_delta_ is what this operation removed so far (expiries on
      // the way): gone already, though not yet taken off the total.
      if (total + member_delta_ + n > max) return false;
    } while (
        !engine_.total_members_.compare_exchange_weak(total, total + n, std::memory_order_relaxed));
    member_delta_ -= static_cast<int64_t>(n);
    return true;
  }

  // ---- The changes: the one path for live operations and replay. ----
  // A member passed in is one Find() returned since the collection last
  // changed (Collection::Find).

  // Writes the member `key`, creating the collection when there is none.
  // `place`, when not null, is what Locate(key) returned since the collection
  // last changed: the write then need not search for the key again.
  void PutMember(absl::string_view key, absl::string_view value, int64_t deadline_ms,
                 const Collection::Place* place = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (c_ == nullptr) {
      assert(!name_.empty() && "a put in a whole-shard operation");
      c_ = Create(name_);
      place = nullptr;
    }
    const bool created = c_->Put(
        key, value, deadline_ms,
        [&](const StoredMember& existing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
          if (journaling_) undo_->Put(c_->name(), key, existing.value(), c_->DeadlineOf(existing));
        },
        place);
    if (created) {
      ++member_delta_;
      if (journaling_) undo_->Remove(c_->name(), key);
    }
    if (journaling_) journal_->Put(c_->name(), key, value, deadline_ms);
    changed_ = true;
  }

  // Moves `m`'s deadline (kNoDeadlineMs: it never expires). Returns where
  // the member is now (Collection::SetDeadline).
  const StoredMember* SetDeadline(const StoredMember* m, int64_t deadline_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (journaling_) undo_->SetDeadline(c_->name(), m->key(), c_->DeadlineOf(*m));
    m = c_->SetDeadline(m, deadline_ms);
    if (journaling_) journal_->SetDeadline(c_->name(), m->key(), deadline_ms);
    changed_ = true;
    return m;
  }

  // Removes `m` by request: no event.
  void RemoveMember(const StoredMember* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (journaling_) {
      journal_->Remove(c_->name(), m->key());
      undo_->Put(c_->name(), m->key(), m->value(), c_->DeadlineOf(*m));
    }
    Erase(c_, m);
    changed_ = true;
  }

  // Removes `m` as expired at its deadline `deadline_ms`, with its event when
  // live.
  void ExpireMember(const StoredMember* m, int64_t deadline_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    Expire(c_, m, deadline_ms);
    changed_ = true;
  }

  // Removes the collection and all its members, without events. Returns how
  // many members it had. REQUIRES: collection() is not null.
  uint64_t DropCollection() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    assert(c_ != nullptr);
    const uint64_t removed = c_->size();
    if (journaling_) {
      journal_->DeleteCollection(c_->name());
      bool more = false;
      for (const StoredMember* m : c_->PageByKey(nullptr, removed, &more)) {
        undo_->Put(c_->name(), m->key(), m->value(), c_->DeadlineOf(*m));
      }
    }
    member_delta_ -= static_cast<int64_t>(removed);
    Forget(c_);
    c_ = nullptr;
    return removed;
  }

  // ---- Whole-shard operations. ----

  // Expires due members of the collections at the front of the deadline
  // queue, up to `limit`. Returns how many expired.
  size_t ReapFront(size_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (HasDue() && !Writable().ok()) {
      refused_ = Writable();
      return 0;
    }
    size_t n = 0;
    while (n < limit && shard_.queue_.NextDeadline() <= now_ms_) {
      // A due collection is drained whole: a backlog expires collection by
      // collection, in order of their earliest deadlines, each collection's
      // members in deadline order. Interleaving collections member by member
      // would cost a queue move per member and halve the drain rate.
      Collection* c = shard_.queue_.Front();
      // A collection that may not fit in what is left of the pass waits for
      // the next pass rather than being cut: a cut collection expires member
      // by member with a key search each, one wholly due expires in bulk
      // (Collection::EraseDue). Only the first of a pass is cut, when it
      // holds more than the whole pass.
      if (n > 0 && c->size() > limit - n) break;
      n += Reap(c, limit - n);
    }
    return n;
  }

  // Whether a member of the shard is due.
  bool HasDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    return shard_.queue_.NextDeadline() <= now_ms_;
  }

  // Up to `limit` live collections named with `prefix`, after `after`.
  std::vector<CollectionInfo> ListLive(absl::string_view prefix, absl::string_view after,
                                       size_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    std::vector<CollectionInfo> out;
    std::string cursor(after);
    bool from_prefix = after < prefix;
    while (out.size() < limit) {
      auto it = from_prefix ? shard_.collections_.lower_bound(prefix)
                            : shard_.collections_.upper_bound(cursor);
      if (it == shard_.collections_.end() || !absl::StartsWith((*it)->name(), prefix)) break;
      cursor = std::string((*it)->name());
      from_prefix = false;
      if (Collection* c = FindLive(cursor); c != nullptr) out.push_back(InfoOf(*c));
    }
    return out;
  }

 private:
  ShardOp(Engine& engine, Shard& shard, absl::string_view name, absl::Time now, bool live)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(shard_.mu)
      : engine_(engine),
        shard_(shard),
        now_(now),
        now_ms_(FloorMillis(now)),
        live_(live),
        journaling_(live && engine.options_.journal != nullptr),
        name_(name) {
    if (journaling_) {
      journal_.emplace(&journal_buffers.batch);
      undo_.emplace(&journal_buffers.undo);
    }
    shard_.mu.Lock();
  }

  // The live collection named `name` after expiring its due members, or
  // nullptr when there is none.
  Collection* FindLive(absl::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    Collection* c = shard_.Find(name);
    if (c != nullptr && c->next_deadline_ms() <= now_ms_) {
      if (absl::Status s = Writable(); !s.ok()) {
        refused_ = absl::Status(
            s.code(), absl::StrFormat("collection \"%s\" has members past their deadline, which "
                                      "cannot expire while writes are refused: %s",
                                      name, s.message()));
        return nullptr;
      }
      Reap(c, std::numeric_limits<size_t>::max());
      return shard_.Find(name);
    }
    return c;
  }

  Collection* Create(absl::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    auto [it, inserted] = shard_.collections_.insert(Collection::Create(name));
    return it->get();
  }

  // Expires up to `limit` due members of `c`, then settles it. Returns how
  // many expired. `c` may be gone afterwards.
  size_t Reap(Collection* c, size_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    size_t n = 0;
    // What the events' blocks are sized for: the pass's batch, or all the
    // collection's expiring members when a lookup reaps it whole.
    const size_t expected =
        limit == std::numeric_limits<size_t>::max() ? c->expiring_count() : limit;
    c->EraseDue(now_ms_, limit,
                [&](const StoredMember& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
                  RecordExpiry(c, &m, c->DeadlineOf(m), expected - n);
                  ++n;
                });
    member_delta_ -= static_cast<int64_t>(n);
    Settle(c);
    return n;
  }

  void Expire(Collection* c, const StoredMember* m, int64_t deadline_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    RecordExpiry(c, m, deadline_ms, 1);
    Erase(c, m);
  }

  // Journals `m`'s expiry and makes its event when live; the member stays.
  // `expected_events`: how many events the caller expects to make from here
  // on, this one included (a hint, for EventBlock sizes).
  void RecordExpiry(Collection* c, const StoredMember* m, int64_t deadline_ms,
                    size_t expected_events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (journaling_) {
      journal_->Expiry(c->name(), m->key(), m->value(), deadline_ms, absl::ToUnixNanos(now_));
      undo_->Put(c->name(), m->key(), m->value(), c->DeadlineOf(*m));
    }
    if (live_) {
      AddEvent(events_,
               {.collection = c->name(),
                .key = m->key(),
                .value = m->value(),
                .expire_time = TimeOfDeadline(deadline_ms),
                .expired_at = now_},
               expected_events);
    }
  }

  // Where a member leaves its collection, removed or expired.
  void Erase(Collection* c, const StoredMember* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    c->Erase(m);
    --member_delta_;
  }

  // Brings the deadline queue up to date after `c` changed; forgets `c` when
  // it has no member left.
  void Settle(Collection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    const int64_t want = c->empty() ? kNoDeadlineMs : c->next_deadline_ms();
    const int64_t queued = c->queued_deadline_ms();
    if (want != queued) {
      const int64_t earliest_before = shard_.queue_.NextDeadline();
      if (queued != kNoDeadlineMs) shard_.queue_.Remove(queued, c);
      if (want != kNoDeadlineMs) shard_.queue_.Add(want, c);
      c->set_queued_deadline_ms(want);
      const auto& listener = engine_.options_.earlier_deadline_listener;
      if (want < earliest_before && listener) listener(TimeOfDeadline(want));
    }
    if (c->empty()) {
      Forget(c);
      if (c == c_) c_ = nullptr;
    }
  }

  // Removes `c` from the shard; its members are already counted out.
  void Forget(Collection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (c->queued_deadline_ms() != kNoDeadlineMs) {
      shard_.queue_.Remove(c->queued_deadline_ms(), c);
    }
    // Erase by iterator: the name the lookup needs belongs to `c`.
    shard_.collections_.erase(shard_.collections_.find(c->name()));
  }

  // Settles the operation's collection, adjusts the member count, appends
  // the operation's events to the log and commits its batch. The count comes
  // first: whoever sees an event sees the member gone from the count.
  void Finish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard_.mu) {
    if (c_ != nullptr && changed_) Settle(c_);
    if (member_delta_ != 0) {
      engine_.total_members_.fetch_add(static_cast<uint64_t>(member_delta_),
                                       std::memory_order_relaxed);
    }
    const bool committing = journaling_ && !journal_->empty();
    auto commit = [&](uint64_t first_sequence, uint64_t last_sequence) {
      if (!committing) return;
      const CommitTicket ticket = engine_.options_.journal->Commit(journal_->Finish(first_sequence),
                                                                   undo_->Finish(0), last_sequence);
      if (committed_ != nullptr) *committed_ = ticket;
    };
    if (events_.empty()) {
      commit(0, 0);
    } else {
      // Committed under the feed's lock: batches reach the journal in the
      // order of their events' sequences, which is what lets a durable
      // batch make every earlier event visible (EventFeed::Append).
      engine_.log_->Append(std::move(events_), commit, notify_);
    }
    if (journaling_) {
      TrimJournalBuffer(&journal_buffers.batch);
      TrimJournalBuffer(&journal_buffers.undo);
    }
  }

  // First: checks before the lock is taken, and is done after it is released.
  OneShardLockPerThread one_lock_;

  // Constant after construction.
  Engine& engine_;
  Shard& shard_;
  const absl::Time now_;
  const int64_t now_ms_;
  // Expiries become events; changes are journaled when journaling_.
  const bool live_;
  const bool journaling_;
  // The operation's collection's name; empty on a whole shard.
  const absl::string_view name_;

  // State below is protected by shard_.mu, held throughout.
  // The operation's collection.
  Collection* c_ = nullptr;
  // Whether c_ changed since it was found.
  bool changed_ = false;
  // The expiries' events, in blocks of consecutive events.
  std::vector<EventBlock> events_;
  // The batch and its undo, in the thread's journal_buffers, exist only
  // while journaling_: an encoder's construction and destruction were some
  // 5 % of a put's instructions without a journal.
  std::optional<BatchEncoder> journal_;
  // What puts back the changes recorded in journal_, in the same order.
  std::optional<BatchEncoder> undo_;
  // Where the committed batch's ticket goes; may be null.
  CommitTicket* committed_ = nullptr;
  // Whether appending the events tells the feed's readers.
  EventFeed::Notify notify_ = EventFeed::Notify::kNow;
  // The journal's status, once asked (see Writable()).
  bool journal_checked_ = false;
  absl::Status journal_status_;
  // See status().
  absl::Status refused_;
  // Members added less members gone, not yet in engine_.total_members_
  // (members reserved by ReserveMembers are in it already).
  int64_t member_delta_ = 0;
};

// ---- Engine ------------------------------------------------------------------

Engine::Engine(const Options& options, Clock* clock, EventFeed* log)
    : options_(options), clock_(clock), log_(log) {
  const size_t n = std::max<size_t>(1, options_.shards);
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>());
}

Engine::~Engine() = default;

uint64_t Engine::total_members() const { return total_members_.load(std::memory_order_relaxed); }

absl::Status Engine::Writable() const {
  return options_.journal == nullptr ? absl::OkStatus() : options_.journal->status();
}

absl::Status Engine::CheckKeyedRequest(absl::string_view collection,
                                       absl::Span<const absl::string_view> keys) const {
  if (absl::Status s = ValidateName("collection", collection, options_.limits); !s.ok()) {
    return s;
  }
  return ValidateKeys(keys, options_.limits);
}

size_t Engine::ShardIndex(absl::string_view collection) const {
  // From the hash's high bits (hash * shards / 2^64), with no division.
  static_assert(sizeof(size_t) == sizeof(uint64_t), "the shard is taken from a 64-bit hash");
  const size_t hash = absl::Hash<absl::string_view>{}(collection);
  return static_cast<size_t>(absl::Uint128High64(absl::uint128(hash) * shards_.size()));
}

Engine::Shard& Engine::ShardFor(absl::string_view collection) const {
  return *shards_[ShardIndex(collection)];
}

absl::StatusOr<std::vector<PutResult>> Engine::Put(absl::string_view collection,
                                                   absl::Span<const MemberWrite> writes,
                                                   const PutOptions& options,
                                                   CommitTicket* committed) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidateKeyList(
          "members", writes.size(), [&](size_t i) { return writes[i].key; }, ".key", limits);
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  absl::StatusOr<int64_t> default_deadline =
      DeadlineOf(options.default_expiration, "default_", now, PastDeadline::kRejected, limits);
  if (!default_deadline.ok()) return default_deadline.status();
  absl::InlinedVector<int64_t, 4> deadlines(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    const MemberWrite& w = writes[i];
    absl::StatusOr<int64_t> d =
        ValidateMemberWrite(i, w.value, w.expiration, w.keep_expiration, now, limits);
    if (!d.ok()) return d.status();
    const bool takes_default = w.expiration.kind == Expiration::Kind::kNone && !w.keep_expiration;
    deadlines[i] = takes_default ? *default_deadline : *d;
  }

  ShardOp op(*this, collection, now, committed);
  if (absl::Status s = op.Writable(); !s.ok()) return s;
  std::vector<PutResult> results(writes.size());
  // Plan first so a failing request writes nothing. The plan keeps no member
  // pointers, as a write may move the collection's other members: keys are
  // unique, so what it read of each member still holds when that member is
  // written.
  size_t creates = 0;
  // A lone write keeps where its key is: nothing changes the collection
  // before it is written, so the write need not search again.
  Collection::Place place;
  for (size_t i = 0; i < writes.size(); ++i) {
    place = op.Locate(writes[i].key);
    const StoredMember* m = place.member;
    const int64_t current = m == nullptr ? kNoDeadlineMs : op.collection()->DeadlineOf(*m);
    if (writes[i].keep_expiration) deadlines[i] = current;
    const PutCondition cond = writes[i].condition;
    if ((cond == PutCondition::kIfAbsent && m != nullptr) ||
        (cond == PutCondition::kIfPresent && m == nullptr)) {
      results[i] = {PutOutcome::kSkipped, TimeOfDeadline(current)};
    } else {
      results[i].outcome = m == nullptr ? PutOutcome::kCreated : PutOutcome::kReplaced;
      if (m == nullptr) ++creates;
    }
  }
  const size_t size_after = (op.collection() == nullptr ? 0 : op.collection()->size()) + creates;
  if (options.max_members != 0 && size_after > options.max_members) {
    return absl::FailedPreconditionError(
        absl::StrFormat("collection \"%s\" would hold %d members; max_members is %d", collection,
                        size_after, options.max_members));
  }
  if (creates > 0 && !op.ReserveMembers(creates, limits.max_total_members)) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the server holds its maximum of %d members", limits.max_total_members));
  }
  if (options_.put_checked_hook_for_testing) options_.put_checked_hook_for_testing();
  if (writes.size() > 1) {
    // A kPut record per write, and a kRemove (created) or kPut (replaced,
    // the value it had) undoing it; the replaced values are not counted.
    const size_t name_bytes = 1 + LengthPrefixedLength(collection);
    size_t batch_bytes = 0;
    size_t undo_bytes = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      if (results[i].outcome == PutOutcome::kSkipped) continue;
      const size_t key_bytes = name_bytes + LengthPrefixedLength(writes[i].key);
      batch_bytes += key_bytes + LengthPrefixedLength(writes[i].value) + 8;
      undo_bytes += key_bytes;
    }
    op.ReserveJournal(batch_bytes, undo_bytes);
  }
  for (size_t i = 0; i < writes.size(); ++i) {
    if (results[i].outcome == PutOutcome::kSkipped) continue;
    const MemberWrite& w = writes[i];
    op.PutMember(w.key, w.value, deadlines[i], writes.size() == 1 ? &place : nullptr);
    results[i].expire_time = TimeOfDeadline(deadlines[i]);
  }
  return results;
}

absl::StatusOr<std::vector<GetResult>> Engine::Get(absl::string_view collection,
                                                   absl::Span<const absl::string_view> keys,
                                                   const Expiration& refresh,
                                                   CommitTicket* committed) {
  if (absl::Status s = CheckKeyedRequest(collection, keys); !s.ok()) return s;
  const absl::Time now = clock_->Now();
  absl::StatusOr<int64_t> refresh_ms =
      DeadlineOf(refresh, "refresh_", now, PastDeadline::kRejected, options_.limits);
  if (!refresh_ms.ok()) return refresh_ms.status();
  const bool refreshing = refresh.kind != Expiration::Kind::kNone;

  ShardOp op(*this, collection, now, committed);
  if (absl::Status s = refreshing ? op.Writable() : op.status(); !s.ok()) return s;
  // Sized before anything is copied or refreshed: an answer too big to send
  // fails whole, writing nothing.
  absl::InlinedVector<const StoredMember*, 4> found(keys.size(), nullptr);
  size_t found_count = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const StoredMember* m = op.Find(keys[i]);
    found[i] = m;
    bytes += keys[i].size() + kResponseEntryOverhead;
    if (m == nullptr) continue;
    ++found_count;
    bytes += m->value().size();
  }
  if (bytes > options_.limits.max_response_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the answer to these %d keys (%d found) would take %d bytes, more than the %d one "
        "response may hold; get fewer keys per request",
        keys.size(), found_count, bytes, options_.limits.max_response_bytes));
  }
  std::vector<GetResult> results(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const StoredMember* m = found[i];
    if (m == nullptr) continue;
    // A refresh may move the members (Collection::SetDeadline): each is found
    // again before its own.
    if (refreshing) m = op.SetDeadline(op.Find(keys[i]), *refresh_ms);
    results[i] = {true, std::string(m->value()), TimeOfDeadline(op.collection()->DeadlineOf(*m))};
  }
  return results;
}

absl::StatusOr<std::vector<bool>> Engine::Remove(absl::string_view collection,
                                                 absl::Span<const absl::string_view> keys,
                                                 CommitTicket* committed) {
  if (absl::Status s = CheckKeyedRequest(collection, keys); !s.ok()) return s;

  ShardOp op(*this, collection, clock_->Now(), committed);
  if (absl::Status s = op.Writable(); !s.ok()) return s;
  std::vector<bool> existed(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    const StoredMember* m = op.Find(keys[i]);
    if (m == nullptr) continue;
    op.RemoveMember(m);
    existed[i] = true;
  }
  return existed;
}

absl::StatusOr<std::vector<ExpireResult>> Engine::Expire(absl::string_view collection,
                                                         absl::Span<const absl::string_view> keys,
                                                         const Expiration& expiration,
                                                         ExpireCondition condition,
                                                         CommitTicket* committed) {
  if (absl::Status s = CheckKeyedRequest(collection, keys); !s.ok()) return s;
  if (expiration.kind == Expiration::Kind::kNone) {
    return InvalidField("expiration", "one of ttl or expire_time is required");
  }
  const absl::Time now = clock_->Now();
  absl::StatusOr<int64_t> deadline =
      DeadlineOf(expiration, "", now, PastDeadline::kAllowed, options_.limits);
  if (!deadline.ok()) return deadline.status();
  const int64_t d = *deadline;

  ShardOp op(*this, collection, now, committed);
  if (absl::Status s = op.Writable(); !s.ok()) return s;
  std::vector<ExpireResult> results(keys.size(), {ExpireOutcome::kNotFound, NoDeadline()});
  for (size_t i = 0; i < keys.size(); ++i) {
    const StoredMember* m = op.Find(keys[i]);
    if (m == nullptr) continue;
    // A persistent member counts as expiring infinitely late.
    const int64_t current = op.collection()->DeadlineOf(*m);
    bool met = true;
    switch (condition) {
      case ExpireCondition::kAlways:
        break;
      case ExpireCondition::kIfNoExpiration:
        met = current == kNoDeadlineMs;
        break;
      case ExpireCondition::kIfHasExpiration:
        met = current != kNoDeadlineMs;
        break;
      case ExpireCondition::kIfLater:
        met = d > current;
        break;
      case ExpireCondition::kIfEarlier:
        met = d < current;
        break;
    }
    if (!met) {
      results[i] = {ExpireOutcome::kConditionNotMet, TimeOfDeadline(current)};
    } else if (d <= op.now_ms()) {
      op.ExpireMember(m, d);
      results[i] = {ExpireOutcome::kExpired, NoDeadline()};
    } else {
      op.SetDeadline(m, d);
      results[i] = {ExpireOutcome::kUpdated, TimeOfDeadline(d)};
    }
  }
  return results;
}

absl::StatusOr<std::vector<PersistOutcome>> Engine::Persist(
    absl::string_view collection, absl::Span<const absl::string_view> keys,
    CommitTicket* committed) {
  if (absl::Status s = CheckKeyedRequest(collection, keys); !s.ok()) return s;

  ShardOp op(*this, collection, clock_->Now(), committed);
  if (absl::Status s = op.Writable(); !s.ok()) return s;
  std::vector<PersistOutcome> results(keys.size(), PersistOutcome::kNotFound);
  for (size_t i = 0; i < keys.size(); ++i) {
    const StoredMember* m = op.Find(keys[i]);
    if (m == nullptr) continue;
    if (!m->has_deadline()) {
      results[i] = PersistOutcome::kNoExpiration;
      continue;
    }
    op.SetDeadline(m, kNoDeadlineMs);
    results[i] = PersistOutcome::kPersisted;
  }
  return results;
}

absl::StatusOr<MemberPage> Engine::ListMembers(absl::string_view collection,
                                               const ListMembersOptions& options) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidatePageSize(options.page_size); !s.ok()) return s;
  const size_t limit = EffectivePageSize(options.page_size, limits);

  ShardOp op(*this, collection, clock_->Now());
  if (absl::Status s = op.status(); !s.ok()) return s;
  MemberPage page;
  const Collection* c = op.collection();
  if (c == nullptr) return page;
  bool more = false;
  std::vector<const StoredMember*> members;
  if (options.order == MemberOrder::kKey) {
    absl::string_view after_key;
    if (options.after.has_value()) after_key = options.after->key;
    members = c->PageByKey(options.after.has_value() ? &after_key : nullptr, limit, &more);
  } else {
    DeadlinePosition after{};
    if (options.after.has_value()) {
      after.deadline_ms = options.after->expire_time == NoDeadline()
                              ? kNoDeadlineMs
                              : FloorMillis(options.after->expire_time);
      after.key = options.after->key;
    }
    members = c->PageByDeadline(options.after.has_value() ? &after : nullptr, limit, &more);
  }
  // The page ends early, before the member that would not fit in one response.
  PageBytes bytes(limits.max_response_bytes);
  size_t fit = 0;
  while (fit < members.size() &&
         bytes.Take(members[fit]->key().size() +
                    (options.keys_only ? 0 : members[fit]->value().size()))) {
    ++fit;
  }
  more = more || fit < members.size();
  page.members.reserve(fit);
  for (size_t i = 0; i < fit; ++i) {
    const StoredMember* m = members[i];
    page.members.push_back({std::string(m->key()),
                            options.keys_only ? std::string() : std::string(m->value()),
                            TimeOfDeadline(c->DeadlineOf(*m))});
  }
  if (more && !members.empty()) {
    page.next = MemberCursor{page.members.back().expire_time, page.members.back().key};
  }
  return page;
}

absl::StatusOr<CollectionInfo> Engine::GetCollection(absl::string_view name) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  ShardOp op(*this, name, clock_->Now());
  if (absl::Status s = op.status(); !s.ok()) return s;
  if (op.collection() == nullptr) {
    return absl::NotFoundError(absl::StrFormat("collection \"%s\" not found", name));
  }
  return InfoOf(*op.collection());
}

absl::StatusOr<CollectionPage> Engine::ListCollections(absl::string_view prefix, int page_size,
                                                       absl::string_view after) {
  const Limits& limits = options_.limits;
  if (!prefix.empty()) {
    if (absl::Status s = ValidateName("prefix", prefix, limits); !s.ok()) return s;
  }
  if (absl::Status s = ValidatePageSize(page_size); !s.ok()) return s;
  const size_t limit = EffectivePageSize(page_size, limits);

  // Each shard yields its first limit + 1 live names; the page is the first
  // `limit` of their union.
  std::vector<CollectionInfo> candidates;
  const absl::Time now = clock_->Now();
  for (const auto& shard : shards_) {
    ShardOp op(*this, *shard, now);
    std::vector<CollectionInfo> part = op.ListLive(prefix, after, limit + 1);
    if (absl::Status s = op.status(); !s.ok()) return s;
    std::move(part.begin(), part.end(), std::back_inserter(candidates));
  }
  return CollectionPageOf(std::move(candidates), limit, limits.max_response_bytes);
}

absl::StatusOr<uint64_t> Engine::DeleteCollection(absl::string_view name, CommitTicket* committed) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  // Members already past their deadline expire (with events) first: they
  // were gone before the delete.
  ShardOp op(*this, name, clock_->Now(), committed);
  if (absl::Status s = op.Writable(); !s.ok()) return s;
  return op.collection() == nullptr ? 0 : op.DropCollection();
}

size_t Engine::ExpireDue() {
  const absl::Time now = clock_->Now();
  size_t expired = 0;
  // Readers are told once per expire_batch events, and once at the end, never
  // under a shard lock: each time a reader is woken, it may take the CPU from
  // this thread, and the rest of the pass (other shards' due members) would
  // wait for it. Spread deadlines make a pass of a few events every
  // millisecond; a backlog still reaches readers while it drains.
  size_t untold = 0;
  for (const auto& shard : shards_) {
    bool more = true;
    while (more) {
      size_t n;
      {
        ShardOp op(*this, *shard, now, EventFeed::Notify::kLater);
        n = op.ReapFront(options_.expire_batch);
        more = op.status().ok() && op.HasDue();
      }
      expired += n;
      untold += n;
      if (untold >= options_.expire_batch) {
        log_->NotifyReadable();
        untold = 0;
      }
    }
  }
  if (untold > 0) log_->NotifyReadable();
  return expired;
}

void Engine::Apply(const JournalRecord& r) {
  if (r.type == RecordType::kEvent || r.type == RecordType::kNextSequence ||
      IsGroupRecord(r.type)) {
    return;
  }
  ShardOp op(*this, r.collection, ShardOp::kReplay);
  if (r.type == RecordType::kPut) {
    op.PutMember(r.key, r.value, r.deadline_ms);
    return;
  }
  const StoredMember* m = op.Find(r.key);
  switch (r.type) {
    case RecordType::kSetDeadline:
      if (m != nullptr) op.SetDeadline(m, r.deadline_ms);
      break;
    case RecordType::kRemove:
      if (m != nullptr) op.RemoveMember(m);
      break;
    case RecordType::kExpiry:
      if (m != nullptr) op.ExpireMember(m, r.deadline_ms);
      break;
    case RecordType::kDeleteCollection:
      if (op.collection() != nullptr) op.DropCollection();
      break;
    default:  // Not the engine's (above).
      break;
  }
}

void Engine::RollBack(const std::function<std::vector<std::string>()>& refuse)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<std::string> undos;
  {
    OneShardLockPerThread one_lock;
    for (const auto& shard : shards_) shard->mu.Lock();
    undos = refuse();
    log_->DropInvisible();
    for (auto it = shards_.rbegin(); it != shards_.rend(); ++it) (*it)->mu.Unlock();
  }
  // Nothing else changes state meanwhile: operations see the journal refuse
  // changes, so they change nothing.
  std::vector<JournalRecord> records;
  for (const std::string& undo : undos) {
    records.clear();
    [[maybe_unused]] const absl::Status decoded = DecodeBatch(undo, [&](const JournalRecord& r) {
      records.push_back(r);
      return absl::OkStatus();
    });
    assert(decoded.ok() && "an undo batch of the engine's own does not decode");
    for (auto it = records.rbegin(); it != records.rend(); ++it) Apply(*it);
  }
}

bool Engine::Scan(ScanCursor* cursor, size_t max_members, const ScanFn& fn) {
  while (cursor->shard < shards_.size()) {
    Shard& shard = *shards_[cursor->shard];
    size_t n;
    {
      OneShardLockPerThread one_lock;
      MutexLock lock(&shard.mu);
      n = shard.Scan(cursor, max_members, fn);
    }
    if (n == max_members) return true;
    ++cursor->shard;
    cursor->started = false;
    cursor->collection.clear();
    cursor->key.clear();
    if (n > 0) return true;
  }
  return false;
}

Engine::Counts Engine::CountCollections() const {
  Counts counts;
  for (const auto& shard : shards_) {
    OneShardLockPerThread one_lock;
    MutexLock lock(&shard->mu);
    shard->AddCounts(&counts);
  }
  return counts;
}

absl::Time Engine::NextDeadline() const {
  int64_t earliest = kNoDeadlineMs;
  for (const auto& shard : shards_) {
    OneShardLockPerThread one_lock;
    MutexLock lock(&shard->mu);
    earliest = std::min(earliest, shard->NextDeadline());
  }
  return TimeOfDeadline(earliest);
}

}  // namespace lapse

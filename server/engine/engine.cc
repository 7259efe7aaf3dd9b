#include "server/engine/engine.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/engine/collection.h"
#include "server/engine/deadline_queue.h"
#include "server/engine/validate.h"

namespace lapse {
namespace {

// What one operation accumulates under its shard lock.
struct Op {
  explicit Op(absl::Time t) : now(t), now_ms(FloorMillis(t)) {}
  const absl::Time now;
  // A deadline d has passed iff d <= now_ms (deadlines are whole ms).
  const int64_t now_ms;
  std::vector<ExpiryEvent> events;
  // The operation's changes, when the engine has a journal.
  BatchEncoder journal;
};

}  // namespace

// ---- Shard -------------------------------------------------------------------

class Engine::Shard {
  struct NameHash {
    using is_transparent = void;
    size_t operator()(absl::string_view name) const { return absl::Hash<absl::string_view>{}(name); }
    size_t operator()(const std::unique_ptr<Collection>& c) const { return (*this)(c->name()); }
  };
  struct NameEq {
    using is_transparent = void;
    static absl::string_view NameOf(absl::string_view name) { return name; }
    static absl::string_view NameOf(const std::unique_ptr<Collection>& c) { return c->name(); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NameOf(a) == NameOf(b);
    }
  };

 public:
  Shard(EventLog* log, Journal* journal,
        const std::function<void(absl::Time)>* earlier_deadline_listener,
        std::atomic<uint64_t>* total_members)
      : log_(log),
        journal_(journal),
        earlier_deadline_listener_(earlier_deadline_listener),
        total_members_(total_members) {}

  bool journaling() const { return journal_ != nullptr; }
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  Mutex mu;

  // The live collection named `name` after expiring its due members, or
  // nullptr when there is none.
  Collection* FindLive(absl::string_view name, Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = collections_.find(name);
    if (it == collections_.end()) return nullptr;
    Collection* c = it->get();
    if (c->next_deadline_ms() <= op.now_ms) {
      Reap(c, op, std::numeric_limits<size_t>::max());
      return collections_.contains(name) ? c : nullptr;
    }
    return c;
  }

  // The collection named `name` as it is, due members included.
  Collection* FindRaw(absl::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = collections_.find(name);
    return it == collections_.end() ? nullptr : it->get();
  }

  Collection* Create(absl::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto [it, inserted] = collections_.insert(std::make_unique<Collection>(std::string(name)));
    names_.insert((*it)->name());
    return it->get();
  }

  // Expires up to `limit` due members of `c`, then settles it. Returns how
  // many expired. `c` may be gone afterwards.
  size_t Reap(Collection* c, Op& op, size_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return ReapUntil(c, op, limit, op.now_ms);
  }

  // Like Reap, but only members due at or before `until_ms` (<= now).
  size_t ReapUntil(Collection* c, Op& op, size_t limit, int64_t until_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    size_t n = 0;
    if (limit != std::numeric_limits<size_t>::max()) {
      op.events.reserve(op.events.size() + std::min(limit, c->expiring_count()));
    }
    while (n < limit) {
      const Member* m = c->EarliestExpiring();
      if (m == nullptr || m->deadline_ms() > until_ms) break;
      EmitExpiry(*c, *m, m->deadline_ms(), op);
      c->Erase(m);
      ++n;
    }
    total_members_->fetch_sub(n, std::memory_order_relaxed);
    Settle(c);
    return n;
  }

  void EmitExpiry(const Collection& c, const Member& m, int64_t deadline_ms, Op& op) {
    if (journaling()) {
      op.journal.Expiry(c.name(), m.key(), m.value(), deadline_ms, absl::ToUnixNanos(op.now));
    }
    ExpiryEvent& e = op.events.emplace_back();
    e.collection = c.name();
    e.key = std::string(m.key());
    e.value = std::string(m.value());
    e.expire_time = TimeOfDeadline(deadline_ms);
    e.expired_at = op.now;
  }

  // Brings the deadline queue up to date after `c` changed; drops `c` when it
  // has no member left.
  void Settle(Collection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int64_t want = c->empty() ? kNoDeadlineMs : c->next_deadline_ms();
    const int64_t queued = c->queued_deadline_ms();
    if (want != queued) {
      const int64_t earliest_before = queue_.NextDeadline();
      if (queued != kNoDeadlineMs) queue_.Remove(queued, c);
      if (want != kNoDeadlineMs) queue_.Add(want, c);
      c->set_queued_deadline_ms(want);
      if (want < earliest_before && *earlier_deadline_listener_) {
        (*earlier_deadline_listener_)(TimeOfDeadline(want));
      }
    }
    if (c->empty()) Drop(c);
  }

  // Removes `c` and all its members without events.
  void Drop(Collection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (c->queued_deadline_ms() != kNoDeadlineMs) queue_.Remove(c->queued_deadline_ms(), c);
    total_members_->fetch_sub(c->size(), std::memory_order_relaxed);
    names_.erase(c->name());
    // Erase by iterator: the name the lookup needs belongs to `c`.
    collections_.erase(collections_.find(c->name()));
  }

  // Expires due members of the collections at the front of the queue, up to
  // `limit`. Returns how many expired.
  size_t ReapFront(Op& op, size_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    size_t n = 0;
    while (n < limit && queue_.NextDeadline() <= op.now_ms) {
      // A due collection is drained whole: a backlog expires collection by
      // collection, in order of their earliest deadlines, each collection's
      // members in deadline order. Interleaving collections member by member
      // would cost a queue move per member and halve the drain rate.
      n += Reap(queue_.Front(), op, limit - n);
    }
    return n;
  }

  bool HasDue(int64_t now_ms) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return queue_.NextDeadline() <= now_ms;
  }
  int64_t NextDeadline() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return queue_.NextDeadline();
  }

  // Up to `limit` live collections named with `prefix`, after `after`.
  std::vector<CollectionInfo> ListLive(absl::string_view prefix, absl::string_view after,
                                       size_t limit, Op& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<CollectionInfo> out;
    std::string cursor(after);
    bool from_prefix = after < prefix;
    while (out.size() < limit) {
      auto it = from_prefix ? names_.lower_bound(prefix) : names_.upper_bound(cursor);
      if (it == names_.end() || !absl::StartsWith(*it, prefix)) break;
      cursor = std::string(*it);
      from_prefix = false;
      if (Collection* c = FindLive(cursor, op); c != nullptr) out.push_back(InfoOf(*c));
    }
    return out;
  }

  static CollectionInfo InfoOf(const Collection& c) {
    return {c.name(), c.size(), c.expiring_count(), TimeOfDeadline(c.next_deadline_ms())};
  }

  // Appends what the operation expired to the event log. Called before the
  // lock is released so events of one collection are logged in the order they
  // happened.
  void Publish(Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    uint64_t first_sequence = 0;
    uint64_t last_sequence = 0;
    if (!op.events.empty()) {
      const size_t n = op.events.size();
      last_sequence = log_->Append(std::move(op.events));
      first_sequence = last_sequence - n + 1;
      op.events.clear();
    }
    if (journaling() && !op.journal.empty()) {
      journal_->Commit(op.journal.Finish(first_sequence), last_sequence);
    }
  }

  // Visits up to `max` members after `cursor` in this shard, calling `fn`
  // under the lock. Returns how many.
  size_t Scan(Engine::ScanCursor* cursor, size_t max, const Engine::ScanFn& fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    size_t n = 0;
    while (n < max) {
      // cursor->key is the last member visited in cursor->collection, or
      // empty once that collection is done.
      auto it = names_.begin();
      bool resume = false;
      if (cursor->started && !cursor->key.empty()) {
        it = names_.lower_bound(cursor->collection);
        resume = it != names_.end() && *it == cursor->collection;
      } else if (cursor->started) {
        it = names_.upper_bound(cursor->collection);
      }
      if (it == names_.end()) return n;
      const Collection* c = FindRaw(*it);
      const absl::string_view after = cursor->key;
      bool more = false;
      std::vector<const Member*> page = c->PageByKey(resume ? &after : nullptr, max - n, &more);
      for (const Member* m : page) fn(c->name(), m->key(), m->value(), m->deadline_ms());
      n += page.size();
      cursor->started = true;
      cursor->collection = c->name();
      cursor->key = more ? std::string(page.back()->key()) : std::string();
    }
    return n;
  }

 private:
  // Constant after construction.
  EventLog* const log_;
  Journal* const journal_;
  const std::function<void(absl::Time)>* const earlier_deadline_listener_;
  std::atomic<uint64_t>* const total_members_;

  // State below is protected by mu.
  // Keyed by the collection's own name, so the name is stored once.
  absl::flat_hash_set<std::unique_ptr<Collection>, NameHash, NameEq> collections_
      ABSL_GUARDED_BY(mu);
  // Views of the names of collections_, for ordered listing.
  absl::btree_set<absl::string_view> names_ ABSL_GUARDED_BY(mu);
  DeadlineQueue<Collection> queue_ ABSL_GUARDED_BY(mu);
};

// ---- Engine ------------------------------------------------------------------

Engine::Engine(const Options& options, Clock* clock, EventLog* log)
    : options_(options), clock_(clock), log_(log) {
  const size_t n = std::max<size_t>(1, options_.shards);
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    shards_.push_back(std::make_unique<Shard>(log_, options_.journal,
                                              &earlier_deadline_listener_, &total_members_));
  }
}

Engine::~Engine() = default;

void Engine::SetEarlierDeadlineListener(std::function<void(absl::Time)> listener) {
  earlier_deadline_listener_ = std::move(listener);
}

uint64_t Engine::total_members() const {
  return total_members_.load(std::memory_order_relaxed);
}

absl::Status Engine::Writable() const {
  return options_.journal == nullptr ? absl::OkStatus() : options_.journal->status();
}

Engine::Shard& Engine::ShardFor(absl::string_view collection) const {
  return *shards_[absl::Hash<absl::string_view>{}(collection) % shards_.size()];
}

absl::StatusOr<std::vector<PutResult>> Engine::Put(absl::string_view collection,
                                                   absl::Span<const MemberWrite> writes,
                                                   const PutOptions& options) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (absl::Status s = ValidateKeyList(
          "members", writes.size(), [&](size_t i) { return writes[i].key; }, ".key", limits);
      !s.ok()) {
    return s;
  }
  const absl::Time now = clock_->Now();
  absl::InlinedVector<int64_t, 4> deadlines(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    const MemberWrite& w = writes[i];
    absl::StatusOr<int64_t> d =
        ValidateMemberWrite(i, w.value, w.expiration, w.keep_expiration, now, limits);
    if (!d.ok()) return d.status();
    deadlines[i] = *d;
  }

  Shard& shard = ShardFor(collection);
  Op op(now);
  std::vector<PutResult> results(writes.size());
  absl::Status status;
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindLive(collection, op);
  // Plan first so a failing request writes nothing. Member pointers stay
  // valid while applying: keys are unique, and applying one write touches
  // only its own member.
  absl::InlinedVector<const Member*, 4> existing(writes.size(), nullptr);
  size_t creates = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    const Member* m = c == nullptr ? nullptr : c->Find(writes[i].key);
    existing[i] = m;
    const PutCondition cond = writes[i].condition;
    if ((cond == PutCondition::kIfAbsent && m != nullptr) ||
        (cond == PutCondition::kIfPresent && m == nullptr)) {
      results[i] = {PutOutcome::kSkipped,
                    m == nullptr ? NoDeadline() : TimeOfDeadline(m->deadline_ms())};
    } else {
      results[i].outcome = m == nullptr ? PutOutcome::kCreated : PutOutcome::kReplaced;
      if (m == nullptr) ++creates;
    }
  }
  const size_t size_after = (c == nullptr ? 0 : c->size()) + creates;
  if (options.max_members != 0 && size_after > options.max_members) {
    status = absl::FailedPreconditionError(
        absl::StrFormat("collection \"%s\" would hold %d members; max_members is %d",
                        collection, size_after, options.max_members));
  } else if (creates > 0 && total_members_.load(std::memory_order_relaxed) + creates >
                                limits.max_total_members) {
    status = absl::ResourceExhaustedError(absl::StrFormat(
        "the server holds its maximum of %d members", limits.max_total_members));
  } else {
    for (size_t i = 0; i < writes.size(); ++i) {
      if (results[i].outcome == PutOutcome::kSkipped) continue;
      const MemberWrite& w = writes[i];
      const Member* m = existing[i];
      const int64_t deadline =
          w.keep_expiration ? (m == nullptr ? kNoDeadlineMs : m->deadline_ms()) : deadlines[i];
      if (m != nullptr) {
        c->Replace(m, w.value, deadline);
      } else {
        if (c == nullptr) c = shard.Create(collection);
        c->Insert(w.key, w.value, deadline);
      }
      if (shard.journaling()) op.journal.Put(collection, w.key, w.value, deadline);
      results[i].expire_time = TimeOfDeadline(deadline);
    }
    total_members_.fetch_add(creates, std::memory_order_relaxed);
    if (c != nullptr) shard.Settle(c);
  }
  shard.Publish(op);
  if (!status.ok()) return status;
  return results;
}

absl::StatusOr<std::vector<GetResult>> Engine::Get(absl::string_view collection,
                                                   absl::Span<const absl::string_view> keys,
                                                   const Expiration& refresh) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidateKeys(keys, limits); !s.ok()) return s;
  const absl::Time now = clock_->Now();
  absl::StatusOr<int64_t> refresh_ms =
      DeadlineOf(refresh, "refresh_", now, PastDeadline::kRejected, limits);
  if (!refresh_ms.ok()) return refresh_ms.status();
  const bool refreshing = refresh.kind != Expiration::Kind::kNone;
  if (refreshing) {
    if (absl::Status s = Writable(); !s.ok()) return s;
  }

  Shard& shard = ShardFor(collection);
  Op op(now);
  std::vector<GetResult> results(keys.size());
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindLive(collection, op);
  if (c != nullptr) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const Member* m = c->Find(keys[i]);
      if (m == nullptr) continue;
      if (refreshing) {
        c->SetDeadline(m, *refresh_ms);
        if (shard.journaling()) op.journal.SetDeadline(collection, keys[i], *refresh_ms);
      }
      results[i] = {true, std::string(m->value()), TimeOfDeadline(m->deadline_ms())};
    }
    if (refreshing) shard.Settle(c);
  }
  shard.Publish(op);
  return results;
}

absl::StatusOr<std::vector<bool>> Engine::Remove(absl::string_view collection,
                                                 absl::Span<const absl::string_view> keys) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidateKeys(keys, limits); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;

  Shard& shard = ShardFor(collection);
  Op op(clock_->Now());
  std::vector<bool> existed(keys.size(), false);
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindLive(collection, op);
  if (c != nullptr) {
    size_t removed = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      const Member* m = c->Find(keys[i]);
      if (m == nullptr) continue;
      if (shard.journaling()) op.journal.Remove(collection, keys[i]);
      c->Erase(m);
      existed[i] = true;
      ++removed;
    }
    total_members_.fetch_sub(removed, std::memory_order_relaxed);
    shard.Settle(c);
  }
  shard.Publish(op);
  return existed;
}

absl::StatusOr<std::vector<ExpireResult>> Engine::Expire(
    absl::string_view collection, absl::Span<const absl::string_view> keys,
    const Expiration& expiration, ExpireCondition condition) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidateKeys(keys, limits); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (expiration.kind == Expiration::Kind::kNone) {
    return InvalidField("expiration", "one of ttl or expire_time is required");
  }
  const absl::Time now = clock_->Now();
  absl::StatusOr<int64_t> deadline =
      DeadlineOf(expiration, "", now, PastDeadline::kAllowed, limits);
  if (!deadline.ok()) return deadline.status();
  const int64_t d = *deadline;

  Shard& shard = ShardFor(collection);
  Op op(now);
  std::vector<ExpireResult> results(keys.size(), {ExpireOutcome::kNotFound, NoDeadline()});
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindLive(collection, op);
  if (c != nullptr) {
    size_t expired = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      const Member* m = c->Find(keys[i]);
      if (m == nullptr) continue;
      // A persistent member counts as expiring infinitely late.
      const int64_t current = m->deadline_ms();
      bool met = true;
      switch (condition) {
        case ExpireCondition::kAlways: break;
        case ExpireCondition::kIfNoExpiration: met = current == kNoDeadlineMs; break;
        case ExpireCondition::kIfHasExpiration: met = current != kNoDeadlineMs; break;
        case ExpireCondition::kIfLater: met = d > current; break;
        case ExpireCondition::kIfEarlier: met = d < current; break;
      }
      if (!met) {
        results[i] = {ExpireOutcome::kConditionNotMet, TimeOfDeadline(current)};
      } else if (d <= op.now_ms) {
        shard.EmitExpiry(*c, *m, d, op);
        c->Erase(m);
        ++expired;
        results[i] = {ExpireOutcome::kExpired, NoDeadline()};
      } else {
        c->SetDeadline(m, d);
        if (shard.journaling()) op.journal.SetDeadline(collection, keys[i], d);
        results[i] = {ExpireOutcome::kUpdated, TimeOfDeadline(d)};
      }
    }
    total_members_.fetch_sub(expired, std::memory_order_relaxed);
    shard.Settle(c);
  }
  shard.Publish(op);
  return results;
}

absl::StatusOr<std::vector<PersistOutcome>> Engine::Persist(
    absl::string_view collection, absl::Span<const absl::string_view> keys) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidateKeys(keys, limits); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;

  Shard& shard = ShardFor(collection);
  Op op(clock_->Now());
  std::vector<PersistOutcome> results(keys.size(), PersistOutcome::kNotFound);
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindLive(collection, op);
  if (c != nullptr) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const Member* m = c->Find(keys[i]);
      if (m == nullptr) continue;
      if (!m->has_deadline()) {
        results[i] = PersistOutcome::kNoExpiration;
        continue;
      }
      c->SetDeadline(m, kNoDeadlineMs);
      if (shard.journaling()) op.journal.SetDeadline(collection, keys[i], kNoDeadlineMs);
      results[i] = PersistOutcome::kPersisted;
    }
    shard.Settle(c);
  }
  shard.Publish(op);
  return results;
}

absl::StatusOr<MemberPage> Engine::ListMembers(absl::string_view collection,
                                               const ListMembersOptions& options) {
  const Limits& limits = options_.limits;
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  if (absl::Status s = ValidatePageSize(options.page_size); !s.ok()) return s;
  const size_t limit = EffectivePageSize(options.page_size, limits);

  Shard& shard = ShardFor(collection);
  Op op(clock_->Now());
  MemberPage page;
  MutexLock lock(&shard.mu);
  const Collection* c = shard.FindLive(collection, op);
  if (c != nullptr) {
    bool more = false;
    std::vector<const Member*> members;
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
    page.members.reserve(members.size());
    for (const Member* m : members) {
      page.members.push_back({std::string(m->key()),
                              options.keys_only ? std::string() : std::string(m->value()),
                              TimeOfDeadline(m->deadline_ms())});
    }
    if (more && !members.empty()) {
      page.next = MemberCursor{page.members.back().expire_time, page.members.back().key};
    }
  }
  shard.Publish(op);
  return page;
}

absl::StatusOr<CollectionInfo> Engine::GetCollection(absl::string_view name) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  Shard& shard = ShardFor(name);
  Op op(clock_->Now());
  MutexLock lock(&shard.mu);
  const Collection* c = shard.FindLive(name, op);
  std::optional<CollectionInfo> info;
  if (c != nullptr) info = Shard::InfoOf(*c);
  shard.Publish(op);
  if (!info.has_value()) {
    return absl::NotFoundError(absl::StrFormat("collection \"%s\" not found", name));
  }
  return *std::move(info);
}

absl::StatusOr<CollectionPage> Engine::ListCollections(absl::string_view prefix,
                                                       int page_size,
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
    Op op(now);
    MutexLock lock(&shard->mu);
    std::vector<CollectionInfo> part = shard->ListLive(prefix, after, limit + 1, op);
    shard->Publish(op);
    std::move(part.begin(), part.end(), std::back_inserter(candidates));
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const CollectionInfo& a, const CollectionInfo& b) { return a.name < b.name; });
  CollectionPage page;
  if (candidates.size() > limit) {
    candidates.resize(limit);
    page.next_after = candidates.back().name;
  }
  page.collections = std::move(candidates);
  return page;
}

absl::StatusOr<uint64_t> Engine::DeleteCollection(absl::string_view name) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  if (absl::Status s = Writable(); !s.ok()) return s;
  Shard& shard = ShardFor(name);
  Op op(clock_->Now());
  MutexLock lock(&shard.mu);
  // Members already past their deadline expire (with events) first: they
  // were gone before the delete.
  Collection* c = shard.FindLive(name, op);
  uint64_t removed = 0;
  if (c != nullptr) {
    removed = c->size();
    if (shard.journaling()) op.journal.DeleteCollection(name);
    shard.Drop(c);
  }
  shard.Publish(op);
  return removed;
}

size_t Engine::ExpireDue() {
  const absl::Time now = clock_->Now();
  size_t expired = 0;
  for (const auto& shard : shards_) {
    bool more = true;
    while (more) {
      Op op(now);
      MutexLock lock(&shard->mu);
      expired += shard->ReapFront(op, options_.expire_batch);
      more = shard->HasDue(op.now_ms);
      shard->Publish(op);
    }
  }
  return expired;
}

void Engine::Apply(const JournalRecord& r) {
  Shard& shard = ShardFor(r.collection);
  MutexLock lock(&shard.mu);
  Collection* c = shard.FindRaw(r.collection);
  switch (r.type) {
    case RecordType::kPut:
      if (c == nullptr) c = shard.Create(r.collection);
      if (const Member* m = c->Find(r.key); m != nullptr) {
        c->Replace(m, r.value, r.deadline_ms);
      } else {
        c->Insert(r.key, r.value, r.deadline_ms);
        total_members_.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    case RecordType::kSetDeadline:
      if (c == nullptr) return;
      if (const Member* m = c->Find(r.key); m != nullptr) c->SetDeadline(m, r.deadline_ms);
      break;
    case RecordType::kRemove:
    case RecordType::kExpiry:
      if (c == nullptr) return;
      if (const Member* m = c->Find(r.key); m != nullptr) {
        c->Erase(m);
        total_members_.fetch_sub(1, std::memory_order_relaxed);
      }
      break;
    case RecordType::kDeleteCollection:
      if (c != nullptr) shard.Drop(c);
      return;
    case RecordType::kEvent:
    case RecordType::kNextSequence:
      return;
  }
  if (c != nullptr) shard.Settle(c);
}

bool Engine::Scan(ScanCursor* cursor, size_t max_members, const ScanFn& fn) {
  while (cursor->shard < shards_.size()) {
    Shard& shard = *shards_[cursor->shard];
    size_t n;
    {
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

absl::Time Engine::NextDeadline() const {
  int64_t earliest = kNoDeadlineMs;
  for (const auto& shard : shards_) {
    MutexLock lock(&shard->mu);
    earliest = std::min(earliest, shard->NextDeadline());
  }
  return TimeOfDeadline(earliest);
}

}  // namespace lapse

#include "server/engine/collection.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace lapse {
namespace {

constexpr size_t kCacheLine = 64;
// How much of a small collection's buffer Find asks for ahead: a collection of
// 10 members of 16-byte keys and values takes 380 bytes.
constexpr size_t kPrefetchedBytes = 512;

}  // namespace

void StoredMember::Deleter::operator()(StoredMember* m) const {
  m->~StoredMember();
  ::operator delete(m);
}

uint64_t StoredMember::EncodeLarge(int64_t deadline_ms) {
  if (deadline_ms == kNoDeadlineMs) return kNoLargeDeadline;
  assert(deadline_ms >= kEarliestDeadlineMs && deadline_ms <= kLatestDeadlineMs &&
         "a deadline outside the range a member stores");
  return static_cast<uint64_t>(deadline_ms - kEarliestDeadlineMs);
}

char* StoredMember::WriteHeader(char* at, bool small, size_t key_size, size_t value_size,
                                uint64_t deadline) {
  const uint32_t key_code = key_size < kKeyEscape ? key_size : kKeyEscape;
  const uint32_t value_code = value_size < kValueEscape ? value_size : kValueEscape;
  StoredMember* m = new (at) StoredMember;
  Store<uint8_t>(m->bytes(), static_cast<uint8_t>(key_code | (small ? kSmallBit : 0)));
  Store<uint8_t>(m->bytes() + 1, static_cast<uint8_t>(value_code));
  Store<uint32_t>(m->bytes() + 2, static_cast<uint32_t>(deadline));
  if (!small) Store<uint16_t>(m->bytes() + 6, static_cast<uint16_t>(deadline >> 32));
  char* out = m->bytes() + m->sizes_at();
  if (key_code == kKeyEscape) {
    Store<uint32_t>(out, static_cast<uint32_t>(key_size));
    out += 4;
  }
  if (value_code == kValueEscape) {
    Store<uint32_t>(out, static_cast<uint32_t>(value_size));
    out += 4;
  }
  return out;
}

StoredMember* StoredMember::Write(char* at, bool small, absl::string_view key,
                                  absl::string_view value, uint64_t deadline) {
  char* out = WriteHeader(at, small, key.size(), value.size(), deadline);
  if (!key.empty()) std::memcpy(out, key.data(), key.size());
  if (!value.empty()) std::memcpy(out + key.size(), value.data(), value.size());
  return reinterpret_cast<StoredMember*>(at);
}

StoredMember::Ptr StoredMember::Create(absl::string_view key, absl::string_view value,
                                       int64_t deadline_ms) {
  void* raw = ::operator new(SizeOf(false, key.size(), value.size()));
  return Ptr(Write(static_cast<char*>(raw), false, key, value, EncodeLarge(deadline_ms)));
}

void Collection::Deleter::operator()(Collection* c) const {
  c->~Collection();
  ::operator delete(c);
}

Collection::Ptr Collection::Create(absl::string_view name) {
  void* raw = ::operator new(sizeof(Collection) + name.size());
  Ptr c(new (raw) Collection(static_cast<uint32_t>(name.size())));
  if (!name.empty()) std::memcpy(reinterpret_cast<char*>(c.get() + 1), name.data(), name.size());
  return c;
}

Collection::~Collection() {
  if (indexed_) {
    delete indexed();
  } else {
    std::free(storage_);
  }
}

size_t Collection::expiring_count() const {
  if (indexed_) return indexed()->expiring;
  size_t n = 0;
  ForEachSmall([&](const StoredMember* m) {
    n += m->has_deadline() ? 1 : 0;
    return false;
  });
  return n;
}

size_t Collection::SmallLowerBound(absl::string_view key) const {
  size_t offset = 0;
  while (offset < small_bytes_) {
    const StoredMember* m = SmallAt(offset);
    if (m->key() >= key) break;
    offset += m->size();
  }
  return offset;
}

void Collection::SmallResize(size_t offset, size_t old_size, size_t new_size) {
  const size_t bytes = small_bytes_ - old_size + new_size;
  const size_t tail = small_bytes_ - offset - old_size;
  if (bytes == 0) {
    std::free(storage_);
    storage_ = nullptr;
    small_bytes_ = 0;
    return;
  }
  // Exact sizes: an allocator keeps a block whose size class still fits in
  // place, and a collection of 10 members holds no spare room.
  if (new_size < old_size) {
    std::memmove(small() + offset + new_size, small() + offset + old_size, tail);
  }
  if (bytes != small_bytes_) {
    void* grown = std::realloc(storage_, bytes);
    if (grown == nullptr) throw std::bad_alloc();
    storage_ = grown;
  }
  if (new_size > old_size) {
    std::memmove(small() + offset + new_size, small() + offset + old_size, tail);
  }
  small_bytes_ = static_cast<uint16_t>(bytes);
}

std::pair<int64_t, int64_t> Collection::SmallSpanExcept(const StoredMember* except) const {
  int64_t earliest = kNoDeadlineMs;
  int64_t latest = INT64_MIN;
  ForEachSmall([&](const StoredMember* m) {
    if (m != except && m->has_deadline()) {
      const int64_t d = DeadlineOf(*m);
      earliest = std::min(earliest, d);
      latest = std::max(latest, d);
    }
    return false;
  });
  return {earliest, latest};
}

void Collection::SmallRebase(int64_t base_ms, const StoredMember* except) {
  const int64_t old_base_ms = small_earliest_ms_;
  small_earliest_ms_ = base_ms;
  if (base_ms == old_base_ms || base_ms == kNoDeadlineMs || old_base_ms == kNoDeadlineMs) return;
  for (size_t offset = 0; offset < small_bytes_;) {
    StoredMember* m = SmallAt(offset);
    if (m != except && m->has_deadline()) {
      m->set_small_offset(SmallOffset(m->deadline_ms(old_base_ms)));
    }
    offset += m->size();
  }
}

uint32_t Collection::SmallOffset(int64_t deadline_ms) const {
  if (deadline_ms == kNoDeadlineMs) return StoredMember::kNoOffset;
  assert(deadline_ms >= small_earliest_ms_ &&
         deadline_ms - small_earliest_ms_ <= StoredMember::kMaxOffset &&
         "a deadline the small form cannot hold");
  return static_cast<uint32_t>(deadline_ms - small_earliest_ms_);
}

bool Collection::SmallPlaceDeadline(const StoredMember* member, int64_t old_ms, int64_t new_ms) {
  const int64_t base_ms = small_earliest_ms_;
  int64_t new_base_ms = base_ms;
  if (new_ms < base_ms) {
    new_base_ms = new_ms;
  } else if (old_ms == base_ms && new_ms != old_ms) {
    new_base_ms = std::min(new_ms, SmallSpanExcept(member).first);
  }
  if (new_ms != kNoDeadlineMs && new_ms - new_base_ms > StoredMember::kMaxOffset) return false;
  if (new_base_ms < base_ms && base_ms != kNoDeadlineMs) {
    // The others' offsets grow: the latest of them must still fit.
    const int64_t latest = SmallSpanExcept(member).second;
    if (latest != INT64_MIN && latest - new_base_ms > StoredMember::kMaxOffset) return false;
  }
  SmallRebase(new_base_ms, member);
  return true;
}

void Collection::Indexed::SetStartsRun(const StoredMember* m, bool was, bool is) {
  if (was == is) return;
  if (is) {
    // A deadline counted from now (a TTL) is usually the latest held, so the
    // end is the likely place: the hint costs two comparisons when right, a
    // normal search when wrong.
    run_heads.insert(run_heads.end(), m);
  } else if (*run_heads.begin() == m) {
    // The drain takes the earliest run: no search.
    run_heads.erase(run_heads.begin());
  } else {
    run_heads.erase(m);
  }
}

void Collection::Indexed::Link(KeyIndex::iterator it) {
  const StoredMember* m = it->get();
  if (m->has_deadline()) {
    ++expiring;
    SetStartsRun(m, false, StartsRun(it));
  }
  const auto next = std::next(it);
  if (next == by_key.end() || !(*next)->has_deadline()) return;
  // Before `m` came, the next member followed m's predecessor.
  const bool was = it == by_key.begin() || !SameRun(**std::prev(it), **next);
  SetStartsRun(next->get(), was, !SameRun(*m, **next));
}

void Collection::Indexed::Unlink(KeyIndex::iterator it) {
  const StoredMember* m = it->get();
  if (m->has_deadline()) {
    --expiring;
    SetStartsRun(m, StartsRun(it), false);
  }
  const auto next = std::next(it);
  if (next == by_key.end() || !(*next)->has_deadline()) return;
  // Once `m` is gone, the next member follows m's predecessor.
  const bool is = it == by_key.begin() || !SameRun(**std::prev(it), **next);
  SetStartsRun(next->get(), !SameRun(*m, **next), is);
}

void Collection::MakeIndexed() {
  auto built = std::make_unique<Indexed>();
  ForEachSmall([&](const StoredMember* m) {
    built->Link(built->by_key.insert(built->by_key.end(),
                                     StoredMember::Create(m->key(), m->value(), DeadlineOf(*m))));
    return false;
  });
  std::free(storage_);
  storage_ = built.release();
  indexed_ = true;
  small_bytes_ = 0;
  small_count_ = 0;
  small_earliest_ms_ = kNoDeadlineMs;
}

void Collection::IndexedInsert(const KeyIndex::iterator& hint, absl::string_view key,
                               absl::string_view value, int64_t deadline_ms) {
  indexed()->Link(indexed()->by_key.insert(hint, StoredMember::Create(key, value, deadline_ms)));
}

void Collection::IndexedSetDeadline(KeyIndex::iterator it, int64_t deadline_ms) {
  if (DeadlineOf(**it) == deadline_ms) return;
  indexed()->Unlink(it);
  (*it)->set_large_deadline_ms(deadline_ms);
  indexed()->Link(it);
}

Collection::Place Collection::Locate(absl::string_view key) const {
  if (indexed_) {
    auto it = indexed()->by_key.find(key);
    return {it == indexed()->by_key.end() ? nullptr : it->get()};
  }
  // The scan learns where each member starts only from the one before it, so
  // the buffer's lines, when not cached, would come one miss after another
  // (2.7 misses a put filling 1M members into 100k collections, under
  // cachegrind): ask for the first few at once.
  for (size_t at = kCacheLine; at < std::min<size_t>(small_bytes_, kPrefetchedBytes);
       at += kCacheLine) {
    __builtin_prefetch(small() + at);
  }
  const size_t offset = SmallLowerBound(key);
  const bool found = offset < small_bytes_ && SmallAt(offset)->key() == key;
  return {found ? SmallAt(offset) : nullptr, offset};
}

const StoredMember* Collection::EarliestExpiring() const {
  if (indexed_) {
    // The first member of the earliest run is the earliest in (deadline, key)
    // order.
    const auto& run_heads = indexed()->run_heads;
    return run_heads.empty() ? nullptr : *run_heads.begin();
  }
  // Members in key order: the first with the earliest deadline is the
  // earliest in (deadline, key) order.
  const StoredMember* earliest = nullptr;
  if (small_earliest_ms_ == kNoDeadlineMs) return nullptr;
  ForEachSmall([&](const StoredMember* m) {
    if (m->small_offset() == 0) earliest = m;
    return earliest != nullptr;
  });
  return earliest;
}

bool Collection::Put(absl::string_view key, absl::string_view value, int64_t deadline_ms,
                     absl::FunctionRef<void(const StoredMember&)> replacing, const Place* place) {
  if (indexed_) {
    auto& by_key = indexed()->by_key;
    auto it = by_key.lower_bound(key);
    if (it == by_key.end() || (*it)->key() != key) {
      IndexedInsert(it, key, value, deadline_ms);
      return true;
    }
    StoredMember* m = it->get();
    replacing(*m);
    if (m->value_size() == value.size()) {
      // Same size: overwrite in place and keep the member's allocation.
      if (!value.empty()) {
        std::memcpy(m->bytes() + m->key_at() + m->key_size(), value.data(), value.size());
      }
      IndexedSetDeadline(it, deadline_ms);
      return false;
    }
    StoredMember::Ptr replacement = StoredMember::Create(key, value, deadline_ms);
    indexed()->Unlink(it);
    indexed()->Link(by_key.insert(by_key.erase(it), std::move(replacement)));
    return false;
  }
  assert((place == nullptr || place->small_offset == SmallLowerBound(key)) &&
         "a place Locate did not return since the collection last changed");
  const size_t offset = place != nullptr ? place->small_offset : SmallLowerBound(key);
  const bool found = place != nullptr ? place->member != nullptr
                                      : offset < small_bytes_ && SmallAt(offset)->key() == key;
  if (found) {
    replacing(*SmallAt(offset));
    SmallReplace(offset, value, deadline_ms);
    return false;
  }
  const size_t size = StoredMember::SizeOf(true, key.size(), value.size());
  if (small_count_ == kSmallMax || small_bytes_ + size > kSmallMaxBytes ||
      !SmallPlaceDeadline(nullptr, kNoDeadlineMs, deadline_ms)) {
    MakeIndexed();
    IndexedInsert(indexed()->by_key.end(), key, value, deadline_ms);
    return true;
  }
  SmallResize(offset, 0, size);
  StoredMember::Write(small() + offset, true, key, value, SmallOffset(deadline_ms));
  ++small_count_;
  return true;
}

void Collection::SmallReplace(size_t offset, absl::string_view value, int64_t deadline_ms) {
  StoredMember* m = SmallAt(offset);
  const size_t key_size = m->key_size();
  const size_t old_size = m->size();
  const size_t new_size = StoredMember::SizeOf(true, key_size, value.size());
  if (small_bytes_ - old_size + new_size > kSmallMaxBytes ||
      !SmallPlaceDeadline(m, DeadlineOf(*m), deadline_ms)) {
    const std::string key(m->key());
    MakeIndexed();
    auto& by_key = indexed()->by_key;
    auto it = by_key.find(key);
    indexed()->Unlink(it);
    IndexedInsert(by_key.erase(it), key, value, deadline_ms);
    return;
  }
  if (new_size == old_size) {
    if (!value.empty())
      std::memcpy(m->bytes() + m->key_at() + key_size, value.data(), value.size());
    m->set_small_offset(SmallOffset(deadline_ms));
    return;
  }
  // In place: the key, and so the position, is the same. The key moves within
  // the member when the value's size gains or loses its escape; the old value
  // is overwritten.
  const size_t old_key_at = m->key_at();
  const size_t new_key_at = new_size - key_size - value.size();
  if (new_size > old_size) SmallResize(offset, old_size, new_size);
  char* at = small() + offset;
  std::memmove(at + new_key_at, at + old_key_at, key_size);
  StoredMember::WriteHeader(at, true, key_size, value.size(), SmallOffset(deadline_ms));
  if (!value.empty()) std::memcpy(at + new_key_at + key_size, value.data(), value.size());
  if (new_size < old_size) SmallResize(offset, old_size, new_size);
}

const StoredMember* Collection::SetDeadline(const StoredMember* member, int64_t deadline_ms) {
  assert(Find(member->key()) == member && "not a member of this collection");
  const int64_t old_deadline_ms = DeadlineOf(*member);
  if (old_deadline_ms == deadline_ms) return member;
  if (!indexed_) {
    if (SmallPlaceDeadline(member, old_deadline_ms, deadline_ms)) {
      const_cast<StoredMember*>(member)->set_small_offset(SmallOffset(deadline_ms));
      return member;
    }
    const std::string key(member->key());
    MakeIndexed();
    const auto it = indexed()->by_key.find(key);
    IndexedSetDeadline(it, deadline_ms);
    return it->get();
  }
  const auto it = indexed()->by_key.find(member->key());
  IndexedSetDeadline(it, deadline_ms);
  return member;
}

void Collection::Erase(const StoredMember* member) {
  assert(Find(member->key()) == member && "not a member of this collection");
  if (!indexed_) {
    // Erasing a deadline only moves the base later: the others still fit.
    [[maybe_unused]] const bool placed =
        SmallPlaceDeadline(member, DeadlineOf(*member), kNoDeadlineMs);
    assert(placed);
    SmallResize(reinterpret_cast<const char*>(member) - small(), member->size(), 0);
    --small_count_;
    return;
  }
  // Erase by iterator: the key view points into the member being destroyed.
  const auto it = indexed()->by_key.find(member->key());
  indexed()->Unlink(it);
  indexed()->by_key.erase(it);
}

size_t Collection::EraseDue(int64_t now_ms, size_t limit,
                            absl::FunctionRef<void(const StoredMember&)> expire) {
  return indexed_ ? IndexedEraseDue(now_ms, limit, expire) : SmallEraseDue(now_ms, limit, expire);
}

size_t Collection::SmallEraseDue(int64_t now_ms, size_t limit,
                                 absl::FunctionRef<void(const StoredMember&)> expire) {
  if (small_earliest_ms_ > now_ms) return 0;
  std::array<const StoredMember*, kSmallMax> due;
  size_t due_count = 0;
  ForEachSmall([&](const StoredMember* m) {
    if (DeadlineOf(*m) <= now_ms) due[due_count++] = m;
    return false;
  });
  const size_t n = std::min(due_count, limit);
  if (n == 0) return 0;
  // Only the first n in (deadline, key) order go when the limit cuts.
  const DeadlineLess less{small_earliest_ms_};
  if (n < due_count) {
    std::partial_sort(due.begin(), due.begin() + n, due.begin() + due_count, less);
  } else {
    std::sort(due.begin(), due.begin() + n, less);
  }
  for (size_t i = 0; i < n; ++i) expire(*due[i]);
  if (n == small_count_) {
    SmallResize(0, small_bytes_, 0);
  } else {
    // Close the gaps in one pass, the kept members in their order.
    std::sort(due.begin(), due.begin() + n);
    size_t kept = 0;
    size_t next_due = 0;
    for (size_t offset = 0; offset < small_bytes_;) {
      const StoredMember* m = SmallAt(offset);
      const size_t size = m->size();
      if (next_due < n && due[next_due] == m) {
        ++next_due;
      } else {
        if (kept != offset) std::memmove(small() + kept, m, size);
        kept += size;
      }
      offset += size;
    }
    SmallResize(kept, small_bytes_ - kept, 0);
  }
  small_count_ -= static_cast<uint8_t>(n);
  // The base moves later: the kept members' offsets shrink.
  SmallRebase(SmallSpanExcept(nullptr).first, nullptr);
  return n;
}

size_t Collection::IndexedEraseDue(int64_t now_ms, size_t limit,
                                   absl::FunctionRef<void(const StoredMember&)> expire) {
  Indexed& ix = *indexed();
  auto& run_heads = ix.run_heads;
  auto& by_key = ix.by_key;
  // Every member due: events in order, then both indexes freed whole.
  if (!by_key.empty() && ix.expiring == by_key.size() && by_key.size() <= limit &&
      DeadlineOf(**run_heads.rbegin()) <= now_ms) {
    // Each member is a cache miss of its own (members lie where they were
    // allocated, in put order, not in deadline order): the next ones are
    // asked for ahead of their events, where the order is one index's.
    constexpr int kPrefetchAhead = 8;
    const auto in_order = [&](const auto& index, auto member_of) {
      auto ahead = index.begin();
      for (int i = 0; i < kPrefetchAhead && ahead != index.end(); ++i, ++ahead) {
        __builtin_prefetch(member_of(*ahead));
      }
      for (const auto& entry : index) {
        if (ahead != index.end()) __builtin_prefetch(member_of(*ahead++));
        expire(*member_of(entry));
      }
    };
    if (run_heads.size() == by_key.size()) {
      // Runs of one: the deadline index is the order.
      in_order(run_heads, [](const StoredMember* m) { return m; });
    } else if (run_heads.size() == 1) {
      // One run: the key index is the order.
      in_order(by_key, [](const StoredMember::Ptr& m) { return m.get(); });
    } else {
      for (const StoredMember* head : run_heads) {
        ForEachInRun(by_key.find(head->key()), [&](const StoredMember* m) {
          expire(*m);
          return false;
        });
      }
    }
    const size_t n = by_key.size();
    run_heads.clear();
    by_key.clear();
    ix.expiring = 0;
    return n;
  }
  size_t n = 0;
  // Where the last run taken left the key index: the next run often starts
  // there.
  auto next_by_key = by_key.end();
  while (n < limit && !run_heads.empty()) {
    const StoredMember* head = *run_heads.begin();
    const int64_t deadline_ms = DeadlineOf(*head);
    if (deadline_ms > now_ms) break;
    auto it = next_by_key != by_key.end() && next_by_key->get() == head ? next_by_key
                                                                        : by_key.find(head->key());
    // The member before the run (not erased: members stay where they are).
    const StoredMember* before = it == by_key.begin() ? nullptr : std::prev(it)->get();
    run_heads.erase(run_heads.begin());
    do {
      expire(**it);
      --ix.expiring;
      it = by_key.erase(it);
      ++n;
    } while (n < limit && it != by_key.end() && DeadlineOf(**it) == deadline_ms);
    next_by_key = it;
    if (it == by_key.end() || !(*it)->has_deadline()) continue;
    const StoredMember* next = it->get();
    if (DeadlineOf(*next) == deadline_ms) {
      // The limit cut the run: the rest of it is a run of its own, still the
      // earliest.
      run_heads.insert(run_heads.begin(), next);
    } else if (before != nullptr && Indexed::SameRun(*before, *next)) {
      // The run between them gone, the next member joins the run before.
      ix.SetStartsRun(next, true, false);
    }
  }
  return n;
}

std::vector<const StoredMember*> Collection::PageByKey(const absl::string_view* after_key,
                                                       size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  *more = false;
  if (indexed_) {
    const auto& by_key = indexed()->by_key;
    auto it = after_key == nullptr ? by_key.begin() : by_key.upper_bound(*after_key);
    for (; it != by_key.end() && page.size() < limit; ++it) page.push_back(it->get());
    *more = it != by_key.end();
    return page;
  }
  ForEachSmall([&](const StoredMember* m) {
    if (after_key != nullptr && m->key() <= *after_key) return false;
    if (page.size() == limit) {
      *more = true;
      return true;
    }
    page.push_back(m);
    return false;
  });
  return page;
}

std::vector<const StoredMember*> Collection::PageByDeadline(const DeadlinePosition* after,
                                                            size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  *more = false;
  // Phase 1: members with a deadline, in (deadline, key) order.
  if (after == nullptr || after->deadline_ms != kNoDeadlineMs) {
    if (indexed_) {
      IndexedPageByDeadline(after, limit, &page, more);
    } else {
      std::vector<const StoredMember*> expiring;
      ForEachSmall([&](const StoredMember* m) {
        if (m->has_deadline()) expiring.push_back(m);
        return false;
      });
      const DeadlineLess less{small_earliest_ms_};
      std::sort(expiring.begin(), expiring.end(), less);
      auto it = after == nullptr ? expiring.begin()
                                 : std::upper_bound(expiring.begin(), expiring.end(), *after, less);
      for (; it != expiring.end() && page.size() < limit; ++it) page.push_back(*it);
      *more = it != expiring.end();
    }
    if (*more) return page;
  }
  // Phase 2: persistent members, in key order.
  const bool persistent_exist = size() > expiring_count();
  if (!persistent_exist) return page;
  const bool from_start = after == nullptr || after->deadline_ms != kNoDeadlineMs;
  // Takes `m` if it is persistent; true once the page is full and more follow.
  auto take = [&](const StoredMember* m) {
    if (m->has_deadline()) return false;
    if (page.size() == limit) {
      *more = true;
      return true;
    }
    page.push_back(m);
    return false;
  };
  if (indexed_) {
    const auto& by_key = indexed()->by_key;
    for (auto it = from_start ? by_key.begin() : by_key.upper_bound(after->key);
         it != by_key.end() && !take(it->get()); ++it) {
    }
  } else {
    ForEachSmall([&](const StoredMember* m) {
      if (!from_start && m->key() <= after->key) return false;
      return take(m);
    });
  }
  return page;
}

void Collection::IndexedPageByDeadline(const DeadlinePosition* after, size_t limit,
                                       std::vector<const StoredMember*>* page, bool* more) const {
  const Indexed& ix = *indexed();
  // Takes `m`; true once the page is full and more follow.
  const auto take = [&](const StoredMember* m) {
    if (page->size() == limit) {
      *more = true;
      return true;
    }
    page->push_back(m);
    return false;
  };
  if (after != nullptr) {
    // The rest of the run `after` is in, when one holds it: the member after
    // it in key order, with its deadline, that does not start a run.
    const auto it = ix.by_key.upper_bound(after->key);
    if (it != ix.by_key.end() && (*it)->has_deadline() && DeadlineOf(**it) == after->deadline_ms &&
        !ix.StartsRun(it)) {
      bool full = false;
      ForEachInRun(it, [&](const StoredMember* m) { return full = take(m); });
      if (full) return;
    }
  }
  for (auto head = after == nullptr ? ix.run_heads.begin() : ix.run_heads.upper_bound(*after);
       head != ix.run_heads.end(); ++head) {
    bool full = false;
    ForEachInRun(ix.by_key.find((*head)->key()),
                 [&](const StoredMember* m) { return full = take(m); });
    if (full) return;
  }
}

}  // namespace lapse

#include "server/engine/collection.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <new>

namespace lapse {

void StoredMember::Deleter::operator()(StoredMember* m) const {
  m->~StoredMember();
  ::operator delete(m);
}

uint64_t StoredMember::EncodeDeadline(int64_t deadline_ms) {
  if (deadline_ms == kNoDeadlineMs) return kDeadlineMask;
  assert(deadline_ms >= kEarliestDeadlineMs && deadline_ms <= kLatestDeadlineMs &&
         "a deadline outside the range a member stores");
  return static_cast<uint64_t>(deadline_ms - kEarliestDeadlineMs);
}

StoredMember::Ptr StoredMember::Create(absl::string_view key, absl::string_view value,
                                       int64_t deadline_ms) {
  const uint32_t key_code = key.size() < kSizeEscape ? key.size() : kSizeEscape;
  const uint32_t value_code = value.size() < kSizeEscape ? value.size() : kSizeEscape;
  const uint64_t header = EncodeDeadline(deadline_ms) | (uint64_t{key_code} << kKeySizeShift) |
                          (uint64_t{value_code} << kValueSizeShift);
  const size_t sizes = (key_code == kSizeEscape ? 4 : 0) + (value_code == kSizeEscape ? 4 : 0);
  void* raw = ::operator new(sizeof(StoredMember) + sizes + key.size() + value.size());
  Ptr m(new (raw) StoredMember(header));
  char* out = m->data();
  if (key_code == kSizeEscape) {
    EncodeFixed32(out, static_cast<uint32_t>(key.size()));
    out += 4;
  }
  if (value_code == kSizeEscape) {
    EncodeFixed32(out, static_cast<uint32_t>(value.size()));
    out += 4;
  }
  if (!key.empty()) std::memcpy(out, key.data(), key.size());
  if (!value.empty()) std::memcpy(out + key.size(), value.data(), value.size());
  return m;
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

size_t Collection::expiring_count() const {
  if (indexed_) return indexed_->by_deadline.size();
  size_t n = 0;
  for (const StoredMember::Ptr& m : small_) n += m->has_deadline() ? 1 : 0;
  return n;
}

Collection::SmallMembers::iterator Collection::SmallLowerBound(absl::string_view key) {
  return std::lower_bound(small_.begin(), small_.end(), key, KeyLess());
}

Collection::SmallMembers::const_iterator Collection::SmallLowerBound(absl::string_view key) const {
  return std::lower_bound(small_.begin(), small_.end(), key, KeyLess());
}

void Collection::FindSmallEarliest() {
  small_earliest_ = nullptr;
  const DeadlineLess less;
  for (const StoredMember::Ptr& m : small_) {
    if (m->has_deadline() && (small_earliest_ == nullptr || less(m.get(), small_earliest_))) {
      small_earliest_ = m.get();
    }
  }
}

void Collection::MakeIndexed() {
  indexed_ = std::make_unique<Indexed>();
  for (StoredMember::Ptr& m : small_) {
    const StoredMember* member = m.get();
    indexed_->by_key.insert(indexed_->by_key.end(), std::move(m));
    Index(member);
  }
  SmallMembers().swap(small_);
  small_earliest_ = nullptr;
}

const StoredMember* Collection::Find(absl::string_view key) const {
  if (indexed_) {
    auto it = indexed_->by_key.find(key);
    return it == indexed_->by_key.end() ? nullptr : it->get();
  }
  auto it = SmallLowerBound(key);
  return it == small_.end() || (*it)->key() != key ? nullptr : it->get();
}

void Collection::Index(const StoredMember* member) {
  // A deadline counted from now (a TTL) is usually the latest held, so the
  // end is the likely place: the hint costs two comparisons when right, a
  // normal search when wrong.
  if (member->has_deadline()) indexed_->by_deadline.insert(indexed_->by_deadline.end(), member);
}

void Collection::Unindex(const StoredMember* member) {
  if (!member->has_deadline()) return;
  auto& by_deadline = indexed_->by_deadline;
  // The drain erases the earliest member: no search.
  if (*by_deadline.begin() == member) {
    by_deadline.erase(by_deadline.begin());
  } else {
    by_deadline.erase(member);
  }
}

bool Collection::Put(absl::string_view key, absl::string_view value, int64_t deadline_ms,
                     absl::FunctionRef<void(const StoredMember&)> replacing) {
  const StoredMember* existing = Find(key);
  if (existing == nullptr) {
    Insert(key, value, deadline_ms);
    return true;
  }
  replacing(*existing);
  Replace(existing, value, deadline_ms);
  return false;
}

void Collection::Insert(absl::string_view key, absl::string_view value, int64_t deadline_ms) {
  assert(Find(key) == nullptr && "Insert of a key that is present");
  if (!indexed_ && small_.size() == kSmallMax) MakeIndexed();
  StoredMember::Ptr m = StoredMember::Create(key, value, deadline_ms);
  if (indexed_) {
    auto it = indexed_->by_key.insert(std::move(m)).first;
    Index(it->get());
    return;
  }
  // Grown one slot at a time, not doubled: a pointer array of a few members
  // is cheap to move, and doubling would leave a collection of 9 to 15
  // members up to 7 empty slots.
  if (small_.size() == small_.capacity()) small_.reserve(small_.size() + 1);
  const StoredMember* member = m.get();
  small_.insert(SmallLowerBound(key), std::move(m));
  // Only the new member can have become the earliest: no scan, which would
  // read every member's header.
  if (member->has_deadline() &&
      (small_earliest_ == nullptr || DeadlineLess()(member, small_earliest_))) {
    small_earliest_ = member;
  }
}

void Collection::Replace(const StoredMember* member, absl::string_view value, int64_t deadline_ms) {
  assert(Find(member->key()) == member && "not a member of this collection");
  if (member->value_size() == value.size()) {
    // Same size: overwrite in place and keep the member's allocation.
    StoredMember* m = const_cast<StoredMember*>(member);
    if (!value.empty()) {
      std::memcpy(m->data() + m->sizes_bytes() + m->key_size(), value.data(), value.size());
    }
    SetDeadline(member, deadline_ms);
    return;
  }
  StoredMember::Ptr replacement = StoredMember::Create(member->key(), value, deadline_ms);
  if (!indexed_) {
    // In place in the vector: the key, and so the position, is the same.
    *SmallLowerBound(member->key()) = std::move(replacement);
    FindSmallEarliest();
    return;
  }
  Unindex(member);
  auto& by_key = indexed_->by_key;
  auto it = by_key.erase(by_key.find(member->key()));
  it = by_key.insert(it, std::move(replacement));
  Index(it->get());
}

void Collection::SetDeadline(const StoredMember* member, int64_t deadline_ms) {
  assert(Find(member->key()) == member && "not a member of this collection");
  if (member->deadline_ms() == deadline_ms) return;
  if (!indexed_) {
    const bool was_earliest = member == small_earliest_;
    const_cast<StoredMember*>(member)->set_deadline_ms(deadline_ms);
    if (member->has_deadline() &&
        (small_earliest_ == nullptr || DeadlineLess()(member, small_earliest_))) {
      small_earliest_ = member;
    } else if (was_earliest) {
      FindSmallEarliest();
    }
    return;
  }
  Unindex(member);
  const_cast<StoredMember*>(member)->set_deadline_ms(deadline_ms);
  Index(member);
}

void Collection::Erase(const StoredMember* member) {
  assert(Find(member->key()) == member && "not a member of this collection");
  // Erase by iterator: the key view points into the member being destroyed.
  if (!indexed_) {
    small_.erase(SmallLowerBound(member->key()));
    FindSmallEarliest();
    return;
  }
  Unindex(member);
  indexed_->by_key.erase(indexed_->by_key.find(member->key()));
}

size_t Collection::EraseDue(int64_t now_ms, size_t limit,
                            absl::FunctionRef<void(const StoredMember&)> expire) {
  return indexed_ ? IndexedEraseDue(now_ms, limit, expire) : SmallEraseDue(now_ms, limit, expire);
}

size_t Collection::SmallEraseDue(int64_t now_ms, size_t limit,
                                 absl::FunctionRef<void(const StoredMember&)> expire) {
  std::array<const StoredMember*, kSmallMax> due;
  size_t due_count = 0;
  for (const StoredMember::Ptr& m : small_) {
    if (m->has_deadline() && m->deadline_ms() <= now_ms) due[due_count++] = m.get();
  }
  const size_t n = std::min(due_count, limit);
  if (n == 0) return 0;
  // Only the first n in (deadline, key) order go when the limit cuts.
  if (n < due_count) {
    std::partial_sort(due.begin(), due.begin() + n, due.begin() + due_count, DeadlineLess());
  } else {
    std::sort(due.begin(), due.begin() + n, DeadlineLess());
  }
  for (size_t i = 0; i < n; ++i) expire(*due[i]);
  if (n == small_.size()) {
    small_.clear();
  } else {
    const auto erased = [&](const StoredMember::Ptr& m) {
      return std::find(due.begin(), due.begin() + n, m.get()) != due.begin() + n;
    };
    small_.erase(std::remove_if(small_.begin(), small_.end(), erased), small_.end());
  }
  FindSmallEarliest();
  return n;
}

size_t Collection::IndexedEraseDue(int64_t now_ms, size_t limit,
                                   absl::FunctionRef<void(const StoredMember&)> expire) {
  auto& by_deadline = indexed_->by_deadline;
  auto& by_key = indexed_->by_key;
  // Every member due: events in order, then both indexes freed whole.
  if (!by_key.empty() && by_deadline.size() == by_key.size() && by_key.size() <= limit &&
      (*by_deadline.rbegin())->deadline_ms() <= now_ms) {
    for (const StoredMember* m : by_deadline) expire(*m);
    const size_t n = by_key.size();
    by_deadline.clear();
    by_key.clear();
    return n;
  }
  size_t n = 0;
  // Where the last erase left the key index: the next due member is often
  // there (always when the due members share a deadline).
  auto next_by_key = by_key.end();
  while (n < limit && !by_deadline.empty()) {
    const StoredMember* m = *by_deadline.begin();
    if (m->deadline_ms() > now_ms) break;
    expire(*m);
    by_deadline.erase(by_deadline.begin());
    auto it = next_by_key != by_key.end() && next_by_key->get() == m ? next_by_key
                                                                     : by_key.find(m->key());
    next_by_key = by_key.erase(it);
    ++n;
  }
  return n;
}

std::vector<const StoredMember*> Collection::PageByKey(const absl::string_view* after_key,
                                                       size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  auto collect = [&](auto begin, auto end) {
    auto it = begin;
    for (; it != end && page.size() < limit; ++it) page.push_back(it->get());
    *more = it != end;
  };
  if (indexed_) {
    const auto& by_key = indexed_->by_key;
    collect(after_key == nullptr ? by_key.begin() : by_key.upper_bound(*after_key), by_key.end());
  } else {
    collect(after_key == nullptr
                ? small_.begin()
                : std::upper_bound(small_.begin(), small_.end(), *after_key, KeyLess()),
            small_.end());
  }
  return page;
}

std::vector<const StoredMember*> Collection::PageByDeadline(const DeadlinePosition* after,
                                                            size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  *more = false;
  // Phase 1: members with a deadline, in (deadline, key) order.
  if (after == nullptr || after->deadline_ms != kNoDeadlineMs) {
    auto collect = [&](auto it, auto end) {
      for (; it != end && page.size() < limit; ++it) page.push_back(*it);
      *more = it != end;
    };
    if (indexed_) {
      const auto& by_deadline = indexed_->by_deadline;
      collect(after == nullptr ? by_deadline.begin() : by_deadline.upper_bound(*after),
              by_deadline.end());
    } else {
      std::vector<const StoredMember*> expiring;
      for (const StoredMember::Ptr& m : small_) {
        if (m->has_deadline()) expiring.push_back(m.get());
      }
      std::sort(expiring.begin(), expiring.end(), DeadlineLess());
      collect(after == nullptr
                  ? expiring.begin()
                  : std::upper_bound(expiring.begin(), expiring.end(), *after, DeadlineLess()),
              expiring.end());
    }
    if (*more) return page;
  }
  // Phase 2: persistent members, in key order.
  const bool persistent_exist = size() > expiring_count();
  if (!persistent_exist) return page;
  auto collect = [&](auto it, auto end) {
    for (; it != end; ++it) {
      if ((*it)->has_deadline()) continue;
      if (page.size() == limit) {
        *more = true;
        break;
      }
      page.push_back(it->get());
    }
  };
  const bool from_start = after == nullptr || after->deadline_ms != kNoDeadlineMs;
  if (indexed_) {
    const auto& by_key = indexed_->by_key;
    collect(from_start ? by_key.begin() : by_key.upper_bound(after->key), by_key.end());
  } else {
    collect(from_start ? small_.begin()
                       : std::upper_bound(small_.begin(), small_.end(), after->key, KeyLess()),
            small_.end());
  }
  return page;
}

}  // namespace lapse

#include "server/engine/collection.h"

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

const StoredMember* Collection::Find(absl::string_view key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->get();
}

void Collection::Index(const StoredMember* member) {
  // A deadline counted from now (a TTL) is usually the latest held, so the
  // end is the likely place: the hint costs two comparisons when right, a
  // normal search when wrong.
  if (member->has_deadline()) by_deadline_.insert(by_deadline_.end(), member);
}

void Collection::Unindex(const StoredMember* member) {
  if (!member->has_deadline()) return;
  // The drain erases the earliest member: no search.
  if (*by_deadline_.begin() == member) {
    by_deadline_.erase(by_deadline_.begin());
  } else {
    by_deadline_.erase(member);
  }
}

void Collection::Insert(absl::string_view key, absl::string_view value, int64_t deadline_ms) {
  auto [it, inserted] = by_key_.insert(StoredMember::Create(key, value, deadline_ms));
  assert(inserted && "Insert of a key that is present");
  Index(it->get());
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
  Unindex(member);
  auto it = by_key_.find(member->key());
  StoredMember::Ptr replacement = StoredMember::Create(member->key(), value, deadline_ms);
  it = by_key_.erase(it);
  it = by_key_.insert(it, std::move(replacement));
  Index(it->get());
}

void Collection::SetDeadline(const StoredMember* member, int64_t deadline_ms) {
  assert(Find(member->key()) == member && "not a member of this collection");
  if (member->deadline_ms() == deadline_ms) return;
  Unindex(member);
  const_cast<StoredMember*>(member)->set_deadline_ms(deadline_ms);
  Index(member);
}

void Collection::Erase(const StoredMember* member) {
  assert(Find(member->key()) == member && "not a member of this collection");
  Unindex(member);
  // Erase by iterator: the key view points into the member being destroyed.
  by_key_.erase(by_key_.find(member->key()));
}

std::vector<const StoredMember*> Collection::PageByKey(const absl::string_view* after_key,
                                                       size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  auto it = after_key == nullptr ? by_key_.begin() : by_key_.upper_bound(*after_key);
  for (; it != by_key_.end() && page.size() < limit; ++it) page.push_back(it->get());
  *more = it != by_key_.end();
  return page;
}

std::vector<const StoredMember*> Collection::PageByDeadline(const DeadlinePosition* after,
                                                            size_t limit, bool* more) const {
  std::vector<const StoredMember*> page;
  *more = false;
  // Phase 1: members with a deadline, in (deadline, key) order.
  if (after == nullptr || after->deadline_ms != kNoDeadlineMs) {
    auto it = after == nullptr ? by_deadline_.begin() : by_deadline_.upper_bound(*after);
    for (; it != by_deadline_.end() && page.size() < limit; ++it) {
      page.push_back(*it);
    }
    if (it != by_deadline_.end()) {
      *more = true;
      return page;
    }
  }
  // Phase 2: persistent members, in key order.
  const bool persistent_exist = by_key_.size() > by_deadline_.size();
  if (!persistent_exist) return page;
  auto it = (after == nullptr || after->deadline_ms != kNoDeadlineMs)
                ? by_key_.begin()
                : by_key_.upper_bound(after->key);
  for (; it != by_key_.end(); ++it) {
    if ((*it)->has_deadline()) continue;
    if (page.size() == limit) {
      *more = true;
      break;
    }
    page.push_back(it->get());
  }
  return page;
}

}  // namespace lapse

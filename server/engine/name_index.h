// NameIndex: items owned and ordered by their names, for lookups and for
// listing in name order.
//
// Each engine shard keeps its collections in one. An entry is the item's
// pointer and 8 bytes of its name beside it (the "abbreviation"), so that a
// search compares inside the b-tree's nodes and reads an item's name only when
// the abbreviations are equal: a search through pointers alone read another
// item's name at every comparison, a cache miss each in a large index.
//
// Names share long prefixes ("user-42:orders", "c000000000012345"), so the
// abbreviation is not the name's first 8 bytes: it is the 8 bytes after the
// prefix that every name in the index shares, big-endian, zero-padded. An item
// whose name does not share that prefix shortens it on insert and every entry
// is abbreviated again (the prefix only shortens while the index holds items,
// so at most once per byte of the longest name). Abbreviations keep the
// names' order, weakly: a < b implies abbrev(a) <= abbrev(b).
//
//   NameIndex<std::unique_ptr<Item>> index;  // Item has `string_view name()`.
//   index.Insert(std::make_unique<Item>("user-42:orders"));
//   Item* item = index.Find("user-42:orders");
//   for (auto it = index.LowerBound("user-4"); it != index.end(); ++it) it->get();
//
// Not thread-safe: the owning shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_NAME_INDEX_H_
#define LAPSE_SERVER_ENGINE_NAME_INDEX_H_

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/types/compare.h"

namespace lapse {

// `Ptr` owns an item (std::unique_ptr) whose `name()` returns a string_view
// that stays the same while the item is indexed.
template <typename Ptr>
class NameIndex {
 public:
  using Item = typename Ptr::element_type;

  class Entry {
   public:
    Entry(uint64_t abbrev, Ptr item) : abbrev_(abbrev), item_(std::move(item)) {}
    Item* get() const { return item_.get(); }
    uint64_t abbrev() const { return abbrev_; }

   private:
    friend class NameIndex;
    // Rewritten in place when the shared prefix shortens: the new
    // abbreviations keep the entries' order, so the b-tree stays sorted.
    mutable uint64_t abbrev_;
    Ptr item_;
  };

 private:
  // A name searched for. Abbreviated like the entries when it starts with
  // the shared prefix; compared by its whole name otherwise.
  struct Probe {
    absl::string_view name;
    uint64_t abbrev;
    bool abbreviated;
  };

  struct Less {
    using is_transparent = void;
    absl::weak_ordering operator()(const Entry& a, const Entry& b) const {
      return Order(a.abbrev(), b.abbrev(), a.get()->name(), b.get()->name());
    }
    absl::weak_ordering operator()(const Entry& a, const Probe& b) const {
      if (!b.abbreviated) return Names(a.get()->name(), b.name);
      return Order(a.abbrev(), b.abbrev, a.get()->name(), b.name);
    }
    absl::weak_ordering operator()(const Probe& a, const Entry& b) const {
      if (!a.abbreviated) return Names(a.name, b.get()->name());
      return Order(a.abbrev, b.abbrev(), a.name, b.get()->name());
    }
    // The names are read only when the abbreviations are equal.
    static absl::weak_ordering Order(uint64_t abbrev_a, uint64_t abbrev_b, absl::string_view name_a,
                                     absl::string_view name_b) {
      if (abbrev_a != abbrev_b) {
        return abbrev_a < abbrev_b ? absl::weak_ordering::less : absl::weak_ordering::greater;
      }
      return Names(name_a, name_b);
    }
    static absl::weak_ordering Names(absl::string_view a, absl::string_view b) {
      const int c = a.compare(b);
      return c < 0    ? absl::weak_ordering::less
             : c == 0 ? absl::weak_ordering::equivalent
                      : absl::weak_ordering::greater;
    }
  };

 public:
  using const_iterator = typename absl::btree_set<Entry, Less>::const_iterator;

  NameIndex() = default;
  NameIndex(const NameIndex&) = delete;
  NameIndex& operator=(const NameIndex&) = delete;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

  // The item named `name`, or nullptr.
  Item* Find(absl::string_view name) const {
    auto it = entries_.find(ProbeOf(name));
    return it == entries_.end() ? nullptr : it->get();
  }
  // The first entry whose name is not below `name`, or end().
  const_iterator LowerBound(absl::string_view name) const {
    return entries_.lower_bound(ProbeOf(name));
  }
  // The first entry whose name is above `name`, or end().
  const_iterator UpperBound(absl::string_view name) const {
    return entries_.upper_bound(ProbeOf(name));
  }

  // Takes `item` in and returns it. REQUIRES: no item of its name is indexed.
  Item* Insert(Ptr item) {
    const absl::string_view name = item->name();
    if (entries_.empty()) {
      prefix_.assign(name.data(), name.size());
    } else if (!absl::StartsWith(name, prefix_)) {
      ShortenPrefix(name);
    }
    auto [it, inserted] = entries_.insert(Entry(AbbrevAt(name, prefix_.size()), std::move(item)));
    assert(inserted && "an item of this name is indexed already");
    return it->get();
  }

  // Removes `item` and frees it. REQUIRES: `item` is indexed.
  void Erase(const Item* item) {
    // By iterator: the name the search reads belongs to `item`.
    auto it = entries_.find(ProbeOf(item->name()));
    assert(it != entries_.end() && it->get() == item);
    entries_.erase(it);
  }

 private:
  // The 8 bytes of `name` from `at`, big-endian, zero-padded.
  static uint64_t AbbrevAt(absl::string_view name, size_t at) {
    uint64_t abbrev = 0;
    const size_t end = std::min(name.size(), at + 8);
    for (size_t i = at; i < at + 8; ++i) {
      abbrev = abbrev << 8 | (i < end ? static_cast<unsigned char>(name[i]) : 0u);
    }
    return abbrev;
  }

  Probe ProbeOf(absl::string_view name) const {
    if (!absl::StartsWith(name, prefix_)) return {name, 0, false};
    return {name, AbbrevAt(name, prefix_.size()), true};
  }

  // Makes the shared prefix the part of it that `name` starts with, and
  // abbreviates every entry again from there.
  void ShortenPrefix(absl::string_view name) {
    const size_t limit = std::min(name.size(), prefix_.size());
    size_t shared = 0;
    while (shared < limit && name[shared] == prefix_[shared]) ++shared;
    prefix_.resize(shared);
    for (const Entry& e : entries_) e.abbrev_ = AbbrevAt(e.get()->name(), shared);
  }

  absl::btree_set<Entry, Less> entries_;
  // What every indexed name starts with (once the index is empty, whatever
  // the next item inserted sets).
  std::string prefix_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_NAME_INDEX_H_

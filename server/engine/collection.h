// Collection: one named map of members with two orderings, by key and by
// deadline. Internal to the engine.
//
// A StoredMember is a run of bytes: a header (the key's and the value's size
// in a byte each when they are small, then the deadline) followed by the key
// and the value. It has no alignment: members lie back to back. A member of
// the large form (below) keeps its deadline whole in 6 bytes; one of the small
// form keeps it in 4, relative to the earliest deadline of its collection, so
// that a collection of 10 members of 16-byte keys and values takes 380 bytes
// (mimalloc's 384-byte class) and not 400 (its 448-byte class).
//
// A collection starts small: while it has up to kSmallMax members in up to
// kSmallMaxBytes bytes, they lie in one buffer, in key order, one after the
// other (as a Redis hash keeps a few fields in a listpack): no allocation and
// no pointer per member, and no index (a search reads the members in turn; the
// earliest deadline is kept beside the buffer). The collection that outgrows
// that moves its members into two indexes and keeps them until it is empty, as
// a Redis hash keeps its hash table once it outgrew its listpack: each member
// is then its own allocation, owned by the key index. The deadline index holds
// a pointer to the first member of each run, members next to each other in key
// order that share a deadline (members written together with one TTL, which
// is how a batch usually comes): (deadline, key) order is the runs in the
// order of their first members, each run read on in the key index. Members
// with deadlines of their own are runs of one, each in the deadline index, as
// every member was before runs. A Collection is likewise one allocation with
// its name after it.
//
// The small form holds deadlines up to 2^32 - 2 ms (49 days) after its
// earliest; a deadline further from the others moves the collection to the
// large form.
//
// Members of a small collection move whenever the buffer changes: a pointer
// to a member (Find, the pages) is valid only until the collection next
// changes.
//
// Not thread-safe: the owning engine shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_COLLECTION_H_
#define LAPSE_SERVER_ENGINE_COLLECTION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "server/base/deadline.h"

namespace lapse {

class StoredMember {
 public:
  struct Deleter {
    void operator()(StoredMember* m) const;
  };
  using Ptr = std::unique_ptr<StoredMember, Deleter>;

  // A member of the large form. REQUIRES: `deadline_ms` is kNoDeadlineMs or in
  // [kEarliestDeadlineMs, kLatestDeadlineMs] (server/base/deadline.h).
  static Ptr Create(absl::string_view key, absl::string_view value, int64_t deadline_ms);

  absl::string_view key() const { return {bytes() + key_at(), key_size()}; }
  absl::string_view value() const { return {bytes() + key_at() + key_size(), value_size()}; }
  bool has_deadline() const {
    return small() ? small_offset() != kNoOffset : large_deadline() != kNoLargeDeadline;
  }
  // The deadline, or kNoDeadlineMs. A member of the small form keeps it
  // relative to its collection's earliest deadline, `small_base_ms`
  // (Collection::DeadlineOf); a member of the large form ignores it.
  int64_t deadline_ms(int64_t small_base_ms) const {
    if (small()) {
      const uint32_t offset = small_offset();
      return offset == kNoOffset ? kNoDeadlineMs : small_base_ms + offset;
    }
    const uint64_t stored = large_deadline();
    return stored == kNoLargeDeadline ? kNoDeadlineMs
                                      : static_cast<int64_t>(stored) + kEarliestDeadlineMs;
  }

 private:
  friend class Collection;
  // The header: byte 0 the key's size in bits 0-6 and the form in bit 7 (set:
  // small); byte 1 the value's size; a size of at least kKeyEscape or
  // kValueEscape is that code, the size following in 32 bits after the
  // deadline, the key's first. Then the deadline: in the large form 48 bits,
  // the deadline less kEarliestDeadlineMs (all ones for none); in the small
  // form 32 bits, the deadline less the collection's earliest (all ones for
  // none). So a member of 16-byte key and value takes 38 bytes in a small
  // collection's buffer and 40 on its own. In memory only: in the machine's
  // byte order, unaligned.
  static constexpr uint32_t kKeyEscape = 0x7f;
  static constexpr uint32_t kValueEscape = 0xff;
  static constexpr uint8_t kSmallBit = 0x80;
  static constexpr uint64_t kNoLargeDeadline = (uint64_t{1} << 48) - 1;
  static constexpr uint32_t kNoOffset = UINT32_MAX;
  // The largest deadline offset the small form holds.
  static constexpr int64_t kMaxOffset = int64_t{kNoOffset} - 1;

  StoredMember() = default;

  // The bytes a member of these sizes takes in either form.
  static size_t SizeOf(bool small, size_t key_size, size_t value_size) {
    return 2 + (small ? 4 : 6) + (key_size < kKeyEscape ? 0 : 4) +
           (value_size < kValueEscape ? 0 : 4) + key_size + value_size;
  }
  // Writes a member at `at`, which has room for SizeOf(small, key, value)
  // bytes that overlap neither `key` nor `value`. `deadline` is the stored
  // code: EncodeLarge's, or the small form's offset.
  static StoredMember* Write(char* at, bool small, absl::string_view key, absl::string_view value,
                             uint64_t deadline);
  // Writes the header and the escaped sizes of such a member at `at`.
  // Returns where its key goes.
  static char* WriteHeader(char* at, bool small, size_t key_size, size_t value_size,
                           uint64_t deadline);
  static uint64_t EncodeLarge(int64_t deadline_ms);

  // Unaligned reads and writes, each one move on common machines.
  template <typename T>
  static T Load(const char* from) {
    T value;
    std::memcpy(&value, from, sizeof(value));
    return value;
  }
  template <typename T>
  static void Store(char* to, T value) {
    std::memcpy(to, &value, sizeof(value));
  }

  // A member is the bytes that start at its address, in the allocation it
  // was written into; the object itself declares none of them.
  const char* bytes() const { return reinterpret_cast<const char*>(this); }
  char* bytes() { return reinterpret_cast<char*>(this); }
  bool small() const { return (Load<uint8_t>(bytes()) & kSmallBit) != 0; }
  uint32_t key_code() const { return Load<uint8_t>(bytes()) & ~uint32_t{kSmallBit}; }
  uint32_t value_code() const { return Load<uint8_t>(bytes() + 1); }
  // Where the escaped sizes start.
  size_t sizes_at() const { return small() ? 6 : 8; }
  // Where the key starts.
  size_t key_at() const {
    return sizes_at() + (key_code() == kKeyEscape ? 4 : 0) + (value_code() == kValueEscape ? 4 : 0);
  }
  size_t key_size() const {
    return key_code() == kKeyEscape ? Load<uint32_t>(bytes() + sizes_at()) : key_code();
  }
  size_t value_size() const {
    if (value_code() != kValueEscape) return value_code();
    return Load<uint32_t>(bytes() + sizes_at() + (key_code() == kKeyEscape ? 4 : 0));
  }
  // The bytes this member takes.
  size_t size() const { return SizeOf(small(), key_size(), value_size()); }

  uint32_t small_offset() const { return Load<uint32_t>(bytes() + 2); }
  void set_small_offset(uint32_t offset) { Store<uint32_t>(bytes() + 2, offset); }
  uint64_t large_deadline() const {
    return Load<uint32_t>(bytes() + 2) | uint64_t{Load<uint16_t>(bytes() + 6)} << 32;
  }
  void set_large_deadline_ms(int64_t deadline_ms) {
    const uint64_t stored = EncodeLarge(deadline_ms);
    Store<uint32_t>(bytes() + 2, static_cast<uint32_t>(stored));
    Store<uint16_t>(bytes() + 6, static_cast<uint16_t>(stored >> 32));
  }
};

// A position in the deadline order: (deadline, key).
struct DeadlinePosition {
  int64_t deadline_ms;
  absl::string_view key;
};

class Collection {
 public:
  struct Deleter {
    void operator()(Collection* c) const;
  };
  using Ptr = std::unique_ptr<Collection, Deleter>;

  static Ptr Create(absl::string_view name);
  Collection(const Collection&) = delete;
  Collection& operator=(const Collection&) = delete;

  // The most members, and bytes of members, a collection keeps in its small
  // form (above). The bytes bound what an insert or erase moves in the buffer.
  static constexpr size_t kSmallMax = 16;
  static constexpr size_t kSmallMaxBytes = 4096;

  absl::string_view name() const { return {reinterpret_cast<const char*>(this + 1), name_size_}; }
  size_t size() const { return indexed_ ? indexed()->by_key.size() : small_count_; }
  bool empty() const { return size() == 0; }
  size_t expiring_count() const;
  // The deadline under which the shard's DeadlineQueue holds this collection,
  // or kNoDeadlineMs when it is not queued. Maintained by the engine.
  int64_t queued_deadline_ms() const { return queued_deadline_ms_; }
  void set_queued_deadline_ms(int64_t ms) { queued_deadline_ms_ = ms; }

  // The earliest member deadline, or kNoDeadlineMs.
  int64_t next_deadline_ms() const {
    if (!indexed_) return small_earliest_ms_;
    const auto& run_heads = indexed()->run_heads;
    return run_heads.empty() ? kNoDeadlineMs : DeadlineOf(**run_heads.begin());
  }
  // The deadline of `member`, one of this collection's (as Find returned it
  // since the collection last changed, or as a callback shows it), or
  // kNoDeadlineMs.
  int64_t DeadlineOf(const StoredMember& member) const {
    return member.deadline_ms(small_earliest_ms_);
  }

  // What a search for a key found: the member (nullptr when absent) and, in
  // the small form, the offset of the first member whose key is not below it,
  // where Put writes it without searching again. Valid until the collection
  // next changes (above).
  struct Place {
    const StoredMember* member = nullptr;
    size_t small_offset = 0;
  };
  Place Locate(absl::string_view key) const;
  // nullptr when absent. The pointer is valid until the collection next
  // changes (above).
  const StoredMember* Find(absl::string_view key) const { return Locate(key).member; }
  // Writes the member `key`: inserts it, or overwrites the value and deadline
  // of the member there, which `replacing` sees first. Returns whether it
  // inserted. One search either way, none in the small form when `place` is
  // what Locate(key) returned since the collection last changed.
  bool Put(absl::string_view key, absl::string_view value, int64_t deadline_ms,
           absl::FunctionRef<void(const StoredMember&)> replacing, const Place* place = nullptr);
  // The methods below take a member of this collection, as Find returned it
  // since the collection last changed.
  // Returns where the member is now: the small form moves every member when
  // the new deadline sends the collection to the large form, and none
  // otherwise.
  const StoredMember* SetDeadline(const StoredMember* member, int64_t deadline_ms);
  void Erase(const StoredMember* member);
  // Erases the members due at `now_ms` (deadline <= now_ms), up to `limit`,
  // in (deadline, key) order, calling `expire` with each before it is freed.
  // Returns how many it erased. In bulk: a collection whose every member is
  // due is freed whole, with no search per member; otherwise the key index
  // is searched only where the next due member does not follow the last one
  // erased in key order (members sharing one deadline do).
  size_t EraseDue(int64_t now_ms, size_t limit,
                  absl::FunctionRef<void(const StoredMember&)> expire);

  // The member with the earliest deadline, or nullptr when none has one.
  const StoredMember* EarliestExpiring() const;

  // Up to `limit` members after `after_key` (from the start when null), in
  // key order. Sets *more when members follow.
  std::vector<const StoredMember*> PageByKey(const absl::string_view* after_key, size_t limit,
                                             bool* more) const;
  // Up to `limit` members after `after` in (deadline, key) order, persistent
  // members last in key order. Sets *more when members follow.
  std::vector<const StoredMember*> PageByDeadline(const DeadlinePosition* after, size_t limit,
                                                  bool* more) const;

 private:
  struct KeyLess {
    using is_transparent = void;
    static absl::string_view KeyOf(const StoredMember::Ptr& m) { return m->key(); }
    static absl::string_view KeyOf(absl::string_view k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return KeyOf(a) < KeyOf(b);
    }
  };
  // Entries are member pointers, compared by the member's (deadline, key):
  // 8 bytes an entry instead of 16 with the deadline copied beside the
  // pointer. Reading a deadline follows the pointer; the common cases need
  // few reads (a new deadline is tried at the end first, the drain takes the
  // first entry). `small_base_ms` is the small form's base when it compares
  // members of the small form (the large form's b-tree leaves it unused).
  struct DeadlineLess {
    using is_transparent = void;
    // No default member initializer: g++ needs one of a nested class before
    // the enclosing class ends, and `Indexed` uses this one before that.
    DeadlineLess() : small_base_ms(kNoDeadlineMs) {}
    explicit DeadlineLess(int64_t base_ms) : small_base_ms(base_ms) {}
    int64_t small_base_ms;
    DeadlinePosition PosOf(const StoredMember* m) const {
      return {m->deadline_ms(small_base_ms), m->key()};
    }
    static DeadlinePosition PosOf(const DeadlinePosition& p) { return p; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const DeadlinePosition pa = PosOf(a), pb = PosOf(b);
      if (pa.deadline_ms != pb.deadline_ms) return pa.deadline_ms < pb.deadline_ms;
      return pa.key < pb.key;
    }
  };

  using KeyIndex = absl::btree_set<StoredMember::Ptr, KeyLess>;
  // The large form's indexes (above).
  struct Indexed {
    // Whether `next`, the member after `m` in key order, is in `m`'s run.
    static bool SameRun(const StoredMember& m, const StoredMember& next) {
      return m.has_deadline() && m.deadline_ms(0) == next.deadline_ms(0);
    }
    // Whether the member at `it` starts a run.
    bool StartsRun(KeyIndex::const_iterator it) const {
      return (*it)->has_deadline() && (it == by_key.begin() || !SameRun(**std::prev(it), **it));
    }
    // Makes the runs count the member at `it`, which has just come into
    // by_key or has a new deadline (after Unlink).
    void Link(KeyIndex::iterator it);
    // Makes the runs leave out the member at `it`, which is about to leave
    // by_key or change its deadline (then Link).
    void Unlink(KeyIndex::iterator it);
    // Starts or stops the run of `m` in run_heads.
    void SetStartsRun(const StoredMember* m, bool was, bool is);

    KeyIndex by_key;
    // The first member of each run.
    absl::btree_set<const StoredMember*, DeadlineLess> run_heads;
    // Members with a deadline.
    size_t expiring = 0;
  };

  Indexed* indexed() const { return static_cast<Indexed*>(storage_); }
  char* small() const { return static_cast<char*>(storage_); }
  // The small form's member at byte `offset` of the buffer.
  StoredMember* SmallAt(size_t offset) const {
    return reinterpret_cast<StoredMember*>(small() + offset);
  }
  // Calls `fn` with the small form's members in key order until it returns
  // true.
  template <typename Fn>
  void ForEachSmall(Fn fn) const {
    for (size_t offset = 0; offset < small_bytes_;) {
      const StoredMember* m = SmallAt(offset);
      if (fn(m)) return;
      offset += m->size();
    }
  }
  // The offset of the small form's first member whose key is not below `key`
  // (small_bytes_ when none).
  size_t SmallLowerBound(absl::string_view key) const;
  // Makes the `old_size` bytes of the buffer at `offset` `new_size` bytes,
  // moving what follows them; the bytes kept keep their content.
  void SmallResize(size_t offset, size_t old_size, size_t new_size);
  // Overwrites the value and deadline of the small form's member at `offset`.
  void SmallReplace(size_t offset, absl::string_view value, int64_t deadline_ms);
  // Makes the small form's base, small_earliest_ms_, fit a member's deadline
  // moving from `old_ms` to `new_ms` (kNoDeadlineMs: the member is added or
  // erased), re-encoding the offsets of the members other than `member`
  // (nullptr for one not yet in the buffer) when the base moves. Returns
  // false, changing nothing, when the deadlines would be too far apart for
  // the small form; then the caller writes `member`'s offset, SmallOffset.
  bool SmallPlaceDeadline(const StoredMember* member, int64_t old_ms, int64_t new_ms);
  // The earliest and the latest deadline of the small form's members other
  // than `except` (kNoDeadlineMs, and INT64_MIN for the latest, when none).
  std::pair<int64_t, int64_t> SmallSpanExcept(const StoredMember* except) const;
  // Makes `base_ms` the small form's base, re-encoding the offsets of the
  // members other than `except`.
  void SmallRebase(int64_t base_ms, const StoredMember* except);
  // The small form's stored offset of `deadline_ms` from the base.
  uint32_t SmallOffset(int64_t deadline_ms) const;

  // Moves the members of the small form into the indexes.
  void MakeIndexed();
  // Inserts into the large form, before `hint` when that is the place.
  void IndexedInsert(const KeyIndex::iterator& hint, absl::string_view key, absl::string_view value,
                     int64_t deadline_ms);
  // SetDeadline of the large form's member at `it`.
  void IndexedSetDeadline(KeyIndex::iterator it, int64_t deadline_ms);
  // Calls `fn` with the large form's members of the run starting at `it`,
  // in key order, until it returns true or the run ends.
  template <typename Fn>
  void ForEachInRun(KeyIndex::const_iterator it, Fn fn) const {
    const auto end = indexed()->by_key.end();
    const StoredMember* first = it->get();
    do {
      if (fn(it->get())) return;
      ++it;
    } while (it != end && Indexed::SameRun(*first, **it));
  }
  // EraseDue of each form.
  size_t SmallEraseDue(int64_t now_ms, size_t limit,
                       absl::FunctionRef<void(const StoredMember&)> expire);
  size_t IndexedEraseDue(int64_t now_ms, size_t limit,
                         absl::FunctionRef<void(const StoredMember&)> expire);
  // PageByDeadline's members with a deadline, of the large form.
  void IndexedPageByDeadline(const DeadlinePosition* after, size_t limit,
                             std::vector<const StoredMember*>* page, bool* more) const;

  explicit Collection(uint32_t name_size) : name_size_(name_size) {}
  ~Collection();

  int64_t queued_deadline_ms_ = kNoDeadlineMs;
  // The small form's earliest member deadline, or kNoDeadlineMs: the base of
  // its members' deadlines.
  int64_t small_earliest_ms_ = kNoDeadlineMs;
  // The small form's buffer (malloc'ed, exactly small_bytes_ long; null when
  // empty) or, when indexed_, the Indexed.
  void* storage_ = nullptr;
  const uint32_t name_size_;
  uint16_t small_bytes_ = 0;
  uint8_t small_count_ = 0;
  bool indexed_ = false;
};

static_assert(Collection::kSmallMaxBytes <= UINT16_MAX && Collection::kSmallMax <= UINT8_MAX,
              "the small form's sizes are kept in 16 and 8 bits");

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_COLLECTION_H_

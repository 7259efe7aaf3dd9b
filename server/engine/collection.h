// Collection: one named map of members with two orderings, by key and by
// deadline. Internal to the engine.
//
// A StoredMember is a single heap allocation: an 8-byte header (the deadline in
// 48 bits, the key's and the value's size in a byte each when they are below
// 255) followed by the key and the value, so a member with a 16-byte key and a
// 16-byte value takes 40 bytes. It costs that allocation plus one pointer in
// each index: the collection owns its members, the key index and the deadline
// index hold pointers to them and compare through them. A Collection is
// likewise one allocation with its name after it.
//
// A collection starts small: up to kSmallMax members are kept in one vector of
// member pointers in key order, one slot per member, with no deadline index
// (the earliest is kept by one comparison when a member is added or its
// deadline moves earlier, found by a scan of the vector after other changes), which
// saves the two indexes' nodes of a collection of a few members. The collection that grows past
// kSmallMax moves its members into the two indexes and keeps them until it is empty, as a Redis
// hash keeps its hash table once it outgrew its listpack.
//
// Not thread-safe: the owning engine shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_COLLECTION_H_
#define LAPSE_SERVER_ENGINE_COLLECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "server/base/coding.h"
#include "server/base/deadline.h"

namespace lapse {

class StoredMember {
 public:
  struct Deleter {
    void operator()(StoredMember* m) const;
  };
  using Ptr = std::unique_ptr<StoredMember, Deleter>;

  // REQUIRES: `deadline_ms` is kNoDeadlineMs or in [kEarliestDeadlineMs,
  // kLatestDeadlineMs] (server/base/deadline.h).
  static Ptr Create(absl::string_view key, absl::string_view value, int64_t deadline_ms);

  absl::string_view key() const { return {data() + sizes_bytes(), key_size()}; }
  absl::string_view value() const { return {data() + sizes_bytes() + key_size(), value_size()}; }
  int64_t deadline_ms() const {
    const uint64_t stored = header_ & kDeadlineMask;
    return stored == kDeadlineMask ? kNoDeadlineMs
                                   : static_cast<int64_t>(stored) + kEarliestDeadlineMs;
  }
  bool has_deadline() const { return (header_ & kDeadlineMask) != kDeadlineMask; }

 private:
  friend class Collection;
  // The header: bits 0-47 the deadline less kEarliestDeadlineMs (all ones for
  // none); bits 48-55 the key's size and bits 56-63 the value's, or
  // kSizeEscape when the size is at least that and follows the header as a
  // fixed32, the key's first.
  static constexpr uint64_t kDeadlineMask = (uint64_t{1} << 48) - 1;
  static constexpr uint32_t kSizeEscape = 0xff;
  static constexpr int kKeySizeShift = 48;
  static constexpr int kValueSizeShift = 56;

  explicit StoredMember(uint64_t header) : header_(header) {}

  static uint64_t EncodeDeadline(int64_t deadline_ms);
  void set_deadline_ms(int64_t deadline_ms) {
    header_ = (header_ & ~kDeadlineMask) | EncodeDeadline(deadline_ms);
  }
  uint32_t key_code() const { return (header_ >> kKeySizeShift) & 0xff; }
  uint32_t value_code() const { return static_cast<uint32_t>(header_ >> kValueSizeShift); }
  // Bytes of escaped sizes between the header and the key.
  size_t sizes_bytes() const {
    return (key_code() == kSizeEscape ? 4 : 0) + (value_code() == kSizeEscape ? 4 : 0);
  }
  size_t key_size() const { return key_code() == kSizeEscape ? DecodeFixed32(data()) : key_code(); }
  size_t value_size() const {
    if (value_code() != kSizeEscape) return value_code();
    return DecodeFixed32(data() + (key_code() == kSizeEscape ? 4 : 0));
  }

  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  char* data() { return reinterpret_cast<char*>(this + 1); }

  uint64_t header_;
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

  // Members a collection keeps in its small form (above).
  static constexpr size_t kSmallMax = 16;

  absl::string_view name() const { return {reinterpret_cast<const char*>(this + 1), name_size_}; }
  size_t size() const { return indexed_ ? indexed_->by_key.size() : small_.size(); }
  bool empty() const { return size() == 0; }
  size_t expiring_count() const;
  // The deadline under which the shard's DeadlineQueue holds this collection,
  // or kNoDeadlineMs when it is not queued. Maintained by the engine.
  int64_t queued_deadline_ms() const { return queued_deadline_ms_; }
  void set_queued_deadline_ms(int64_t ms) { queued_deadline_ms_ = ms; }

  // The earliest member deadline, or kNoDeadlineMs.
  int64_t next_deadline_ms() const {
    const StoredMember* m = EarliestExpiring();
    return m == nullptr ? kNoDeadlineMs : m->deadline_ms();
  }

  // nullptr when absent. The pointer is valid until the member is changed or
  // erased.
  const StoredMember* Find(absl::string_view key) const;
  // Writes the member `key`: inserts it, or overwrites the value and deadline
  // of the member there, which `replacing` sees first. Returns whether it
  // inserted.
  bool Put(absl::string_view key, absl::string_view value, int64_t deadline_ms,
           absl::FunctionRef<void(const StoredMember&)> replacing);
  // REQUIRES: `key` is absent.
  void Insert(absl::string_view key, absl::string_view value, int64_t deadline_ms);
  // The methods below take a member of this collection, as Find returned it.
  // Overwrites the member's value and deadline.
  void Replace(const StoredMember* member, absl::string_view value, int64_t deadline_ms);
  void SetDeadline(const StoredMember* member, int64_t deadline_ms);
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
  const StoredMember* EarliestExpiring() const {
    if (!indexed_) return small_earliest_;
    return indexed_->by_deadline.empty() ? nullptr : *indexed_->by_deadline.begin();
  }

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
  // first entry).
  struct DeadlineLess {
    using is_transparent = void;
    static DeadlinePosition PosOf(const StoredMember* m) { return {m->deadline_ms(), m->key()}; }
    static DeadlinePosition PosOf(const DeadlinePosition& p) { return p; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const DeadlinePosition pa = PosOf(a), pb = PosOf(b);
      if (pa.deadline_ms != pb.deadline_ms) return pa.deadline_ms < pb.deadline_ms;
      return pa.key < pb.key;
    }
  };

  // The large form's indexes.
  struct Indexed {
    absl::btree_set<StoredMember::Ptr, KeyLess> by_key;
    // Only members with a deadline.
    absl::btree_set<const StoredMember*, DeadlineLess> by_deadline;
  };
  using SmallMembers = std::vector<StoredMember::Ptr>;

  void Index(const StoredMember* member);
  void Unindex(const StoredMember* member);
  // The small form's position of `key`, or where it would go.
  SmallMembers::iterator SmallLowerBound(absl::string_view key);
  SmallMembers::const_iterator SmallLowerBound(absl::string_view key) const;
  // Sets small_earliest_ after a change of the small form.
  void FindSmallEarliest();
  // Moves the members of the small form into the indexes.
  void MakeIndexed();
  // EraseDue of each form.
  size_t SmallEraseDue(int64_t now_ms, size_t limit,
                       absl::FunctionRef<void(const StoredMember&)> expire);
  size_t IndexedEraseDue(int64_t now_ms, size_t limit,
                         absl::FunctionRef<void(const StoredMember&)> expire);

  explicit Collection(uint32_t name_size) : name_size_(name_size) {}

  const uint32_t name_size_;
  int64_t queued_deadline_ms_ = kNoDeadlineMs;
  // The small form, in key order, while indexed_ is null.
  SmallMembers small_;
  // The small form's member with the earliest (deadline, key); nullptr when
  // none has a deadline.
  const StoredMember* small_earliest_ = nullptr;
  // The large form; null while the collection is small.
  std::unique_ptr<Indexed> indexed_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_COLLECTION_H_

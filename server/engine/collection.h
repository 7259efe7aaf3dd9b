// Collection: one named map of members with two orderings, by key and by
// deadline. Internal to the engine.
//
// A StoredMember is a single heap allocation holding its deadline, key and value, so
// a member costs one allocation plus one slot in each index. The collection
// owns its members; the deadline index holds non-owning pointers to them.
//
// Not thread-safe: the owning engine shard's lock protects it.
#ifndef LAPSE_SERVER_ENGINE_COLLECTION_H_
#define LAPSE_SERVER_ENGINE_COLLECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/strings/string_view.h"
#include "server/base/deadline.h"

namespace lapse {

class StoredMember {
 public:
  struct Deleter {
    void operator()(StoredMember* m) const;
  };
  using Ptr = std::unique_ptr<StoredMember, Deleter>;

  static Ptr Create(absl::string_view key, absl::string_view value, int64_t deadline_ms);

  absl::string_view key() const { return {data(), key_size_}; }
  absl::string_view value() const { return {data() + key_size_, value_size_}; }
  int64_t deadline_ms() const { return deadline_ms_; }
  bool has_deadline() const { return deadline_ms_ != kNoDeadlineMs; }

 private:
  friend class Collection;
  StoredMember(int64_t deadline_ms, uint32_t key_size, uint32_t value_size)
      : deadline_ms_(deadline_ms), key_size_(key_size), value_size_(value_size) {}

  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  char* data() { return reinterpret_cast<char*>(this + 1); }

  int64_t deadline_ms_;
  uint32_t key_size_;
  uint32_t value_size_;
};

// A position in the deadline order: (deadline, key).
struct DeadlinePosition {
  int64_t deadline_ms;
  absl::string_view key;
};

class Collection {
 public:
  explicit Collection(std::string name) : name_(std::move(name)) {}
  Collection(const Collection&) = delete;
  Collection& operator=(const Collection&) = delete;

  const std::string& name() const { return name_; }
  size_t size() const { return by_key_.size(); }
  bool empty() const { return by_key_.empty(); }
  size_t expiring_count() const { return by_deadline_.size(); }
  // The deadline under which the shard's DeadlineQueue holds this collection,
  // or kNoDeadlineMs when it is not queued. Maintained by the engine.
  int64_t queued_deadline_ms() const { return queued_deadline_ms_; }
  void set_queued_deadline_ms(int64_t ms) { queued_deadline_ms_ = ms; }

  // The earliest member deadline, or kNoDeadlineMs.
  int64_t next_deadline_ms() const {
    return by_deadline_.empty() ? kNoDeadlineMs : by_deadline_.begin()->deadline_ms;
  }

  // nullptr when absent. The pointer is valid until the member is changed or
  // erased.
  const StoredMember* Find(absl::string_view key) const;
  // REQUIRES: `key` is absent.
  void Insert(absl::string_view key, absl::string_view value, int64_t deadline_ms);
  // The methods below take a member of this collection, as Find returned it.
  // Overwrites the member's value and deadline.
  void Replace(const StoredMember* member, absl::string_view value, int64_t deadline_ms);
  void SetDeadline(const StoredMember* member, int64_t deadline_ms);
  void Erase(const StoredMember* member);

  // The member with the earliest deadline, or nullptr when none has one.
  const StoredMember* EarliestExpiring() const {
    return by_deadline_.empty() ? nullptr : by_deadline_.begin()->member;
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
  struct DeadlineEntry {
    int64_t deadline_ms;
    const StoredMember* member;
  };
  struct DeadlineLess {
    using is_transparent = void;
    static DeadlinePosition PosOf(const DeadlineEntry& e) {
      return {e.deadline_ms, e.member->key()};
    }
    static DeadlinePosition PosOf(const DeadlinePosition& p) { return p; }
    static int64_t DeadlineOf(const DeadlineEntry& e) { return e.deadline_ms; }
    static int64_t DeadlineOf(const DeadlinePosition& p) { return p.deadline_ms; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      // Keys are compared only on a tie: reading one follows a pointer.
      const int64_t da = DeadlineOf(a), db = DeadlineOf(b);
      if (da != db) return da < db;
      return PosOf(a).key < PosOf(b).key;
    }
  };

  void Index(const StoredMember* member);
  void Unindex(const StoredMember* member);

  const std::string name_;
  int64_t queued_deadline_ms_ = kNoDeadlineMs;
  absl::btree_set<StoredMember::Ptr, KeyLess> by_key_;
  // Only members with a deadline.
  absl::btree_set<DeadlineEntry, DeadlineLess> by_deadline_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_COLLECTION_H_

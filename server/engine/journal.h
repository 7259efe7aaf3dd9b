// Journal: how the engine reports its changes to a durable store.
//
// Every operation that changes state encodes its changes, in order, into one
// batch (BatchEncoder) while it holds its shard lock, and commits the batch to
// the Journal before releasing the lock. Records state *results*, not
// requests: a put records the member as written (value and absolute
// deadline), an expiry records the member that expired and its event. Replay
// is therefore deterministic and idempotent: applying a record sets state,
// whatever the state was before, which is what lets a snapshot be taken while
// writes go on (storage/snapshot.h).
//
// Batch layout (little-endian):
//   first_event_sequence u64 | record_count u32 | record*
//   record: type u8 | fields by type (strings as varint32 length + bytes,
//           numbers as fixed 64-bit)
// The kExpiry records of a batch take consecutive sequences starting at
// first_event_sequence; kEvent records carry their own.
#ifndef LAPSE_SERVER_ENGINE_JOURNAL_H_
#define LAPSE_SERVER_ENGINE_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/base/deadline.h"
#include "server/engine/expiry_event.h"

namespace lapse {

enum class RecordType : uint8_t {
  kPut = 1,               // collection, key, value, deadline_ms
  kRemove = 2,            // collection, key
  kSetDeadline = 3,       // collection, key, deadline_ms
  kDeleteCollection = 4,  // collection
  kExpiry = 5,            // collection, key, value, deadline_ms, expired_at_ns
  kEvent = 6,             // sequence, collection, key, value, deadline_ms, expired_at_ns
  kNextSequence = 7,      // sequence: the next event sequence when a run started
  // Consumer groups (consumer_groups.h); an event is written as in kEvent.
  kGroupCreate = 8,       // group, options, position
  kGroupDelete = 9,       // group
  kGroupReset = 10,       // group, position: pending events dropped
  kGroupPosition = 11,    // group, position
  kGroupEvent = 12,       // group, event, delivery_count, consumer, at_ms: a pending event
  kGroupLease = 13,       // group, sequence, delivery_count, consumer, at_ms
  kGroupAck = 14,         // group, sequence: no longer pending
  kGroupDeadLetter = 15,  // group, event, delivery_count, consumer, at_ms
};

// Whether records of `type` are a consumer group's, not the engine's.
inline bool IsGroupRecord(RecordType type) {
  return type >= RecordType::kGroupCreate && type <= RecordType::kGroupDeadLetter;
}

// One decoded record. The views point into the batch being decoded.
struct JournalRecord {
  RecordType type;
  absl::string_view collection;
  absl::string_view key;
  absl::string_view value;
  // kPut, kSetDeadline: the member's deadline (kNoDeadlineMs for none).
  // kExpiry, kEvent: the deadline the member had.
  int64_t deadline_ms = 0;
  // kExpiry, kEvent; kNextSequence: the next sequence.
  uint64_t sequence = 0;
  int64_t expired_at_ns = 0;

  // Consumer-group records; kGroupEvent and kGroupDeadLetter carry their
  // event in the fields above, as kEvent does.
  absl::string_view group;
  absl::string_view consumer;
  // kGroupCreate: ConsumerGroupOptions as ConsumerGroups encodes them.
  absl::string_view options;
  uint64_t position = 0;
  uint32_t delivery_count = 0;
  // kGroupEvent, kGroupLease: the lease deadline, kNoDeadlineMs while the
  // event awaits redelivery. kGroupDeadLetter: when it was dead-lettered.
  int64_t at_ms = 0;
};

// The event a kEvent, kGroupEvent or kGroupDeadLetter record carries.
ExpiryEvent EventOf(const JournalRecord& record);
// Sets the event fields of `record` to `event`'s; the views point into
// `event`.
void SetEvent(const ExpiryEvent& event, JournalRecord* record);

class BatchEncoder {
 public:
  // Encodes into a buffer of its own.
  BatchEncoder();
  // Encodes into `*buffer`, overwriting what it holds. A buffer kept from
  // one encoder to the next keeps its memory, so that encoding a batch no
  // larger than the ones before allocates nothing. The buffer's size is the
  // room it offers, not the batch's: the encoder writes records in place and
  // grows the buffer only when they go past its end, so that the bytes of a
  // record are written once (growing a string zero-fills what it adds).
  // `buffer` must outlive the encoder and the views Finish returns, and have
  // no other user meanwhile.
  explicit BatchEncoder(std::string* buffer);
  // Not copied or moved: it may point at its own buffer.
  BatchEncoder(const BatchEncoder&) = delete;
  BatchEncoder& operator=(const BatchEncoder&) = delete;

  void Put(absl::string_view collection, absl::string_view key, absl::string_view value,
           int64_t deadline_ms);
  void Remove(absl::string_view collection, absl::string_view key);
  void SetDeadline(absl::string_view collection, absl::string_view key, int64_t deadline_ms);
  void DeleteCollection(absl::string_view collection);
  // Its sequence is first_event_sequence + the number of kExpiry records
  // before it in the batch.
  void Expiry(absl::string_view collection, absl::string_view key, absl::string_view value,
              int64_t deadline_ms, int64_t expired_at_ns);
  void Event(const ExpiryEvent& event);
  // Records where the sequence counter stands, so that a restart continues
  // from it even when no event has been appended yet.
  void NextSequence(uint64_t sequence);
  // A consumer-group record (IsGroupRecord(record.type)), with the fields
  // its type lists.
  void GroupRecord(const JournalRecord& record);

  // Makes room for `bytes` more of records, so that a batch of many records
  // whose size is known is not grown record by record.
  void Reserve(size_t bytes);

  bool empty() const { return count_ == 0; }
  uint32_t count() const { return count_; }
  // Bytes encoded so far.
  size_t size() const;

  // The finished batch: a view of the buffer, valid until the encoder's next
  // record (or Reserve) or its destruction. Leaves the encoder empty: the
  // next record starts a new batch in the same buffer.
  absl::string_view Finish(uint64_t first_event_sequence);

 private:
  // Starts a new batch, down to its header, if the last one was finished.
  void Open();
  // Appends a record of `type` with `size` bytes of fields, counted, and
  // returns where its fields go. Records are sized first and written in
  // place: appending them field by field grew a batch of one small record
  // several times, an allocation and a copy each.
  char* Extend(RecordType type, size_t size);

  std::string own_;
  std::string* const buffer_;
  // The batch is the first size_ bytes of *buffer_.
  size_t size_;
  uint32_t count_ = 0;
  // Finish ended the batch in buffer_: the next record starts a new one.
  bool finished_ = false;
};

// Calls `fn` for each record of `batch`, in order, stopping at the first
// error `fn` returns. DATA_LOSS when the batch is malformed.
absl::Status DecodeBatch(absl::string_view batch,
                         const std::function<absl::Status(const JournalRecord&)>& fn);

// Names one committed batch, for the store to tell when it is durable (or
// that it failed). Increases with every commit; 0 names none.
using CommitTicket = uint64_t;

class Journal {
 public:
  virtual ~Journal() = default;

  // Takes one operation's finished batch and its undo: the records that put
  // back what the batch changed, to be applied in reverse order (the engine's
  // RollBack does) if the batch cannot be made durable. `last_event_sequence`
  // is the sequence of the batch's last kExpiry record, 0 when it has none.
  // Both are views valid for the call only: the journal copies what it keeps.
  // Called under a shard lock (ConsumerGroups: under the groups' lock), in
  // the order the operations happened on that shard, only while status() is
  // OK. Must not block on I/O.
  virtual CommitTicket Commit(absl::string_view batch, absl::string_view undo,
                              uint64_t last_event_sequence) = 0;

  // OK while changes can be recorded; otherwise why not, e.g.
  // RESOURCE_EXHAUSTED while the disk is full (the engine then refuses
  // writes, and reads that would have to expire members). It turns from OK to
  // an error only inside Engine::RollBack, while every shard lock is held
  // (and, with consumer groups, inside ConsumerGroups::RollBack, under the
  // groups' lock), so it cannot change while an operation holds its lock. It may turn OK
  // again at any time.
  virtual absl::Status status() const = 0;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_JOURNAL_H_

// RedisEventSource: the EventSource (server/engine/event_source.h) of the
// Redis Cluster store. It reads each partition's event stream once and serves
// every watcher of this lapsed replica from one local buffer.
//
//   absl::StatusOr<std::unique_ptr<RedisEventSource>> source =
//       RedisEventSource::Open(&router, {.store_id = id, .tags = tags, .on_readable = wake});
//   (*source)->Advance(partition, delivered);  // on "delivered <s>" from lapse:{T}:wake
//
// Reading. Partition p's events are the entries "<sequence>-0" of the stream
// lapse:{T}:events (docs/redis-cluster.md). Advance(p, d) says that p's
// delivery watermark (lapse:{T}:delivered) is at least d; the source then
// reads p's stream from its cursor up to d with XRANGE, in batches of
// read_batch entries, by asynchronous calls answered on the router's thread,
// and appends what it read to its buffer, where readers see it. Nothing above
// a watermark handed to Advance is ever read, so no watcher sees an event
// that a failover could take back. Open reads every partition's watermark and
// its stream's first entry, and starts each partition's cursor at most
// max_events / partitions events before its watermark (never before the
// stream's first entry), so a new replica starts with the recent history.
// A read that fails is given up; the partition is read again on its next
// Advance.
//
// The buffer is an EventFeed: local sequences, one merged order, retention by
// max_events and max_bytes. Each partition's events keep their partition
// order in it; events of different partitions are interleaved in the order
// this replica read them, which differs between replicas. Local sequences are
// spaced kPositionSpacing apart (an event's sequence is a multiple of it): the
// positions between two events are a reader's cursor that resumed from a
// token of another replica (below).
//
// Resume tokens hold, per partition, the last partition sequence examined.
// ResumeTokenAfter(position) is that vector at the position. PositionOfToken
// maps a vector T back:
// - a position whose vector is exactly T (any token this replica made, while
//   retained) is that position;
// - otherwise (a token of another replica, whose interleaving differs, or
//   one ahead of what this replica has read) the reader starts at the last
//   position whose vector is <= T in every partition, and skips the events it
//   already saw (partition p's sequences <= T[p]) until its vector passes T:
//   no gap, no duplicate; a partition ahead here is read when this replica
//   reads that far. Such a cursor lies between two events' sequences and
//   holds one of kPositionSpacing - 2 slots of T's until the buffer has
//   discarded every position before T; with every slot taken, PositionOfToken
//   answers UNAVAILABLE.
// - a partition position this replica no longer holds (before its buffer, or
//   trimmed from the stream by MAXLEN) is OUT_OF_RANGE naming the partition
//   and the sequences lost; a token of another store OUT_OF_RANGE naming both
//   ids.
// A bare position (CheckPosition, Read) past the newest event is OUT_OF_RANGE
// "beyond the newest event"; one between two events' sequences that no
// resumed cursor holds, "belongs to another store, or to another lapsed
// replica" — as the embedded store answers a sequence older than its first.
// An entry missing from a stream when the source reads it (trimmed by MAXLEN
// before this replica read it) is a gap: a reader that reaches it gets
// OUT_OF_RANGE naming the partition and sequences, never a silent gap.
//
// Thread safety: every method may be called from many threads at once.
// on_readable runs on the router's thread, outside the source's lock. The
// router must outlive the source; the destructor waits for the reads in
// flight to be answered.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REDIS_EVENT_SOURCE_H_
#define LAPSE_SERVER_STORAGE_REDIS_REDIS_EVENT_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/base/mutex.h"
#include "server/engine/event_feed.h"
#include "server/engine/event_source.h"
#include "server/storage/redis/cluster_router.h"

namespace lapse::redis {

struct RedisEventSourceOptions {
  StoreId store_id;
  // Partition p's hash tag is tags[p] (RedisClusterStore::TagOf).
  std::vector<std::string> tags;
  // The local buffer's retention.
  size_t max_events = 1'000'000;
  size_t max_bytes = size_t{256} << 20;
  // Stream entries per XRANGE.
  size_t read_batch = 1000;
  // Told of the newest readable sequence whenever a read made events
  // readable; may be empty.
  EventsReadableListener on_readable;
  // Every event as it enters the local buffer (EventFeed::Options::
  // on_append), for metrics; may be empty.
  std::function<void(const ExpiryEventView&)> on_append;
};

class RedisEventSource final : public EventSource {
 public:
  // The distance between two consecutive events' local sequences.
  static constexpr uint64_t kPositionSpacing = uint64_t{1} << 16;

  // Reads every partition's watermark and its stream's first entry, then
  // starts reading. Blocks for up to the router's retry budget: call it at
  // start-up. `router` is not owned.
  static absl::StatusOr<std::unique_ptr<RedisEventSource>> Open(ClusterRouter* router,
                                                                RedisEventSourceOptions options);
  ~RedisEventSource() override;
  RedisEventSource(const RedisEventSource&) = delete;
  RedisEventSource& operator=(const RedisEventSource&) = delete;

  // Partition `partition`'s delivery watermark is at least `delivered`: read
  // its stream up to there. Cheap, never blocks; an out-of-range partition
  // is ignored.
  void Advance(int partition, uint64_t delivered);

  // Calls `then` once `partition` has been read up to `sequence` (at once if
  // it has been), or once the reads Advance started for it end short of it
  // (a failed read; the rest is read on a later Advance) or the source
  // stops. On the router's thread, or on the caller's when it can be called
  // at once; never under the source's lock. Call Advance(partition, s >=
  // sequence) first.
  void WhenRead(int partition, uint64_t sequence, absl::AnyInvocable<void() &&> then);

  // The last sequence of `partition` read into the buffer (or found trimmed).
  uint64_t read_sequence(int partition) const;
  // What the local buffer holds.
  EventFeed::Retained retained() const;

  // EventSource.
  uint64_t last_sequence() const override;
  uint64_t oldest_retained_sequence() const override;
  StoreId store_id() const override;
  absl::Status CheckPosition(uint64_t after) const override;
  std::string ResumeTokenAfter(uint64_t examined) const override;
  absl::StatusOr<uint64_t> PositionOfToken(absl::string_view token) const override;
  absl::StatusOr<EventBatch> Read(uint64_t after, const EventFilter& filter,
                                  const ReadLimits& limits) const override;

 private:
  struct Partition;
  struct Gap;
  struct Cursor;

  RedisEventSource(ClusterRouter* router, RedisEventSourceOptions options);

  // Sends partition p's next XRANGE. REQUIRES: its read is marked in flight.
  void SendRead(int p, uint64_t from, uint64_t to);
  void OnRead(int p, uint64_t from, absl::StatusOr<RedisReply> reply);
  // Takes partition p's WhenRead callbacks that are due: those its reads
  // reached, or all of them once its reads have ended.
  std::vector<absl::AnyInvocable<void() &&>> DueWaitersLocked(size_t p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the index entries of events the feed no longer retains.
  void TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Partition p's last examined sequence at local event index n.
  uint64_t ExaminedLocked(size_t p, uint64_t n) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Decodes and checks a position (as CheckPosition).
  absl::StatusOr<Cursor> CursorLocked(uint64_t position) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  ClusterRouter* const router_;
  const RedisEventSourceOptions options_;
  // The buffer; its sequences are local event indexes (1, 2, ...), exposed
  // multiplied by kPositionSpacing. Appended to only under mu_.
  EventFeed feed_;

  // State below is protected by mu_.
  mutable Mutex mu_;
  CondVar reads_done_;
  std::vector<Partition> partitions_ ABSL_GUARDED_BY(mu_);
  // Of each buffered event (feed index front, front + 1, ...): its partition
  // and its partition sequence.
  std::deque<uint32_t> origins_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> sequences_ ABSL_GUARDED_BY(mu_);
  // Entries found missing from streams, oldest first.
  std::deque<Gap> gaps_ ABSL_GUARDED_BY(mu_);
  // Token vectors of cursors that resumed between events, by slot.
  mutable absl::flat_hash_map<uint64_t, std::vector<uint64_t>> floors_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t next_slot_ ABSL_GUARDED_BY(mu_) = 1;
  size_t reads_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REDIS_EVENT_SOURCE_H_

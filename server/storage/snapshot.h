// Snapshot: a compact image of the store, so recovery need not replay the
// whole history. DIR/snapshot-<LSN>.snap holds every member, the retained
// event feed and the next event sequence; recovery loads it and replays the
// write-ahead log from LSN on.
//
// A snapshot is taken while writes go on ("fuzzy"): the engine is scanned a
// chunk at a time, one shard lock held per chunk, so no write waits more than
// one chunk. A member changed during the scan may appear in either state,
// which is harmless: its change is in the log at an LSN >= the snapshot's,
// and replaying a record sets state whatever it was (journal.h).
//
// File layout: frames (frame.h) numbered from 0.
//   0:      "lapse-snapshot-1" | replay_from_lsn u64
//   1..n-1: batches (journal.h) of kPut records, then of kEvent records,
//           then of the consumer groups' records (ConsumerGroups::
//           ForEachStateRecord)
//   n:      "end" | members u64 | events u64 | next_event_sequence u64
//           [| group_records u64: absent in snapshots from before consumer
//           groups, which have none]
// The groups' state is copied under their lock, then written.
// Written as a files::AtomicFile (under snapshot-<LSN>.snap.tmp until
// complete), then read back whole before it counts as taken.
#ifndef LAPSE_SERVER_STORAGE_SNAPSHOT_H_
#define LAPSE_SERVER_STORAGE_SNAPSHOT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/consumer_groups.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"
#include "server/engine/journal.h"

namespace lapse {

struct SnapshotStats {
  uint64_t members = 0;
  uint64_t events = 0;
  uint64_t group_records = 0;
  uint64_t bytes = 0;
  absl::Duration took;
  // The longest a shard lock was held for the scan: the longest any write
  // could have waited for the snapshot.
  absl::Duration longest_lock_hold;
};

struct SnapshotContents {
  uint64_t replay_from_lsn = 0;
  uint64_t next_event_sequence = 0;
  uint64_t members = 0;
  uint64_t events = 0;
  uint64_t group_records = 0;
  uint64_t bytes = 0;
};

std::string SnapshotName(uint64_t replay_from_lsn);
bool ParseSnapshotName(absl::string_view name, uint64_t* replay_from_lsn);
// Whether `name` is the temporary file of SnapshotName(*replay_from_lsn):
// what a snapshot cut short by a crash leaves.
bool ParseSnapshotTempName(absl::string_view name, uint64_t* replay_from_lsn);

// Writes DIR/snapshot-<replay_from_lsn>.snap from `engine`, `log` and
// `groups` (none when null), then
// reads it back whole (every frame's checksum, every record, the footer's
// counts); a file that does not read back is deleted and its DATA_LOSS
// returned. A failed write leaves no temporary file. Every event of a batch
// with LSN < replay_from_lsn must already be visible in `log`.
// `before_publish`, when given, runs once the contents are written and
// fsynced, before the file takes its name: an error from it is returned and
// leaves no file, so a crash can never find a snapshot it refused (the
// durable store refuses one that caught a change whose log write then
// failed).
absl::StatusOr<SnapshotStats> WriteSnapshot(
    const std::string& dir, uint64_t replay_from_lsn, Engine* engine, const EventFeed& log,
    const ConsumerGroups* groups, const std::function<absl::Status()>& before_publish = nullptr);

// Reads a snapshot, a piece at a time. The whole file is checked first;
// only then is `fn`, when not empty, called for each kPut, kEvent and group
// record,
// so a damaged snapshot reaches `fn` not at all. DATA_LOSS naming the file
// and offset when it is damaged, incomplete or unreadable; INTERNAL when it
// fails the second reading, after `fn` has seen part of it.
absl::StatusOr<SnapshotContents> LoadSnapshot(const std::string& path,
                                              const std::function<void(const JournalRecord&)>& fn);

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_SNAPSHOT_H_

// Wal: the write-ahead log. Each engine batch (journal.h) becomes one frame
// (frame.h) with the next log sequence number (LSN), appended to the current
// segment file DIR/wal-<first LSN>.log.
//
//   auto wal = lapse::Wal::Open({.dir = dir, .fsync = FsyncPolicy::kAlways}, next_lsn);
//   (*wal)->Append(std::move(batch), last_event_sequence);   // never blocks on I/O
//   (*wal)->WhenDurable([](absl::Status s) { /* answer the RPC */ });
//
// One flusher thread writes whatever has been appended since its last write
// in one write() call: concurrent writers share a write and, with
// FsyncPolicy::kAlways, one fdatasync (group commit). A batch is *durable*
// once written (kEverySecond, kNever: it survives the process being killed)
// or once fsynced (kAlways: it survives the machine failing too). kEverySecond
// fsyncs at most a second after a write, like Redis' appendfsync everysec.
// Options::on_durable hears how far the expiry events of durable batches go,
// so that the server shows an event to watchers only once it is durable.
//
// After a write error the log fails for good: status() turns UNAVAILABLE and
// every waiter is told.
//
// Thread-safe.
#ifndef LAPSE_SERVER_STORAGE_WAL_H_
#define LAPSE_SERVER_STORAGE_WAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse {

enum class FsyncPolicy { kAlways, kEverySecond, kNever };

// "always", "everysec" or "never".
absl::StatusOr<FsyncPolicy> ParseFsyncPolicy(absl::string_view name);

// The flusher's two kinds of I/O, timed for Options::on_io.
enum class WalIo { kWrite, kFsync };
using WalIoListener = std::function<void(WalIo io, absl::Duration took)>;

struct WalStats {
  uint64_t batches_written = 0;
  uint64_t writes = 0;
  uint64_t fsyncs = 0;
  uint64_t bytes_written = 0;
  // The longest time written data waited for its fsync: what a machine
  // failure could lose under kEverySecond.
  absl::Duration longest_unsynced = absl::ZeroDuration();
};

class Wal {
 public:
  struct Options {
    std::string dir;
    FsyncPolicy fsync = FsyncPolicy::kEverySecond;
    // A segment past this size is closed and a new one started.
    size_t segment_bytes = size_t{64} << 20;
    // Called with the highest expiry event sequence of the batches durable so
    // far (see Append), after each write or fsync once any batch has carried
    // an event: never decreasing, possibly repeated. Runs on the flusher
    // thread, one call at a time, before anyone can learn that those batches
    // are durable (WhenDurable, AwaitDurable, Rotate); must not block, as
    // every waiting writer waits for it. May be empty.
    std::function<void(uint64_t last_event_sequence)> on_durable = nullptr;
    // Told how long each successful write() and fdatasync() took, on the
    // flusher thread; must be cheap. May be empty.
    WalIoListener on_io = nullptr;
  };

  // Starts a new segment whose first batch will get `next_lsn`, and the
  // flusher thread.
  static absl::StatusOr<std::unique_ptr<Wal>> Open(const Options& options, uint64_t next_lsn);
  // Writes and fsyncs what is pending, then stops the flusher.
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Queues a batch under the next LSN. `last_event_sequence` is the sequence
  // of the batch's last expiry event, 0 when it has none (see on_durable).
  // Never blocks on I/O; dropped once the log has failed.
  void Append(std::string batch, uint64_t last_event_sequence);

  // Calls `done` once every batch appended before this call is durable, or
  // with the error if the log fails first. Runs `done` on the flusher thread,
  // or right away when there is nothing to wait for.
  void WhenDurable(std::function<void(absl::Status)> done);

  // Blocks until every batch appended before the call is durable; the error
  // if the log fails first. For threads that may block (snapshots, tests,
  // tools), never for a gRPC thread.
  absl::Status AwaitDurable();

  // OK, or UNAVAILABLE once a write or fsync has failed.
  absl::Status status() const;

  // Ends the current segment: batches appended after this call go to a new
  // one. Returns the first LSN of the new segment once the switch is on disk.
  absl::StatusOr<uint64_t> Rotate();

  // Bytes written since the last Rotate (or Open).
  uint64_t bytes_since_rotate() const;
  WalStats stats() const;

  static std::string SegmentName(uint64_t first_lsn);
  static bool ParseSegmentName(absl::string_view name, uint64_t* first_lsn);

 private:
  Wal(const Options& options, uint64_t next_lsn);
  absl::Status OpenSegment(uint64_t first_lsn);
  void Run();
  absl::Status WriteOut(absl::string_view data);
  absl::Status SyncNow();
  void Fail(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;

  // Owned by the flusher thread (and by Open before it starts).
  int fd_ = -1;
  std::string segment_path_;
  uint64_t segment_size_ = 0;
  absl::Time unsynced_since_ = absl::InfiniteFuture();

  // State below is protected by mu_.
  mutable Mutex mu_;
  CondVar work_cv_;
  CondVar rotated_cv_;
  std::string pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lsn_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_event_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // The last LSN durable under the policy.
  uint64_t durable_lsn_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<std::function<void(absl::Status)>>> waiters_ ABSL_GUARDED_BY(mu_);
  // A requested rotation: the offset in pending_ where the new segment
  // starts, and its first LSN.
  bool rotate_requested_ ABSL_GUARDED_BY(mu_) = false;
  size_t rotate_offset_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rotate_lsn_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rotations_done_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_since_rotate_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  WalStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread flusher_;
};

struct WalReplayResult {
  // The LSN the next batch should get.
  uint64_t next_lsn = 1;
  uint64_t batches = 0;
  // A torn tail cut off at start-up: the file and how many bytes.
  std::string cut_file;
  uint64_t cut_bytes = 0;
  // With truncate_damaged: what was discarded from the damage on.
  std::string discarded;
};

// Reads the segments in `dir` in LSN order and calls `fn(lsn, batch)` for each
// batch with LSN >= from_lsn. A torn tail (damage at the end of the last
// segment, with no valid frame after it) is cut off. Damage anywhere else is
// DATA_LOSS naming the file and offset, unless `truncate_damaged`, which cuts
// the log at the damage and discards every later segment.
absl::StatusOr<WalReplayResult> ReplayWal(
    const std::string& dir, uint64_t from_lsn, bool truncate_damaged,
    const std::function<absl::Status(uint64_t lsn, absl::string_view batch)>& fn);

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_WAL_H_

// Wal: the write-ahead log. Each engine batch (journal.h) becomes one frame
// (frame.h) with the next log sequence number (LSN), appended to the current
// segment file DIR/wal-<first LSN>.log.
//
//   auto wal = lapse::Wal::Open({.dir = dir, .fsync = FsyncPolicy::kAlways}, next_lsn);
//   lapse::CommitTicket t = (*wal)->Append(batch, undo, last_event_sequence);  // never blocks on
//   I/O
//   (*wal)->WhenDurable(t, [](absl::Status s) { /* answer the RPC */ });
//
// A write takes whatever has been appended since the last one (up to
// Options::max_write_bytes of whole frames) in one write() call: concurrent
// writers share a write and, with FsyncPolicy::kAlways, one fdatasync (group
// commit); no batch is acknowledged before the write, and under kAlways the
// fdatasync, that covers it. A batch is *durable* once written (kEverySecond,
// kNever: it survives the process being killed) or once fsynced (kAlways: it
// survives the machine failing too). kEverySecond fsyncs at most a second
// after a write, like Redis' appendfsync everysec. Options::on_durable hears
// how far the expiry events of durable batches go, so that the server shows
// an event to watchers only once it is durable.
//
// Who writes. One write is in progress at a time (the write turn, which owns
// the segment). Under kAlways the flusher thread does every write and
// fdatasync, and runs the waiters' callbacks: a gRPC thread never waits for
// the disk. Under kEverySecond and kNever a writer that waits for its batch
// (WhenDurable, AwaitDurable) writes it itself when no write is in progress,
// with every batch pending before it (LevelDB's leader): a lone writer needs
// no other thread, and writers that come while a write is in progress are
// written by its writer, which goes on while any waits. Such a writer only
// calls write(): the flusher keeps the fsync once a second, reserving space,
// switching segments and rotations (a write that needs one is left to it),
// and writes the batches nobody waits for: at once when they carry expiry
// events (watchers wait for them), otherwise within a second. While the
// flusher waits for the turn, writers leave it to it.
//
// Batches started together (StartTogether): the batches one thread appends
// and waits for inside `start` are written together once it returns, in one
// write() and, under kAlways, one fdatasync, rather than one write each as
// they come (kEverySecond, kNever) or a first write that catches only those
// appended before the flusher woke (kAlways). Nothing is answered earlier
// than it would be otherwise: each batch still waits for the write (and
// fdatasync) that covers it, which now comes after `start`. Another writer or
// the flusher may still write some of them sooner. Under kAlways the first
// batch calls the flusher, so that its wake-up overlaps the rest being
// appended instead of following them: when it runs on another CPU than the
// writer, it waits for them awake (spinning) for up to 100 microseconds and
// takes them as soon as `start` returns, with no wake-up in between;
// otherwise, and past that, it waits asleep, as it did before, until the end
// of StartTogether wakes it.
//
// Group wait under kAlways, off unless Options::max_group_wait is set: a
// writer answered after an fdatasync often comes back with its next batch a
// moment later. Once a batch is pending, the flusher then waits until as many
// writers have batches pending as its last write carried, or max_group_wait,
// whichever comes first, so that one fdatasync covers them all instead of the
// first few alone. A writer is one Append, or the batches of one
// StartTogether once it is over (one StreamWrites request, however many
// operations it carries). A lone writer does not wait (its last write
// carried one); after a larger group it waits once, and the next group is
// sized by that write. It pays with independent writers (many clients, one
// write each in flight); a stream whose requests shrink does not wait, as
// each request is one writer.
//
// Space ahead: before writing past the space it holds, the flusher reserves
// Options::reserve_bytes more past the end of the segment (fallocate with
// FALLOC_FL_KEEP_SIZE: the file's size, and so replay, is unchanged), so that
// a snapshot or another process cannot take the space the next writes need,
// and a full disk mostly shows up before anything is written.
// Under kAlways it writes zeros there instead (the file grows, the segment
// does not): a write over them changes neither the file's size nor its
// allocation, so its fdatasync writes the data alone, not also the inode.
// Replay takes zeros up to the end of a segment file for its end, and cuts
// them off; the log cuts them off itself when it closes a segment. The zeros
// are fdatasynced once filled, and each write over them goes through to the
// disk in the same system call (pwritev2 with RWF_DSYNC: it syncs its own
// range, as a write and an fdatasync would) instead of a write() and an
// fdatasync().
//
// When a write fails, the log never keeps a partial or failed frame: the
// flusher cuts the segment back to its last good offset. Every batch not yet
// durable fails (those of the failed write and those queued behind it), and
// the log *refuses* writes; status() says why: RESOURCE_EXHAUSTED when the
// disk, a quota or the file size limit is full, UNAVAILABLE for other write
// errors. Options::roll_back undoes the failed batches before any of their
// waiters hears of the failure. While refusing, the flusher tries every
// Options::retry_interval to reserve space past the end of the segment; once
// that succeeds, status() is OK again and writes resume by themselves.
// Options::on_writable_changed hears each change. Two failures are for good
// (INTERNAL, until a restart replays what reached the disk): an fsync that
// fails under kEverySecond or kNever, when acknowledged batches may be lost,
// and a segment that cannot be cut back.
//
// Thread-safe.
#ifndef LAPSE_SERVER_STORAGE_WAL_H_
#define LAPSE_SERVER_STORAGE_WAL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"
#include "server/engine/journal.h"

namespace lapse {

enum class FsyncPolicy { kAlways, kEverySecond, kNever };

// "always", "everysec" or "never".
absl::StatusOr<FsyncPolicy> ParseFsyncPolicy(absl::string_view name);

// The flusher's two kinds of I/O, timed for Options::on_io. Under kAlways a
// write goes through to the disk in one call (see the top of this file): it
// counts as an fsync.
enum class WalIo { kWrite, kFsync };
using WalIoListener = std::function<void(WalIo io, absl::Duration took)>;

// What the log does to the disk, for Wal::Options::disk_fault_for_testing.
enum class DiskOp { kCreate, kReserve, kWrite, kSync };

// Hears whether the log takes writes: the error when it starts refusing them,
// OK when they resume. Runs on the thread whose write or fsync failed (the
// flusher, or under kEverySecond and kNever a writer: see the top of wal.h)
// or on the flusher when writes resume; must not block.
using WritableListener = std::function<void(const absl::Status& status)>;

// Hears whether a batch is durable; see Wal::WhenDurable.
using DurableCallback = absl::AnyInvocable<void(absl::Status)>;

// Undoes batches that could not be made durable; see Wal::Options::roll_back.
using RollBackFn = std::function<void(const std::function<std::vector<std::string>()>& refuse)>;

struct WalStats {
  uint64_t batches_written = 0;
  uint64_t writes = 0;
  uint64_t fsyncs = 0;
  uint64_t bytes_written = 0;
  // The longest time written data waited for its fsync: what a machine
  // failure could lose under kEverySecond.
  absl::Duration longest_unsynced = absl::ZeroDuration();
  // Writes, fsyncs, reservations and segment switches that failed, each
  // starting a spell of refusing writes.
  uint64_t write_failures = 0;
  // Batches undone because they could not be made durable.
  uint64_t batches_rolled_back = 0;
  // Whether writes are refused now, and for how long they have been refused
  // since Open, the current spell included.
  bool refusing = false;
  absl::Duration time_refusing = absl::ZeroDuration();
};

class Wal {
 public:
  struct Options {
    std::string dir;
    FsyncPolicy fsync = FsyncPolicy::kEverySecond;
    // A segment past this size is closed and a new one started.
    size_t segment_bytes = size_t{64} << 20;
    // The most one write() takes from what is pending, in whole frames (a
    // larger frame is written alone): bounds what a group waits for.
    size_t max_write_bytes = size_t{4} << 20;
    // kAlways: how long a pending batch may wait for the rest of its group
    // (see the top of this file); zero never waits.
    absl::Duration max_group_wait = absl::ZeroDuration();
    // Space reserved ahead of the writes; 0 reserves nothing.
    size_t reserve_bytes = size_t{4} << 20;
    // How often a log that refuses writes checks whether it can write again.
    absl::Duration retry_interval = absl::Seconds(1);
    // Called with the highest expiry event sequence of the batches durable so
    // far (see Append), after each write or fsync once any batch has carried
    // an event: never decreasing, possibly repeated. Runs on the thread
    // that wrote (see the top of this file), one call at a time, before anyone can learn that those
    // batches are durable (WhenDurable, AwaitDurable, Rotate); must not block, as every waiting
    // writer waits for it. May be empty.
    std::function<void(uint64_t last_event_sequence)> on_durable = nullptr;
    // Told how long each successful write() and fdatasync() took, on the
    // thread that did it; must be cheap. May be empty.
    WalIoListener on_io = nullptr;
    // Called on the thread whose write failed, with `refuse`. It must
    // keep every Append out (the engine's RollBack holds every shard lock)
    // while it calls `refuse` exactly once, which makes the log refuse
    // writes and returns the undo batches of every failed batch, newest
    // first; then apply them. Empty: the log calls `refuse` itself and drops
    // the undos.
    RollBackFn roll_back = nullptr;
    // Told when the log starts refusing writes and when it resumes. May be
    // empty.
    WritableListener on_writable_changed = nullptr;
    // Test only: asked before each operation on the disk; a non-zero errno
    // fails the operation as if the system call had. An injected kWrite
    // failure first writes half of the data, as a disk that fills up does.
    std::function<int(DiskOp op)> disk_fault_for_testing = nullptr;
    // Test only: called on the flusher when it is called for batches started
    // together while their StartTogether still runs (kAlways), holding the
    // log's lock: it must not call the log.
    std::function<void()> on_called_for_together_for_testing = nullptr;
  };

  // Starts a new segment whose first batch will get `next_lsn`, and the
  // flusher thread.
  static absl::StatusOr<std::unique_ptr<Wal>> Open(const Options& options, uint64_t next_lsn);
  // Writes and fsyncs what is pending, then stops the flusher.
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Queues a batch under the next LSN, with the `undo` that puts back what
  // it changed (see Options::roll_back), both copied. `last_event_sequence` is the
  // sequence of the batch's last expiry event, 0 when it has none (see
  // on_durable). Never blocks on I/O. While the log refuses writes the batch
  // is dropped and its ticket reports the refusal.
  CommitTicket Append(absl::string_view batch, absl::string_view undo,
                      uint64_t last_event_sequence);

  // Calls `done` once the batch of `ticket` (0: every batch appended before
  // this call) is durable, or with the error if it failed. Runs `done` on the
  // thread that wrote the batch: under kAlways the flusher; otherwise often
  // the caller, which writes what is pending when no write is in progress
  // (write() only, never an fsync), and then any batches waited for meanwhile.
  // Right away when there is nothing to wait for. Never call it holding a
  // lock that Options::roll_back takes.
  void WhenDurable(CommitTicket ticket, DurableCallback done);

  // Runs `start`, which appends batches and asks WhenDurable for them on
  // this thread, and then writes them together (see the top of this file):
  // under kAlways it calls the flusher, otherwise it writes them itself when
  // no write is in progress, like WhenDurable. `start` must not wait for any
  // of its batches (AwaitDurable), as they are not written before it
  // returns. A StartTogether inside `start` is part of it.
  void StartTogether(absl::FunctionRef<void()> start);

  // Blocks until the batch of `ticket` (0: every batch appended before the
  // call) is durable; the error if it failed. For threads that may block
  // (snapshots, tests, tools), never for a gRPC thread.
  absl::Status AwaitDurable(CommitTicket ticket = 0);

  // OK while the log takes writes; otherwise why it refuses them (see the
  // top of this file).
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
  // A batch appended and not yet durable.
  struct Queued {
    CommitTicket ticket;
    uint64_t lsn;
    uint64_t last_event_sequence;
    // Its frame's bytes in pending_, and its undo's in undos_.
    size_t frame_bytes;
    size_t undo_bytes;
  };
  // Who waits for which batch (WhenDurable).
  struct Waiter {
    CommitTicket ticket;
    DurableCallback done;
  };
  using Waiters = std::vector<DurableCallback>;
  // Batches that failed together: tickets first..last.
  struct Failure {
    CommitTicket first;
    CommitTicket last;
    absl::Status status;
  };
  // What the flusher writes in one go.
  struct Round {
    std::string data;
    uint64_t last_lsn = 0;
    CommitTicket last_ticket = 0;
    // How many batches `data` holds, and from how many writers (0: unknown,
    // when the round takes part of what is pending).
    size_t batches = 0;
    size_t writers = 0;
    uint64_t event_sequence = 0;
    bool rotate = false;
    uint64_t rotate_lsn = 0;
    bool stopping = false;
  };

  Wal(const Options& options, uint64_t next_lsn);
  absl::Status OpenSegment(uint64_t first_lsn);
  void Run();
  // The flusher: waits for something to do and the write turn; false when
  // the log refuses writes.
  bool NextRound(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The flusher, without the lock: waits awake until a StartTogether ends, or
  // `most`. Returns how long it waited.
  absl::Duration SpinWhileTogetherOpen(absl::Duration most) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the write turn and what is pending into `round`.
  void TakeRound(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A waiting writer (kEverySecond, kNever): takes the turn and a round when
  // nobody writes, the flusher does not want the turn and the round needs
  // nothing but a write(); otherwise false (and the flusher is called when
  // the round needs it).
  bool TakeWritersRound(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes rounds on the calling thread while batches are waited for.
  void WriteWhileWaitedFor();
  // Writes `round` (fsyncing if `may_sync` and the policy says so), records
  // the outcome, gives the turn back and runs the callbacks it settled.
  // Under kEverySecond the flusher (`may_sync`) then fsyncs if a second has
  // passed, without the turn.
  // Its buffer goes to spare_ once written.
  void WriteAndSettle(Round* round, bool may_sync);
  // Holding the turn: refuses writes after `error` in `round`, undoes the
  // failed batches, gives the turn back; their waiters go to `failed`.
  // Returns the refusal.
  absl::Status Fail(const Round& round, const absl::Status& error, bool for_good, Waiters* failed);
  // Writes `round` out; false if it failed, with `error` and whether the
  // failure is for good. `durable` tells whether the round's batches are
  // durable all the same (the failure came after them).
  bool WriteRound(const Round& round, bool may_sync, absl::Status* error, bool* durable,
                  bool* for_good);
  void ReleaseTurn() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that `round`'s batches are durable; their waiters go to `ready`.
  void MarkDurable(const Round& round, Waiters* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties undos_ once no batch is queued, giving back a large buffer.
  void ClearUndos() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts refusing writes after `error`: fails every batch not yet durable
  // and returns their undos, newest first. Until EndRollBack nobody learns
  // that they failed.
  std::vector<std::string> Refuse(const absl::Status& error, bool for_good)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once the undos are applied: the failed batches count as resolved, and
  // their waiters go to `failed`.
  void EndRollBack(Waiters* failed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of a batch that is no longer waited for.
  absl::Status OutcomeOf(CommitTicket ticket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tries to reserve space again; resumes writes when it can.
  void Retry();
  int Fault(DiskOp op) const;
  absl::Status Reserve(size_t length);
  // Writes `data` at the end of the segment; `through`: on the disk before
  // it returns, as if fsynced (one system call; see files::WriteAllAtThrough).
  absl::Status WriteOut(absl::string_view data, bool through);
  // Fsyncs the segment if anything written is unsynced, holding the turn.
  absl::Status SyncNow();
  // Fsyncs the segment, unsynced since `unsynced_since`, and counts it.
  absl::Status Sync(absl::Time unsynced_since);

  // Wakes the flusher, its one sleeper: a futex word that each Ring moves.
  // Not a CondVar: a condition_variable_any notifies holding a mutex of its
  // own, and a flusher woken on the notifier's CPU ran first and blocked on
  // it, a second wake-up before it could write (perfalways4, docs/benchmarks.md).
  class Bell {
   public:
    // Releases `mu`, sleeps until a Ring after the call or `timeout`, locks
    // `mu` again. May return early: callers loop on their condition.
    void Wait(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Wakes the sleeper, if any. With or without the lock its waiter gave.
    void Ring();

   private:
    std::atomic<uint32_t> rings_{0};
    std::atomic<int> sleepers_{0};
  };

  // The log whose StartTogether runs on this thread, if any, and whether it
  // has appended a batch (counted in togethers_open_).
  static thread_local Wal* together_;
  static thread_local bool together_appended_;

  // Constant after construction.
  const Options options_;

  // Owned by the holder of the write turn (writing_), and by the flusher
  // while the log refuses writes (nobody else writes then), by Open before the
  // flusher starts.
  int fd_ = -1;
  std::string segment_path_;
  uint64_t segment_size_ = 0;
  // The segment has space reserved up to this offset.
  uint64_t reserved_end_ = 0;
  absl::Time unsynced_since_ = absl::InfiniteFuture();

  // State below is protected by mu_.
  mutable Mutex mu_;
  Bell work_bell_;
  CondVar rotated_cv_;
  // The write turn: a write (and under kAlways its fsync) is in progress.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // The flusher holds the turn.
  bool flusher_writing_ ABSL_GUARDED_BY(mu_) = false;
  // The flusher waits for the turn: writers leave it to it.
  bool flusher_waiting_ ABSL_GUARDED_BY(mu_) = false;
  // kEverySecond, kNever: the flusher is asked to write what is pending
  // (a batch with events, a backlog, a round a writer may not write).
  bool flusher_called_ ABSL_GUARDED_BY(mu_) = false;
  // While refusing: when to try again.
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Frames appended and not yet taken by the flusher.
  std::string pending_ ABSL_GUARDED_BY(mu_);
  // A written round's buffer, emptied, for pending_ to take next: appending
  // to a buffer that keeps its capacity allocates nothing.
  std::string spare_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lsn_ ABSL_GUARDED_BY(mu_);
  // The last LSN durable under the policy.
  uint64_t durable_lsn_ ABSL_GUARDED_BY(mu_);
  // Batches appended and not yet durable, in LSN order.
  std::deque<Queued> queued_ ABSL_GUARDED_BY(mu_);
  // Their undos, in the same order, from undos_front_ on: one buffer for all
  // rather than an allocation each.
  std::string undos_ ABSL_GUARDED_BY(mu_);
  size_t undos_front_ ABSL_GUARDED_BY(mu_) = 0;
  // Writers with batches in pending_: each Append, but batches started
  // together count as one once StartTogether is over (kAlways only; the
  // other policies count their Appends alone and never read it).
  size_t pending_writers_ ABSL_GUARDED_BY(mu_) = 0;
  // kAlways: the writers of the last write, as many as the next one waits
  // for (max_group_wait at most).
  size_t group_writers_ ABSL_GUARDED_BY(mu_) = 1;
  // kAlways: StartTogethers in progress that have appended a batch; the
  // flusher waits for them awake (see the top of this file). It is told that
  // one ended by togethers_ended_, which moves under mu_ and is read without
  // it while flusher_spinning_.
  size_t togethers_open_ ABSL_GUARDED_BY(mu_) = 0;
  // The CPU the latest of them started on.
  int together_cpu_ ABSL_GUARDED_BY(mu_) = -1;
  std::atomic<uint64_t> togethers_ended_{0};
  bool flusher_spinning_ ABSL_GUARDED_BY(mu_) = false;
  CommitTicket last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  // Every batch up to this ticket is durable or has failed.
  CommitTicket resolved_ ABSL_GUARDED_BY(mu_) = 0;
  // The latest failures, oldest first; older ones are forgotten up to
  // forgotten_through_.
  std::deque<Failure> failures_ ABSL_GUARDED_BY(mu_);
  CommitTicket forgotten_through_ ABSL_GUARDED_BY(mu_) = 0;
  // Between Refuse and EndRollBack.
  bool rolling_back_ ABSL_GUARDED_BY(mu_) = false;
  // In ticket order: WhenDurable mostly comes in that order and adds at
  // the back; MarkDurable takes from the front.
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // A requested rotation: the offset in pending_ where the new segment
  // starts, and its first LSN.
  bool rotate_requested_ ABSL_GUARDED_BY(mu_) = false;
  size_t rotate_offset_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rotate_lsn_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rotations_done_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_since_rotate_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // OK, or why writes are refused.
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  // Whether refusal_ is an error: moves with it, read without the lock.
  std::atomic<bool> refusing_{false};
  bool refusing_for_good_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time refusing_since_ ABSL_GUARDED_BY(mu_);
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
// the log at the damage and discards every later segment. The DATA_LOSS says
// that opening with `truncate_damaged_name` (the name whoever configures the
// store gives that option: lapsed names its flag) discards the rest.
absl::StatusOr<WalReplayResult> ReplayWal(
    const std::string& dir, uint64_t from_lsn, bool truncate_damaged,
    absl::string_view truncate_damaged_name,
    const std::function<absl::Status(uint64_t lsn, absl::string_view batch)>& fn);

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_WAL_H_

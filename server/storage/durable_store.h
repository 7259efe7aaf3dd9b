// DurableStore: lapse's durability. Owns a data directory: a lock, the
// write-ahead log (wal.h) and snapshots (snapshot.h).
//
//   std::unique_ptr<lapse::EventFeed> log;  // built once the identity is known
//   auto store = lapse::DurableStore::Open(
//       {.dir = "/var/lib/lapse",
//        .on_durable = [&log](uint64_t seq) { log->MakeVisibleThrough(seq); }});
//   log = std::make_unique<lapse::EventFeed>(lapse::EventFeed::Options{
//       .store_id = (*store)->identity().id,
//       .first_sequence = (*store)->identity().first_sequence, .visible_on_append = false});
//   lapse::Engine engine({.journal = store->get()}, clock, log.get());
//   lapse::ConsumerGroups groups({.journal = store->get()}, clock, log.get());
//   auto recovered = (*store)->Recover(&engine, log.get(), &groups);  // before serving
//   lapse::CommitTicket ticket = 0;
//   ... engine.Put(..., &ticket); (*store)->WhenDurable(ticket, answer_the_rpc);
//
// The directory is locked for as long as the store is open (files::DirLock:
// flock on the directory itself), so two servers never share it. Open reads
// the directory's identity (store_identity.h), making it when the directory
// is new; the event feed given to Recover must be built with it.
//
// Recovery loads the newest snapshot that reads back whole, replays the log
// after it, restores the retained event feed, the sequence counter and the
// consumer groups (their positions, pending events, leases and dead
// letters), and cuts off a torn tail. A damaged snapshot is passed over, named in
// RecoveryStats::damaged_snapshots, for the one before it (or, when there is
// none, the whole log); with neither left, DATA_LOSS names the files. A
// snapshot's temporary file left by a crash is deleted; nothing else is.
// Members whose deadline passed while the server was down are still there
// afterwards: the Expirer expires them (with their events) as soon as it
// starts.
//
// A background thread takes a snapshot whenever the log has grown by
// Options::snapshot_after_bytes since the last one. It starts only when the
// file system has room for the snapshot's estimated size plus one log
// segment, which stays free for the log; otherwise it is skipped, logged,
// counted (snapshots_skipped_for_space) and, like a failed one, retried after
// Options::snapshot_retry_after. Once the new snapshot is written and read
// back, the files nothing needs any more are deleted: the two newest verified
// snapshots are kept, with every log segment from the older one on, so that
// either can start the store.
//
// When the log cannot write (wal.h), the store rolls the engine and the
// consumer groups back (Engine::RollBack inside ConsumerGroups::RollBack) to
// what is durable before any failed writer is told, and
// refuses writes until the log can write again; Options::on_writable_changed
// hears both. No snapshot is taken meanwhile.
//
// Thread-safe.
#ifndef LAPSE_SERVER_STORAGE_DURABLE_STORE_H_
#define LAPSE_SERVER_STORAGE_DURABLE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"
#include "server/engine/consumer_groups.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"
#include "server/engine/journal.h"
#include "server/storage/files.h"
#include "server/storage/snapshot.h"
#include "server/storage/store_identity.h"
#include "server/storage/wal.h"

namespace lapse {

struct RecoveryStats {
  std::string snapshot;  // File name, empty when none.
  uint64_t snapshot_members = 0;
  uint64_t batches_replayed = 0;
  uint64_t members = 0;
  uint64_t events = 0;
  // Records that rebuilt the consumer groups from the snapshot.
  uint64_t snapshot_group_records = 0;
  // A torn tail cut off, as "N bytes at the end of FILE"; empty when none.
  std::string torn_tail;
  // What truncate_damaged_wal discarded; empty when nothing.
  std::string discarded;
  // Snapshots newer than `snapshot` that were passed over because they are
  // damaged, with where and why; empty when none.
  std::string damaged_snapshots;
  absl::Duration took;
};

class DurableStore final : public Journal {
 public:
  struct Options {
    std::string dir;
    // The sequence of the first event of a directory initialised now
    // (StoreIdentity::first_sequence).
    uint64_t fresh_first_sequence = 1;
    FsyncPolicy fsync = FsyncPolicy::kEverySecond;
    // See Wal::Options::max_group_wait.
    absl::Duration group_wait = absl::ZeroDuration();
    size_t segment_bytes = size_t{64} << 20;
    // Log bytes since the last snapshot that trigger the next one; 0 turns
    // automatic snapshots off.
    size_t snapshot_after_bytes = size_t{256} << 20;
    // How long the background thread waits after a failed or skipped
    // snapshot before it tries again.
    absl::Duration snapshot_retry_after = absl::Seconds(10);
    // Start even when the log is damaged in the middle, discarding
    // everything from the damage on.
    bool truncate_damaged_wal = false;
    // What whoever configures the store calls truncate_damaged_wal (lapsed
    // names its flag): the refusal of a log damaged in the middle names it.
    std::string truncate_damaged_wal_name = "truncate_damaged_wal";
    // Hears how far the expiry events of durable changes go; see
    // Wal::Options::on_durable for when and on which thread. The server
    // connects it to EventFeed::MakeVisibleThrough, whose log is built with
    // visible_on_append = false. What it refers to must outlive the store.
    std::function<void(uint64_t last_event_sequence)> on_durable = nullptr;
    // Hears the log's write and fsync times (Wal::Options::on_io).
    WalIoListener on_wal_io = nullptr;
    // Hears when writes start being refused and when they resume; see
    // Wal::Options. What it refers to must outlive the store.
    WritableListener on_writable_changed = nullptr;
    // How often a log that refuses writes checks whether it can write again.
    absl::Duration retry_interval = absl::Seconds(1);
    // See Wal::Options::disk_fault_for_testing.
    std::function<int(DiskOp op)> disk_fault_for_testing = nullptr;
    // Replaces the free space of the directory's file system (statvfs) in
    // the check before each snapshot. May be empty.
    std::function<uint64_t()> free_bytes_for_testing = nullptr;
  };

  // Creates the directory if needed, locks it (FAILED_PRECONDITION when
  // another store, in this process or another, holds it) and reads or makes
  // its identity (DATA_LOSS when the identity file is damaged).
  static absl::StatusOr<std::unique_ptr<DurableStore>> Open(const Options& options);

  // Whose history the directory holds.
  const StoreIdentity& identity() const { return identity_; }
  ~DurableStore() override;
  DurableStore(const DurableStore&) = delete;
  DurableStore& operator=(const DurableStore&) = delete;

  // Loads the state into `engine`, `log` and `groups` (all fresh, `engine`
  // and `groups` built with this store as their journal; no groups when
  // null), then opens the log for writing and starts snapshotting. Call once,
  // before the engine serves anything.
  absl::StatusOr<RecoveryStats> Recover(Engine* engine, EventFeed* log,
                                        ConsumerGroups* groups = nullptr);

  // Journal.
  CommitTicket Commit(absl::string_view batch, absl::string_view undo,
                      uint64_t last_event_sequence) override;
  absl::Status status() const override;

  // Calls `done` once the change of `ticket` (0: every change committed
  // before this call) is durable (see FsyncPolicy), or with the error that
  // prevented it; in that case the change has been undone first. Under
  // everysec and never the caller may write the log itself (write() only,
  // see Wal::WhenDurable), so hold no engine or group lock.
  void WhenDurable(CommitTicket ticket, DurableCallback done);

  // Runs `start`, which commits changes and asks WhenDurable for them on this
  // thread, and makes them durable together once it returns: one log write
  // (and under always one fdatasync) for all (Wal::StartTogether). `start`
  // must not wait for them.
  void StartTogether(absl::FunctionRef<void()> start);

  // Blocks until the change of `ticket` (0: every change committed before
  // the call) is durable. Never from a gRPC thread.
  absl::Status AwaitDurable(CommitTicket ticket = 0);

  // Takes a snapshot now. RESOURCE_EXHAUSTED, with nothing written, when the
  // file system lacks room for it and a log segment (see above).
  absl::StatusOr<SnapshotStats> TakeSnapshot();
  std::optional<SnapshotStats> last_snapshot() const;
  // Snapshots skipped for lack of space since Open.
  uint64_t snapshots_skipped_for_space() const;
  WalStats wal_stats() const;

  // Waits until at least `count` snapshots have been taken since Recover, or
  // `timeout` passes. Returns whether they were.
  bool AwaitSnapshotsForTesting(int count, absl::Duration timeout);

 private:
  // A snapshot that was read back whole: taken by this store, or the one
  // Recover loaded.
  struct VerifiedSnapshot {
    uint64_t lsn = 0;
    SnapshotStats stats;
  };

  DurableStore(const Options& options, files::DirLock lock, const StoreIdentity& identity);
  std::string PathOf(absl::string_view name) const;
  void RunSnapshots();
  // OK when the file system has room for the next snapshot and one log
  // segment besides.
  absl::Status CheckSpaceForSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_);
  absl::StatusOr<uint64_t> EstimateSnapshotBytes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_);
  // The sizes of the log's segment files, added up.
  absl::StatusOr<uint64_t> SegmentBytes() const;
  // Deletes every snapshot but those at `previous_lsn` and `newest_lsn`, and
  // the log segments before `previous_lsn` (0: keeps them all).
  absl::Status DropCovered(uint64_t previous_lsn, uint64_t newest_lsn);

  // Constant after construction.
  const Options options_;
  files::DirLock lock_;
  const StoreIdentity identity_;
  // Set by Recover, constant after.
  Engine* engine_ = nullptr;
  EventFeed* log_ = nullptr;
  ConsumerGroups* groups_ = nullptr;
  std::unique_ptr<Wal> wal_;
  // The bytes of the log once replayed, before wal_ wrote any.
  uint64_t log_bytes_recovered_ = 0;

  // Serialises snapshots (the background thread and TakeSnapshot).
  Mutex snapshot_mu_;
  std::optional<VerifiedSnapshot> newest_snapshot_ ABSL_GUARDED_BY(snapshot_mu_);

  // State below is protected by mu_.
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<SnapshotStats> last_snapshot_ ABSL_GUARDED_BY(mu_);
  int snapshots_taken_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t snapshots_skipped_for_space_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread snapshotter_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_DURABLE_STORE_H_

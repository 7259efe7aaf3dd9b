#include "server/storage/durable_store.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/base/deadline.h"
#include "server/base/log.h"

namespace lapse {
namespace {

// The LSN of a fresh store's first batch: a log that still has the segment
// starting there holds the whole history.
constexpr uint64_t kFirstLsn = 1;

}  // namespace

absl::StatusOr<std::unique_ptr<DurableStore>> DurableStore::Open(const Options& options) {
  if (absl::Status s = files::EnsureDir(options.dir); !s.ok()) return s;
  absl::StatusOr<files::DirLock> lock = files::DirLock::Acquire(options.dir);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<StoreIdentity> identity =
      LoadOrCreateIdentity(options.dir, options.fresh_first_sequence);
  if (!identity.ok()) return identity.status();
  return std::unique_ptr<DurableStore>(new DurableStore(options, *std::move(lock), *identity));
}

DurableStore::DurableStore(const Options& options, files::DirLock lock,
                           const StoreIdentity& identity)
    : options_(options), lock_(std::move(lock)), identity_(identity) {}

DurableStore::~DurableStore() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (snapshotter_.joinable()) snapshotter_.join();
  wal_.reset();
}

absl::StatusOr<RecoveryStats> DurableStore::Recover(Engine* engine, EventFeed* log,
                                                    ConsumerGroups* groups) {
  const absl::Time start = absl::Now();
  engine_ = engine;
  log_ = log;
  groups_ = groups;
  RecoveryStats stats;
  // A record applies to the engine or, when it is a group's, to the groups.
  auto apply = [engine, groups](const JournalRecord& r) {
    if (!IsGroupRecord(r.type)) {
      engine->Apply(r);
      return absl::OkStatus();
    }
    return groups == nullptr ? absl::OkStatus() : groups->Apply(r);
  };

  absl::StatusOr<std::vector<std::string>> names = files::List(options_.dir);
  if (!names.ok()) return names.status();
  std::vector<std::pair<uint64_t, std::string>> snapshots;
  std::string first_segment;
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (ParseSnapshotTempName(name, &lsn)) {
      // A snapshot that was being written when the process stopped.
      if (absl::Status s = files::Remove(PathOf(name)); !s.ok()) return s;
    } else if (ParseSnapshotName(name, &lsn)) {
      snapshots.emplace_back(lsn, name);
    } else if (Wal::ParseSegmentName(name, &lsn) && first_segment.empty()) {
      first_segment = name;  // `names` is sorted, and so are the LSNs in them.
    }
  }
  std::sort(snapshots.rbegin(), snapshots.rend());

  std::vector<ExpiryEvent> events;
  uint64_t replay_from = kFirstLsn;
  // Where the sequence counter stands: the snapshot's, each run's
  // kNextSequence record, and the newest event, whichever is highest. A fresh
  // directory keeps the log's own starting point.
  uint64_t next_event_sequence = 0;
  // The newest snapshot that reads back whole; LoadSnapshot checks all of a
  // file before it applies any of it, so a damaged one leaves no trace.
  std::vector<std::string> damaged;
  for (const auto& [lsn, name] : snapshots) {
    absl::Status applied;
    absl::StatusOr<SnapshotContents> contents =
        LoadSnapshot(PathOf(name), [&](const JournalRecord& r) {
          if (r.type == RecordType::kEvent) {
            events.push_back(EventOf(r));
          } else if (applied.ok()) {
            applied = apply(r);
          }
        });
    if (contents.ok() && !applied.ok()) {
      return absl::DataLossError(absl::StrCat("snapshot ", PathOf(name), ": ", applied.message()));
    }
    if (!contents.ok()) {
      if (contents.status().code() != absl::StatusCode::kDataLoss) return contents.status();
      damaged.push_back(std::string(contents.status().message()));
      continue;
    }
    stats.snapshot = name;
    stats.snapshot_members = contents->members;
    stats.snapshot_group_records = contents->group_records;
    replay_from = contents->replay_from_lsn;
    next_event_sequence = contents->next_event_sequence;
    MutexLock serial(&snapshot_mu_);
    newest_snapshot_ = VerifiedSnapshot{lsn,
                                        {.members = contents->members,
                                         .events = contents->events,
                                         .group_records = contents->group_records,
                                         .bytes = contents->bytes,
                                         // Found at start, not taken: no time.
                                         .took = absl::ZeroDuration(),
                                         .longest_lock_hold = absl::ZeroDuration()}};
    break;
  }
  stats.damaged_snapshots = absl::StrJoin(damaged, "; ");
  if (!damaged.empty() && stats.snapshot.empty() && first_segment != Wal::SegmentName(kFirstLsn)) {
    return absl::DataLossError(
        absl::StrCat("no usable snapshot in ", options_.dir, ": ", stats.damaged_snapshots,
                     ". The write-ahead log cannot stand in for them: it starts at ",
                     first_segment.empty() ? "nothing (there is none)" : first_segment,
                     ", not at the beginning. The store cannot open; restore the directory from a "
                     "backup."));
  }

  absl::StatusOr<WalReplayResult> replayed =
      ReplayWal(options_.dir, replay_from, options_.truncate_damaged_wal,
                options_.truncate_damaged_wal_name, [&](uint64_t, absl::string_view batch) {
                  return DecodeBatch(batch, [&](const JournalRecord& r) {
                    if (r.type == RecordType::kExpiry) events.push_back(EventOf(r));
                    if (r.type == RecordType::kNextSequence) {
                      next_event_sequence = std::max(next_event_sequence, r.sequence);
                    }
                    return apply(r);
                  });
                });
  if (!replayed.ok()) return replayed.status();
  stats.batches_replayed = replayed->batches;
  // The replay cut off any zeros a log under kAlways filled ahead (wal.h).
  absl::StatusOr<uint64_t> log_bytes = SegmentBytes();
  if (!log_bytes.ok()) return log_bytes.status();
  log_bytes_recovered_ = *log_bytes;
  if (!replayed->cut_file.empty()) {
    stats.torn_tail =
        absl::StrCat(replayed->cut_bytes, " bytes at the end of ", replayed->cut_file);
  }
  stats.discarded = replayed->discarded;

  // The log holds expiries in commit order, which can differ from sequence
  // order across shards; a snapshot and the log after it can both hold an
  // event.
  std::sort(events.begin(), events.end(),
            [](const ExpiryEvent& a, const ExpiryEvent& b) { return a.sequence < b.sequence; });
  events.erase(std::unique(events.begin(), events.end(),
                           [](const ExpiryEvent& a, const ExpiryEvent& b) {
                             return a.sequence == b.sequence;
                           }),
               events.end());
  stats.events = events.size();
  if (!events.empty()) {
    next_event_sequence = std::max(next_event_sequence, events.back().sequence + 1);
  }
  if (next_event_sequence == 0) next_event_sequence = log->last_sequence() + 1;
  log->Restore(std::move(events), next_event_sequence);
  stats.members = engine->total_members();

  Wal::Options wal_options;
  wal_options.dir = options_.dir;
  wal_options.fsync = options_.fsync;
  wal_options.max_group_wait = options_.group_wait;
  wal_options.segment_bytes = options_.segment_bytes;
  wal_options.retry_interval = options_.retry_interval;
  wal_options.on_durable = options_.on_durable;
  wal_options.on_io = options_.on_wal_io;
  wal_options.roll_back = [engine,
                           groups](const std::function<std::vector<std::string>()>& refuse) {
    if (groups == nullptr) {
      engine->RollBack(refuse);
      return;
    }
    // Under the groups' lock, then every shard lock, nothing is between its
    // change and its commit; each applies its own records of the undos.
    groups->RollBack([&] {
      std::vector<std::string> undos;
      engine->RollBack([&] {
        undos = refuse();
        return undos;
      });
      return undos;
    });
  };
  wal_options.on_writable_changed = options_.on_writable_changed;
  wal_options.disk_fault_for_testing = options_.disk_fault_for_testing;
  absl::StatusOr<std::unique_ptr<Wal>> wal = Wal::Open(wal_options, replayed->next_lsn);
  if (!wal.ok()) return wal.status();
  wal_ = *std::move(wal);
  BatchEncoder counter;
  counter.NextSequence(next_event_sequence);
  wal_->Append(counter.Finish(0), {}, 0);
  if (options_.snapshot_after_bytes > 0) snapshotter_ = std::thread([this] { RunSnapshots(); });
  stats.took = absl::Now() - start;
  return stats;
}

CommitTicket DurableStore::Commit(absl::string_view batch, absl::string_view undo,
                                  uint64_t last_event_sequence) {
  return wal_->Append(batch, undo, last_event_sequence);
}

absl::Status DurableStore::status() const { return wal_->status(); }

void DurableStore::WhenDurable(CommitTicket ticket, DurableCallback done) {
  wal_->WhenDurable(ticket, std::move(done));
}

void DurableStore::StartTogether(absl::FunctionRef<void()> start) { wal_->StartTogether(start); }

WalStats DurableStore::wal_stats() const { return wal_->stats(); }

absl::Status DurableStore::AwaitDurable(CommitTicket ticket) { return wal_->AwaitDurable(ticket); }

std::optional<SnapshotStats> DurableStore::last_snapshot() const {
  MutexLock lock(&mu_);
  return last_snapshot_;
}

uint64_t DurableStore::snapshots_skipped_for_space() const {
  MutexLock lock(&mu_);
  return snapshots_skipped_for_space_;
}

std::string DurableStore::PathOf(absl::string_view name) const {
  return absl::StrCat(options_.dir, "/", name);
}

absl::StatusOr<SnapshotStats> DurableStore::TakeSnapshot() {
  MutexLock serial(&snapshot_mu_);
  if (absl::Status space = CheckSpaceForSnapshot(); !space.ok()) {
    if (absl::IsResourceExhausted(space)) {
      MutexLock lock(&mu_);
      ++snapshots_skipped_for_space_;
    }
    return space;
  }
  const uint64_t failures_before = wal_->stats().write_failures;
  absl::StatusOr<uint64_t> from = wal_->Rotate();
  if (!from.ok()) return from.status();
  if (newest_snapshot_.has_value() && *from == newest_snapshot_->lsn) {
    // Nothing was logged since that snapshot: it is this one.
    return newest_snapshot_->stats;
  }
  // Every batch before the rotation must be durable, so that its events are
  // visible in the log and land in the snapshot.
  if (absl::Status durable = wal_->AwaitDurable(); !durable.ok()) return durable;
  // The scan may catch batches that are not durable yet. Were one of them
  // undone, the snapshot would keep it and the log could not correct it: such
  // a snapshot is refused before it takes its name. Once they are durable,
  // nothing can undo them.
  absl::StatusOr<SnapshotStats> stats =
      WriteSnapshot(options_.dir, *from, engine_, *log_, groups_, [&]() -> absl::Status {
        absl::Status settled = wal_->AwaitDurable();
        if (settled.ok() && wal_->stats().write_failures != failures_before) {
          settled = wal_->status().ok() ? absl::AbortedError("a write failed") : wal_->status();
        }
        if (settled.ok()) return settled;
        return absl::Status(settled.code(),
                            absl::StrCat("snapshot discarded: writes failed while it was taken: ",
                                         settled.message()));
      });
  if (!stats.ok()) return stats.status();
  // The new snapshot has been read back: the one before it becomes the
  // fallback, and what only the fallback before that needed can go.
  const uint64_t previous_lsn = newest_snapshot_.has_value() ? newest_snapshot_->lsn : 0;
  newest_snapshot_ = VerifiedSnapshot{*from, *stats};
  {
    MutexLock lock(&mu_);
    last_snapshot_ = *stats;
    ++snapshots_taken_;
    cv_.SignalAll();
  }
  if (absl::Status s = DropCovered(previous_lsn, *from); !s.ok()) return s;
  return stats;
}

absl::StatusOr<uint64_t> DurableStore::SegmentBytes() const {
  absl::StatusOr<std::vector<std::string>> names = files::List(options_.dir);
  if (!names.ok()) return names.status();
  uint64_t bytes = 0;
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (!Wal::ParseSegmentName(name, &lsn)) continue;
    absl::StatusOr<uint64_t> size = files::FileSize(PathOf(name));
    if (!size.ok()) return size.status();
    bytes += *size;
  }
  return bytes;
}

absl::StatusOr<uint64_t> DurableStore::EstimateSnapshotBytes() {
  // Oldest first: the last sequence only grows, so the difference cannot
  // go negative.
  const uint64_t oldest = log_->oldest_retained_sequence();
  const uint64_t retained_events = log_->last_sequence() + 1 - oldest;
  const uint64_t items = engine_->total_members() + retained_events;
  if (newest_snapshot_.has_value()) {
    // About as many bytes per member or event as last time.
    const SnapshotStats& last = newest_snapshot_->stats;
    return static_cast<uint64_t>(static_cast<double>(last.bytes) * static_cast<double>(items + 1) /
                                 static_cast<double>(last.members + last.events + 1));
  }
  // Every member and event came from the log, and a snapshot records each in
  // about the bytes the log did, or fewer: the bytes the log holds bound it.
  // Counted, not taken from the segments' sizes: under kAlways the log fills
  // the space ahead of its writes with zeros (Wal::Options::reserve_bytes).
  return log_bytes_recovered_ + wal_->stats().bytes_written;
}

absl::Status DurableStore::CheckSpaceForSnapshot() {
  absl::StatusOr<uint64_t> estimate = EstimateSnapshotBytes();
  if (!estimate.ok()) return estimate.status();
  absl::StatusOr<uint64_t> free = options_.free_bytes_for_testing
                                      ? options_.free_bytes_for_testing()
                                      : files::FreeBytes(options_.dir);
  if (!free.ok()) return free.status();
  if (*free >= *estimate + options_.segment_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "snapshot skipped: %s has %d bytes free, a snapshot needs about %d and %d more stay free "
      "for the write-ahead log (one segment). Free some space on that file system; the "
      "snapshot is retried",
      options_.dir, *free, *estimate, options_.segment_bytes));
}

absl::Status DurableStore::DropCovered(uint64_t previous_lsn, uint64_t newest_lsn) {
  absl::StatusOr<std::vector<std::string>> names = files::List(options_.dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    uint64_t lsn;
    const bool old_segment = Wal::ParseSegmentName(name, &lsn) && lsn < previous_lsn;
    const bool old_snapshot =
        ParseSnapshotName(name, &lsn) && lsn != previous_lsn && lsn != newest_lsn;
    if (old_segment || old_snapshot) {
      if (absl::Status s = files::Remove(PathOf(name)); !s.ok()) return s;
    }
  }
  return files::FsyncDir(options_.dir);
}

bool DurableStore::AwaitSnapshotsForTesting(int count, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (snapshots_taken_ < count) {
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    cv_.WaitWithTimeout(&mu_, left);
  }
  return true;
}

void DurableStore::RunSnapshots() {
  // After a failed or skipped snapshot: when to try again.
  std::optional<absl::Time> retry_at;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
      if (stopping_) return;
    }
    // A log that refuses writes could not rotate.
    if (!wal_->status().ok()) continue;
    if (retry_at.has_value() ? absl::Now() < *retry_at
                             : wal_->bytes_since_rotate() < options_.snapshot_after_bytes) {
      continue;
    }
    absl::StatusOr<SnapshotStats> stats = TakeSnapshot();
    if (stats.ok()) {
      retry_at.reset();
      continue;
    }
    retry_at = absl::Now() + options_.snapshot_retry_after;
    Log(absl::IsResourceExhausted(stats.status()) ? LogLevel::kWarning : LogLevel::kError,
        "snapshot not taken: %s", stats.status().message());
  }
}

}  // namespace lapse

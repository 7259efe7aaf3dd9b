#include "server/storage/wal.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/base/log.h"
#include "server/storage/files.h"
#include "server/storage/frame.h"

namespace lapse {

absl::StatusOr<FsyncPolicy> ParseFsyncPolicy(absl::string_view name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "everysec") return FsyncPolicy::kEverySecond;
  if (name == "never") return FsyncPolicy::kNever;
  return absl::InvalidArgumentError(
      absl::StrCat("fsync policy \"", name, "\": expected always, everysec or never"));
}

std::string Wal::SegmentName(uint64_t first_lsn) {
  return absl::StrFormat("wal-%020d.log", first_lsn);
}

bool Wal::ParseSegmentName(absl::string_view name, uint64_t* first_lsn) {
  if (!absl::ConsumePrefix(&name, "wal-") || !absl::ConsumeSuffix(&name, ".log")) return false;
  return name.size() == 20 && absl::SimpleAtoi(name, first_lsn);
}

namespace {

// Failures remembered for tickets whose outcome is asked late.
constexpr size_t kFailuresKept = 1024;
// What a refusing log tries to reserve when it reserves nothing ahead.
constexpr size_t kRetryBytes = size_t{64} << 10;
// kAlways: how long the flusher, called at the first batch started together,
// waits awake for the rest before it sleeps (see NextRound). About what
// applying one StreamWrites request of 16 takes; beyond that it sleeps, and
// the end of StartTogether wakes it as it would have.
constexpr absl::Duration kTogetherSpin = absl::Microseconds(100);
// The largest emptied buffer kept to fill again: a written round's
// (Wal::spare_), and the undos' (Wal::undos_).
constexpr size_t kSpareMostBytes = size_t{1} << 20;

// Why the log refuses writes after `error`, and what happens next.
absl::Status RefusalFor(const absl::Status& error, bool for_good, absl::Duration retry) {
  if (for_good) {
    return absl::InternalError(absl::StrCat(
        "the write-ahead log failed: ", error.message(),
        "; writes are refused until lapsed is restarted (a restart replays what reached the "
        "disk)"));
  }
  if (absl::IsResourceExhausted(error)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "disk full (or a quota or the file size limit reached): ", error.message(),
        "; writes are refused until space is freed, then resume by themselves (checked every ",
        absl::FormatDuration(retry), ")"));
  }
  return absl::UnavailableError(absl::StrCat("the write-ahead log cannot write: ", error.message(),
                                             "; writes are refused, retried every ",
                                             absl::FormatDuration(retry)));
}

}  // namespace

thread_local Wal* Wal::together_ = nullptr;
thread_local bool Wal::together_appended_ = false;

void Wal::Bell::Wait(Mutex* mu, absl::Duration timeout) {
  // Counted and read under `mu`: a Ring after the waiter's look at its
  // condition either moves rings_ before the futex sleeps, or sees the
  // sleeper and wakes it.
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = rings_.load(std::memory_order_seq_cst);
  mu->Unlock();
  const timespec relative = absl::ToTimespec(std::min(timeout, absl::Hours(24)));
  syscall(SYS_futex, &rings_, FUTEX_WAIT_PRIVATE, seen, &relative, nullptr, 0);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  mu->Lock();
}

void Wal::Bell::Ring() {
  rings_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, &rings_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
}

Wal::Wal(const Options& options, uint64_t next_lsn)
    : options_(options), next_lsn_(next_lsn), durable_lsn_(next_lsn - 1) {}

absl::StatusOr<std::unique_ptr<Wal>> Wal::Open(const Options& options, uint64_t next_lsn) {
  std::unique_ptr<Wal> wal(new Wal(options, next_lsn));
  if (absl::Status s = wal->OpenSegment(next_lsn); !s.ok()) return s;
  wal->flusher_ = std::thread([w = wal.get()] { w->Run(); });
  return wal;
}

Wal::~Wal() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    work_bell_.Ring();
  }
  // Not running when Open failed.
  if (flusher_.joinable()) flusher_.join();
  if (fd_ >= 0) {
    // Gives back the zeros filled ahead (kAlways); replay would skip them.
    if (reserved_end_ > segment_size_) {
      files::TruncateOpen(fd_, segment_size_, segment_path_).IgnoreError();
    }
    ::close(fd_);
  }
}

int Wal::Fault(DiskOp op) const {
  return options_.disk_fault_for_testing ? options_.disk_fault_for_testing(op) : 0;
}

absl::Status Wal::OpenSegment(uint64_t first_lsn) {
  if (fd_ >= 0) {
    if (const int err = Fault(DiskOp::kSync); err != 0) {
      return files::ErrnoStatus("fsync", segment_path_, err);
    }
    if (absl::Status s = files::Fsync(fd_, segment_path_); !s.ok()) return s;
  }
  const std::string path = absl::StrCat(options_.dir, "/", SegmentName(first_lsn));
  if (const int err = Fault(DiskOp::kCreate); err != 0) {
    return files::ErrnoStatus("create", path, err);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return files::ErrnoStatus("create", path, errno);
  if (fd_ >= 0) {
    // Gives back what was reserved (or filled with zeros) past the end; the
    // data is fsynced.
    files::TruncateOpen(fd_, segment_size_, segment_path_).IgnoreError();
    ::close(fd_);
  }
  fd_ = fd;
  segment_path_ = path;
  segment_size_ = 0;
  reserved_end_ = 0;
  unsynced_since_ = absl::InfiniteFuture();
  return files::FsyncDir(options_.dir);
}

CommitTicket Wal::Append(absl::string_view batch, absl::string_view undo,
                         uint64_t last_event_sequence) {
  bool call_flusher = false;
  CommitTicket ticket;
  {
    MutexLock lock(&mu_);
    ticket = ++last_ticket_;
    if (!refusal_.ok()) {
      // Fails with the spell of refusing it falls in, once that spell's
      // rollback is over.
      failures_.back().last = ticket;
      if (!rolling_back_) resolved_ = ticket;
      return ticket;
    }
    const uint64_t lsn = next_lsn_++;
    const size_t before = pending_.size();
    AppendFrame(&pending_, lsn, batch);
    // Batches started together count as one writer once they all are.
    if (together_ != this) ++pending_writers_;
    undos_.append(undo.data(), undo.size());
    queued_.push_back({ticket, lsn, last_event_sequence, pending_.size() - before, undo.size()});
    // Under kAlways the flusher writes every batch: it waits for the first
    // writer, then for a whole group; batches started together call it at
    // the first, so that it wakes while the rest are appended, and it waits
    // for them awake (see NextRound). Otherwise the writer that waits for the
    // batch writes it (WhenDurable); the flusher is called for a batch with
    // events, which watchers wait for, and for a backlog.
    const bool first_together =
        options_.fsync == FsyncPolicy::kAlways && together_ == this && !together_appended_;
    if (first_together) {
      together_appended_ = true;
      ++togethers_open_;
      together_cpu_ = sched_getcpu();
    }
    call_flusher =
        pending_.size() >= options_.max_write_bytes ||
        (options_.fsync == FsyncPolicy::kAlways
             ? first_together || (together_ != this &&
                                  (pending_writers_ == 1 || pending_writers_ >= group_writers_))
             : last_event_sequence != 0);
    if (call_flusher) flusher_called_ = true;
  }
  // With the lock given back, so that the flusher does not wake only to wait
  // for it.
  if (call_flusher) work_bell_.Ring();
  return ticket;
}

absl::Status Wal::OutcomeOf(CommitTicket ticket) const {
  if (forgotten_through_ != 0 && ticket <= forgotten_through_) {
    return absl::UnknownError(absl::StrCat(
        "the outcome of this write is no longer known: the write-ahead log failed more than ",
        kFailuresKept, " times since"));
  }
  for (auto it = failures_.rbegin(); it != failures_.rend(); ++it) {
    if (ticket > it->last) break;
    if (ticket >= it->first) return it->status;
  }
  return absl::OkStatus();
}

void Wal::WhenDurable(CommitTicket ticket, DurableCallback done) {
  bool waiting = false;
  absl::Status ready;
  {
    MutexLock lock(&mu_);
    if (ticket == 0) ticket = last_ticket_;
    waiting = ticket > resolved_;
    if (!waiting) {
      ready = OutcomeOf(ticket);
    } else {
      // Kept in ticket order; a writer whose batch was appended earlier may
      // come after one appended later.
      auto at = waiters_.end();
      while (at != waiters_.begin() && std::prev(at)->ticket > ticket) --at;
      waiters_.insert(at, Waiter{ticket, std::move(done)});
      // Under kAlways the flusher writes: a gRPC thread never fsyncs.
      // Batches started together are written once they all are.
      if (options_.fsync == FsyncPolicy::kAlways || together_ == this) return;
    }
  }
  if (waiting) {
    WriteWhileWaitedFor();
  } else {
    done(ready);
  }
}

void Wal::StartTogether(absl::FunctionRef<void()> start) {
  if (together_ == this) {
    start();
    return;
  }
  Wal* const outer = together_;
  const bool outer_appended = together_appended_;
  together_ = this;
  together_appended_ = false;
  start();
  const bool appended = together_appended_;
  together_ = outer;
  together_appended_ = outer_appended;
  if (options_.fsync == FsyncPolicy::kAlways) {
    bool call_flusher;
    {
      MutexLock lock(&mu_);
      // One writer for the batches just started (one too many when `start`
      // appended none, or the flusher took them already: a smaller group).
      call_flusher = !pending_.empty();
      if (call_flusher) ++pending_writers_;
      if (appended) {
        --togethers_open_;
        togethers_ended_.fetch_add(1, std::memory_order_release);
      }
      // A flusher that waits awake sees togethers_ended_ move.
      if (flusher_spinning_) call_flusher = false;
    }
    // With the lock given back, so that the flusher does not wake only to
    // wait for it.
    if (call_flusher) work_bell_.Ring();
    return;
  }
  WriteWhileWaitedFor();
}

absl::Status Wal::AwaitDurable(CommitTicket ticket) {
  Mutex mu;
  CondVar cv;
  bool done = false;
  absl::Status result;
  WhenDurable(ticket, [&](absl::Status s) {
    MutexLock lock(&mu);
    result = std::move(s);
    done = true;
    cv.Signal();
  });
  MutexLock lock(&mu);
  while (!done) cv.WaitWithTimeout(&mu, absl::Seconds(1));
  return result;
}

absl::Status Wal::status() const {
  // Asked before every change (Journal::status), mostly while writes are
  // taken: no lock then.
  if (!refusing_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock lock(&mu_);
  return refusal_;
}

uint64_t Wal::bytes_since_rotate() const {
  MutexLock lock(&mu_);
  return bytes_since_rotate_;
}

WalStats Wal::stats() const {
  MutexLock lock(&mu_);
  WalStats stats = stats_;
  stats.refusing = !refusal_.ok();
  if (stats.refusing) stats.time_refusing += absl::Now() - refusing_since_;
  return stats;
}

absl::StatusOr<uint64_t> Wal::Rotate() {
  MutexLock lock(&mu_);
  if (!refusal_.ok()) return refusal_;
  const uint64_t target = rotations_done_ + 1;
  const uint64_t failures_before = stats_.write_failures;
  rotate_requested_ = true;
  rotate_offset_ = pending_.size();
  rotate_lsn_ = next_lsn_;
  const uint64_t first_lsn = next_lsn_;
  work_bell_.Ring();
  // A failure cancels the rotation.
  while (rotations_done_ < target && stats_.write_failures == failures_before) {
    rotated_cv_.WaitWithTimeout(&mu_, absl::Seconds(1));
  }
  if (rotations_done_ < target) {
    return refusal_.ok() ? failures_.back().status : refusal_;
  }
  return first_lsn;
}

absl::Status Wal::Reserve(size_t length) {
  if (const int err = Fault(DiskOp::kReserve); err != 0) {
    return files::ErrnoStatus("fallocate", segment_path_, err);
  }
  if (options_.fsync == FsyncPolicy::kAlways) {
    // Zeros, not fallocate: writing over them changes neither the file's size
    // nor its allocation, so an fdatasync writes the data alone and not the
    // inode too (a second I/O). Replay ends a segment at its zeros.
    const uint64_t from = std::max(reserved_end_, segment_size_);
    if (absl::Status s =
            files::FillWithZeros(fd_, from, segment_size_ + length - from, segment_path_);
        !s.ok()) {
      return s;
    }
    // On the disk before the writes over them: a write through (WriteOut)
    // syncs its own range alone, and a range first written there would
    // need its blocks allocated, and their metadata written, with it.
    if (absl::Status s = files::Fsync(fd_, segment_path_); !s.ok()) return s;
  } else if (absl::Status s = files::Reserve(fd_, segment_size_, length, segment_path_); !s.ok()) {
    return s;
  }
  reserved_end_ = std::max<uint64_t>(reserved_end_, segment_size_ + length);
  return absl::OkStatus();
}

absl::Status Wal::WriteOut(absl::string_view data, bool through) {
  if (data.empty()) return absl::OkStatus();
  if (options_.reserve_bytes > 0 && segment_size_ + data.size() > reserved_end_) {
    if (absl::Status s = Reserve(data.size() + options_.reserve_bytes); !s.ok()) return s;
  }
  if (const int err = Fault(DiskOp::kWrite); err != 0) {
    files::WriteAllAt(fd_, segment_size_, data.substr(0, data.size() / 2), segment_path_)
        .IgnoreError();
    return files::ErrnoStatus("write", segment_path_, err);
  }
  if (const int err = through ? Fault(DiskOp::kSync) : 0; err != 0) {
    // As a write whose fdatasync fails: written, not known to be durable.
    files::WriteAllAt(fd_, segment_size_, data, segment_path_).IgnoreError();
    return files::ErrnoStatus("fsync", segment_path_, err);
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = through ? files::WriteAllAtThrough(fd_, segment_size_, data, segment_path_)
                               : files::WriteAllAt(fd_, segment_size_, data, segment_path_);
      !s.ok()) {
    return s;
  }
  if (options_.on_io) options_.on_io(through ? WalIo::kFsync : WalIo::kWrite, absl::Now() - start);
  segment_size_ += data.size();
  if (through) {
    MutexLock lock(&mu_);
    ++stats_.fsyncs;
  } else if (unsynced_since_ == absl::InfiniteFuture()) {
    unsynced_since_ = absl::Now();
  }
  return absl::OkStatus();
}

absl::Status Wal::SyncNow() {
  if (unsynced_since_ == absl::InfiniteFuture()) return absl::OkStatus();
  if (absl::Status s = Sync(unsynced_since_); !s.ok()) return s;
  unsynced_since_ = absl::InfiniteFuture();
  return absl::OkStatus();
}

absl::Status Wal::Sync(absl::Time unsynced_since) {
  if (const int err = Fault(DiskOp::kSync); err != 0) {
    return files::ErrnoStatus("fsync", segment_path_, err);
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = files::Fsync(fd_, segment_path_); !s.ok()) return s;
  if (options_.on_io) options_.on_io(WalIo::kFsync, absl::Now() - start);
  const absl::Duration waited = absl::Now() - unsynced_since;
  MutexLock lock(&mu_);
  ++stats_.fsyncs;
  stats_.longest_unsynced = std::max(stats_.longest_unsynced, waited);
  return absl::OkStatus();
}

absl::Duration Wal::SpinWhileTogetherOpen(absl::Duration most) {
  const uint64_t ended = togethers_ended_.load(std::memory_order_relaxed);
  flusher_spinning_ = true;
  mu_.Unlock();
  const absl::Time start = absl::Now();
  absl::Time now = start;
  while (togethers_ended_.load(std::memory_order_acquire) == ended && now - start < most) {
    now = absl::Now();
  }
  mu_.Lock();
  flusher_spinning_ = false;
  return std::max(now - start, absl::Nanoseconds(1));
}

bool Wal::NextRound(Round* round) {
  const bool sync_each_second = options_.fsync == FsyncPolicy::kEverySecond;
  // Set once a batch is pending.
  absl::Time group_deadline = absl::InfiniteFuture();
  // The flusher waited for a writer's turn: the writers have left what is
  // pending to it.
  bool waited_for_turn = false;
  // The flusher has slept since it last looked at the log: what it owns
  // (the fsync due) may need the turn.
  bool woke = false;
  // How long it has waited awake for batches started together.
  absl::Duration spun = absl::ZeroDuration();
  bool heard_together = false;
  while (true) {
    if (writing_) {
      // A writer holds the turn (kEverySecond, kNever): it gives it up after
      // its write, and no writer takes it while the flusher waits for it,
      // which it does only when it may have something to do.
      if (woke || stopping_ || rotate_requested_ || flusher_called_) {
        flusher_waiting_ = true;
        waited_for_turn = true;
      }
      work_bell_.Wait(&mu_, absl::Seconds(1));
      woke = true;
      continue;
    }
    flusher_waiting_ = false;
    // Writers step aside only until the flusher has had the turn once.
    const bool left_to_flusher = waited_for_turn;
    waited_for_turn = false;
    if (stopping_) break;
    if (!refusal_.ok()) {
      if (refusing_for_good_) {
        work_bell_.Wait(&mu_, absl::InfiniteDuration());
        woke = true;
        continue;
      }
      const absl::Duration left = retry_at_ - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      work_bell_.Wait(&mu_, left);
      woke = true;
      continue;
    }
    if (rotate_requested_) break;
    // Under kEverySecond and kNever, batches that someone waits for are
    // left to their writers unless one called the flusher.
    if (!pending_.empty() && (options_.fsync == FsyncPolicy::kAlways || flusher_called_ ||
                              left_to_flusher || waiters_.empty())) {
      // Only kAlways waits for a group (and counts writers).
      if (options_.fsync != FsyncPolicy::kAlways || pending_writers_ >= group_writers_ ||
          pending_.size() >= options_.max_write_bytes) {
        break;
      }
      if (togethers_open_ > 0 && flusher_called_ && !heard_together) {
        heard_together = true;
        if (options_.on_called_for_together_for_testing) {
          options_.on_called_for_together_for_testing();
        }
      }
      // Never on the CPU of the writer it waits for, which would stand still.
      if (togethers_open_ > 0 && spun < kTogetherSpin && sched_getcpu() != together_cpu_) {
        spun += SpinWhileTogetherOpen(kTogetherSpin - spun);
        continue;
      }
      const absl::Time now = absl::Now();
      if (group_deadline == absl::InfiniteFuture()) group_deadline = now + options_.max_group_wait;
      if (now >= group_deadline) break;
      work_bell_.Wait(&mu_, group_deadline - now);
      woke = true;
      continue;
    }
    if (sync_each_second && unsynced_since_ != absl::InfiniteFuture()) {
      const absl::Duration left = unsynced_since_ + absl::Seconds(1) - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      work_bell_.Wait(&mu_, left);
    } else {
      work_bell_.Wait(&mu_, absl::Seconds(1));
    }
    woke = true;
  }
  round->stopping = stopping_;
  if (!refusal_.ok()) return false;
  TakeRound(round);
  flusher_writing_ = true;
  return true;
}

void Wal::TakeRound(Round* round) {
  writing_ = true;
  // queued_ holds exactly the batches in pending_, in order: whole frames,
  // up to the rotation's offset and max_write_bytes (at least one frame;
  // the last round, while stopping, takes everything).
  const size_t limit = rotate_requested_ ? rotate_offset_ : pending_.size();
  const size_t most = stopping_ ? limit : options_.max_write_bytes;
  size_t take = 0;
  round->last_lsn = durable_lsn_;
  round->last_ticket = resolved_;
  for (const Queued& q : queued_) {
    if (take == limit || (take > 0 && take + q.frame_bytes > most)) break;
    take += q.frame_bytes;
    ++round->batches;
    round->last_lsn = q.lsn;
    round->last_ticket = q.ticket;
    round->event_sequence = std::max(round->event_sequence, q.last_event_sequence);
  }
  if (take == pending_.size()) {
    round->writers = pending_writers_;
    pending_writers_ = 0;
    round->data.swap(pending_);
    pending_.swap(spare_);
    // A call for what was pending is answered.
    flusher_called_ = false;
  } else {
    round->data.assign(pending_, 0, take);
    pending_.erase(0, take);
  }
  if (rotate_requested_) {
    rotate_offset_ -= take;
    round->rotate = rotate_offset_ == 0;
    rotate_requested_ = !round->rotate;
    round->rotate_lsn = rotate_lsn_;
  }
}

bool Wal::TakeWritersRound(Round* round) {
  if (writing_) {
    // Whoever writes goes on with what is pending: a writer while any waits,
    // the flusher when called.
    if (flusher_writing_) flusher_called_ = true;
    return false;
  }
  if (flusher_waiting_ || waiters_.empty() || pending_.empty() || !refusal_.ok() || stopping_ ||
      rotate_requested_) {
    return false;
  }
  // Reserving space and switching segments are the flusher's, and so is
  // a round that would need them.
  const uint64_t end = segment_size_ + pending_.size();
  if (end >= options_.segment_bytes || (options_.reserve_bytes > 0 && end > reserved_end_)) {
    flusher_called_ = true;
    work_bell_.Ring();
    return false;
  }
  TakeRound(round);
  return true;
}

void Wal::WriteWhileWaitedFor() {
  while (true) {
    Round round;
    {
      MutexLock lock(&mu_);
      if (!TakeWritersRound(&round)) return;
    }
    WriteAndSettle(&round, /*may_sync=*/false);
  }
}

void Wal::ReleaseTurn() {
  writing_ = false;
  flusher_writing_ = false;
  if (flusher_waiting_) work_bell_.Ring();
}

bool Wal::WriteRound(const Round& round, bool may_sync, absl::Status* error, bool* durable,
                     bool* for_good) {
  const bool sync_each_write = options_.fsync == FsyncPolicy::kAlways;
  const uint64_t good_offset = segment_size_;
  const absl::Time unsynced_before = unsynced_since_;
  *durable = false;
  *for_good = false;
  // kEverySecond's fsync once a second is done outside the turn (see
  // WriteAndSettle), but the last one, while stopping.
  const bool sync = may_sync && (sync_each_write || round.stopping);
  // kAlways writes through: the write is its own fdatasync, and leaves
  // nothing unsynced for SyncNow.
  absl::Status s = WriteOut(round.data, /*through=*/sync && sync_each_write);
  if (s.ok() && sync) {
    s = SyncNow();
    if (!s.ok() && !sync_each_write) {
      // What failed to sync was acknowledged once written: it cannot be
      // taken back, and whether it reached the disk is unknown.
      *durable = true;
      *for_good = true;
      *error = s;
      return false;
    }
  }
  if (!s.ok()) {
    // Nothing of the round was acknowledged: cut it off, so that the
    // segment never holds a partial or failed frame.
    *error = s;
    if (absl::Status cut = files::TruncateOpen(fd_, good_offset, segment_path_); !cut.ok()) {
      *error = absl::Status(cut.code(), absl::StrCat(s.message(), "; then ", cut.message()));
      *for_good = true;
    }
    segment_size_ = good_offset;
    reserved_end_ = good_offset;
    // What was written before the round, acknowledged, may still wait for
    // its fsync.
    unsynced_since_ = unsynced_before;
    return false;
  }
  *durable = true;
  if (round.rotate) {
    s = OpenSegment(round.rotate_lsn);
  } else if (segment_size_ >= options_.segment_bytes) {
    s = OpenSegment(round.last_lsn + 1);
  }
  *error = s;
  return s.ok();
}

void Wal::MarkDurable(const Round& round, Waiters* ready) {
  durable_lsn_ = round.last_lsn;
  if (options_.fsync == FsyncPolicy::kAlways && round.writers > 0) group_writers_ = round.writers;
  resolved_ = std::max(resolved_, round.last_ticket);
  while (!queued_.empty() && queued_.front().lsn <= round.last_lsn) {
    undos_front_ += queued_.front().undo_bytes;
    queued_.pop_front();
    ++stats_.batches_written;
  }
  if (queued_.empty()) {
    ClearUndos();
  } else if (undos_front_ >= kSpareMostBytes && undos_front_ >= undos_.size() / 2) {
    // Not yet empty after a large round: the undos still needed move to
    // the front, so that the buffer grows no further than they need.
    undos_.erase(0, undos_front_);
    undos_front_ = 0;
  }
  if (!round.data.empty()) {
    ++stats_.writes;
    stats_.bytes_written += round.data.size();
    bytes_since_rotate_ += round.data.size();
  }
  size_t settled = 0;
  while (settled < waiters_.size() && waiters_[settled].ticket <= resolved_) ++settled;
  ready->reserve(settled);
  while (!waiters_.empty() && waiters_.front().ticket <= resolved_) {
    ready->push_back(std::move(waiters_.front().done));
    waiters_.pop_front();
  }
}

void Wal::ClearUndos() {
  if (undos_.capacity() > kSpareMostBytes) {
    std::string().swap(undos_);
  } else {
    undos_.clear();
  }
  undos_front_ = 0;
}

std::vector<std::string> Wal::Refuse(const absl::Status& error, bool for_good) {
  refusal_ = RefusalFor(error, for_good, options_.retry_interval);
  refusing_.store(true, std::memory_order_release);
  refusing_for_good_ = for_good;
  refusing_since_ = absl::Now();
  ++stats_.write_failures;
  Log(LogLevel::kError, "%s", refusal_.message());

  std::vector<std::string> undos(queued_.size());
  size_t at = undos_front_;
  for (size_t i = 0; i < queued_.size(); ++i) {
    undos[queued_.size() - 1 - i].assign(undos_, at, queued_[i].undo_bytes);
    at += queued_[i].undo_bytes;
  }
  stats_.batches_rolled_back += queued_.size();
  queued_.clear();
  ClearUndos();
  pending_.clear();
  pending_writers_ = 0;
  // The failed batches' frames are not in the log: their LSNs are given
  // again, so that the log stays contiguous.
  next_lsn_ = durable_lsn_ + 1;
  rotate_requested_ = false;
  rotated_cv_.SignalAll();

  failures_.push_back({resolved_ + 1, last_ticket_, refusal_});
  if (failures_.size() > kFailuresKept) {
    forgotten_through_ = failures_.front().last;
    failures_.pop_front();
  }
  rolling_back_ = true;
  return undos;
}

void Wal::EndRollBack(Waiters* failed) {
  assert(rolling_back_ && "Options::roll_back did not call refuse");
  rolling_back_ = false;
  resolved_ = failures_.back().last;
  for (Waiter& waiter : waiters_) failed->push_back(std::move(waiter.done));
  waiters_.clear();
}

void Wal::Retry() {
  const size_t length = std::max(options_.reserve_bytes, kRetryBytes);
  if (absl::Status s = Reserve(length); !s.ok()) {
    MutexLock lock(&mu_);
    retry_at_ = absl::Now() + options_.retry_interval;
    return;
  }
  {
    MutexLock lock(&mu_);
    stats_.time_refusing += absl::Now() - refusing_since_;
    refusal_ = absl::OkStatus();
    refusing_.store(false, std::memory_order_release);
    Log(LogLevel::kInfo, "the write-ahead log can write again (%s): writes resume", segment_path_);
  }
  if (options_.on_writable_changed) options_.on_writable_changed(absl::OkStatus());
}

void Wal::Run() {
  while (true) {
    Round round;
    bool writing;
    {
      MutexLock lock(&mu_);
      writing = NextRound(&round);
    }
    if (!writing) {
      if (round.stopping) return;
      Retry();
      continue;
    }
    WriteAndSettle(&round, /*may_sync=*/true);
    if (round.stopping) return;
  }
}

void Wal::WriteAndSettle(Round* taken, bool may_sync) {
  const Round& round = *taken;
  absl::Status error;
  bool durable;
  bool for_good;
  const bool was_synced = unsynced_since_ == absl::InfiniteFuture();
  const bool ok = WriteRound(round, may_sync, &error, &durable, &for_good);
  // The flusher, which may sleep for a second when nothing is unsynced,
  // owes this write its fsync within a second.
  const bool sync_due_later = options_.fsync == FsyncPolicy::kEverySecond && was_synced &&
                              unsynced_since_ != absl::InfiniteFuture();
  // kEverySecond: the flusher's fsync, once a second, is done after the turn
  // is given back, so that writers go on writing meanwhile. What is written
  // from now on counts as unsynced; fd_ stays, as only the flusher switches
  // segments.
  absl::Time sync_since = absl::InfiniteFuture();
  if (ok && may_sync && options_.fsync == FsyncPolicy::kEverySecond &&
      unsynced_since_ != absl::InfiniteFuture() &&
      absl::Now() - unsynced_since_ >= absl::Seconds(1)) {
    sync_since = unsynced_since_;
    unsynced_since_ = absl::InfiniteFuture();
  }
  // Before the batches count as durable, so that whoever learns that a
  // batch is durable (a waiter, or a WhenDurable or Rotate that returns at
  // once) finds its events announced.
  if (durable && options_.on_durable && round.event_sequence != 0) {
    options_.on_durable(round.event_sequence);
  }
  Waiters ready;
  {
    MutexLock lock(&mu_);
    if (durable) MarkDurable(round, &ready);
    if (ok && round.rotate) {
      ++rotations_done_;
      bytes_since_rotate_ = 0;
      rotated_cv_.SignalAll();
    }
    if (ok) ReleaseTurn();
    if (sync_due_later) work_bell_.Ring();
    if (taken->data.capacity() <= kSpareMostBytes && taken->data.capacity() > spare_.capacity()) {
      taken->data.clear();
      spare_.swap(taken->data);
    }
  }
  Waiters failed;
  absl::Status refusal;
  // The turn is kept until the failed batches are undone.
  if (!ok) refusal = Fail(round, error, for_good, &failed);
  for (auto& fn : ready) fn(absl::OkStatus());
  for (auto& fn : failed) fn(refusal);
  if (sync_since != absl::InfiniteFuture()) {
    if (absl::Status s = Sync(sync_since); !s.ok()) {
      // What failed to sync was acknowledged once written: it cannot be
      // taken back, and whether it reached the disk is unknown.
      {
        MutexLock lock(&mu_);
        flusher_waiting_ = true;
        while (writing_) work_bell_.Wait(&mu_, absl::Seconds(1));
        flusher_waiting_ = false;
        writing_ = true;
        flusher_writing_ = true;
      }
      Waiters unsynced;
      const absl::Status refused = Fail(Round(), s, /*for_good=*/true, &unsynced);
      for (auto& fn : unsynced) fn(refused);
    }
  }
}

absl::Status Wal::Fail(const Round& round, const absl::Status& error, bool for_good,
                       Waiters* failed) {
  absl::Status refusal;
  auto refuse = [&] {
    MutexLock lock(&mu_);
    std::vector<std::string> undos = Refuse(error, for_good);
    refusal = refusal_;
    return undos;
  };
  // While stopping, the engine may be gone, and nobody reads any more.
  if (options_.roll_back && !round.stopping) {
    options_.roll_back(refuse);
  } else {
    refuse();
  }
  {
    // Only now, with the failed batches undone, may anyone learn that they
    // failed.
    MutexLock lock(&mu_);
    EndRollBack(failed);
    retry_at_ = absl::Now() + options_.retry_interval;
    ReleaseTurn();
    // The flusher retries.
    work_bell_.Ring();
  }
  if (options_.on_writable_changed && !round.stopping) options_.on_writable_changed(refusal);
  return refusal;
}

absl::StatusOr<WalReplayResult> ReplayWal(
    const std::string& dir, uint64_t from_lsn, bool truncate_damaged,
    absl::string_view truncate_damaged_name,
    const std::function<absl::Status(uint64_t lsn, absl::string_view batch)>& fn) {
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  if (!names.ok()) return names.status();
  std::vector<std::pair<uint64_t, std::string>> segments;
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (Wal::ParseSegmentName(name, &lsn)) segments.emplace_back(lsn, name);
  }
  std::sort(segments.begin(), segments.end());

  WalReplayResult result;
  result.next_lsn = from_lsn;
  // Segments wholly before from_lsn are covered by the snapshot.
  size_t first = 0;
  while (first + 1 < segments.size() && segments[first + 1].first <= from_lsn) ++first;
  bool expecting = false;
  uint64_t expected = 0;
  for (size_t i = first; i < segments.size(); ++i) {
    const auto& [segment_lsn, name] = segments[i];
    const std::string path = absl::StrCat(dir, "/", name);
    if (expecting && segment_lsn != expected) {
      return absl::DataLossError(absl::StrFormat(
          "write-ahead log segment %s starts at LSN %d but LSN %d was expected: a segment "
          "is missing",
          path, segment_lsn, expected));
    }
    if (!expecting && segment_lsn > from_lsn) {
      return absl::DataLossError(absl::StrFormat(
          "write-ahead log starts at LSN %d (%s) but the snapshot needs LSN %d onwards",
          segment_lsn, path, from_lsn));
    }
    absl::StatusOr<std::string> data = files::ReadAll(path);
    if (!data.ok()) return data.status();
    expecting = true;
    expected = segment_lsn;
    size_t offset = 0;
    while (true) {
      Frame frame;
      FrameStatus fs = ParseFrame(*data, offset, &frame);
      if (fs == FrameStatus::kEnd) break;
      if (fs == FrameStatus::kOk && frame.lsn != expected) fs = FrameStatus::kCorrupt;
      if (fs != FrameStatus::kOk && OnlyZerosFrom(*data, offset)) {
        // The zeros a log under kAlways fills ahead of its writes: the
        // segment ends here (a crash kept them).
        if (absl::Status s = files::Truncate(path, offset); !s.ok()) return s;
        break;
      }
      if (fs != FrameStatus::kOk) {
        const bool last_segment = i + 1 == segments.size();
        if (last_segment && !AnyValidFrameAfter(*data, offset)) {
          // A torn tail: the write the crash interrupted was never
          // acknowledged.
          result.cut_file = path;
          result.cut_bytes = data->size() - offset;
          if (absl::Status s = files::Truncate(path, offset); !s.ok()) return s;
          break;
        }
        const std::string where =
            absl::StrFormat("%s at offset %d (LSN %d, %s)", path, offset, expected,
                            fs == FrameStatus::kCorrupt ? "checksum mismatch" : "frame cut short");
        if (!truncate_damaged) {
          return absl::DataLossError(absl::StrCat(
              "the write-ahead log is damaged in the middle: ", where,
              ". Valid records follow the damage, so opening the store would silently drop "
              "acknowledged writes; it is not opened. Opening it with ",
              truncate_damaged_name, " discards everything from the damage on."));
        }
        result.discarded = where;
        if (absl::Status s = files::Truncate(path, offset); !s.ok()) return s;
        for (size_t j = i + 1; j < segments.size(); ++j) {
          if (absl::Status s = files::Remove(absl::StrCat(dir, "/", segments[j].second)); !s.ok()) {
            return s;
          }
        }
        result.next_lsn = std::max(from_lsn, expected);
        return result;
      }
      if (frame.lsn >= from_lsn) {
        if (absl::Status s = fn(frame.lsn, frame.payload); !s.ok()) {
          return absl::DataLossError(absl::StrFormat("%s at offset %d (LSN %d): %s", path, offset,
                                                     frame.lsn, s.message()));
        }
        ++result.batches;
      }
      offset += frame.size;
      ++expected;
    }
  }
  result.next_lsn = std::max(from_lsn, expecting ? expected : from_lsn);
  return result;
}

}  // namespace lapse

#include "server/storage/wal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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
    work_cv_.SignalAll();
  }
  // Not running when Open failed.
  if (flusher_.joinable()) flusher_.join();
  if (fd_ >= 0) ::close(fd_);
}

absl::Status Wal::OpenSegment(uint64_t first_lsn) {
  if (fd_ >= 0) {
    if (absl::Status s = files::Fsync(fd_, segment_path_); !s.ok()) return s;
    ::close(fd_);
    fd_ = -1;
  }
  segment_path_ = absl::StrCat(options_.dir, "/", SegmentName(first_lsn));
  fd_ = ::open(segment_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", segment_path_));
  }
  segment_size_ = 0;
  return files::FsyncDir(options_.dir);
}

void Wal::Append(std::string batch, uint64_t last_event_sequence) {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  AppendFrame(&pending_, next_lsn_++, batch);
  pending_event_sequence_ = std::max(pending_event_sequence_, last_event_sequence);
  work_cv_.Signal();
}

void Wal::WhenDurable(std::function<void(absl::Status)> done) {
  absl::Status ready;
  {
    MutexLock lock(&mu_);
    const uint64_t target = next_lsn_ - 1;
    if (failure_.ok() && durable_lsn_ < target) {
      waiters_[target].push_back(std::move(done));
      return;
    }
    ready = failure_;
  }
  done(ready);
}

absl::Status Wal::AwaitDurable() {
  Mutex mu;
  CondVar cv;
  bool done = false;
  absl::Status result;
  WhenDurable([&](absl::Status s) {
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
  MutexLock lock(&mu_);
  return failure_;
}

uint64_t Wal::bytes_since_rotate() const {
  MutexLock lock(&mu_);
  return bytes_since_rotate_;
}

WalStats Wal::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<uint64_t> Wal::Rotate() {
  MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  const uint64_t target = rotations_done_ + 1;
  rotate_requested_ = true;
  rotate_offset_ = pending_.size();
  rotate_lsn_ = next_lsn_;
  const uint64_t first_lsn = next_lsn_;
  work_cv_.Signal();
  while (rotations_done_ < target && failure_.ok())
    rotated_cv_.WaitWithTimeout(&mu_, absl::Seconds(1));
  if (!failure_.ok()) return failure_;
  return first_lsn;
}

void Wal::Fail(const absl::Status& status) {
  if (!failure_.ok()) return;
  failure_ = absl::UnavailableError(
      absl::StrCat("the write-ahead log failed, writes are refused: ", status.message()));
  Log(LogLevel::kError, "%s", failure_.message());
  rotated_cv_.SignalAll();
}

absl::Status Wal::WriteOut(absl::string_view data) {
  if (data.empty()) return absl::OkStatus();
  if (absl::Status s = files::WriteAll(fd_, data, segment_path_); !s.ok()) return s;
  segment_size_ += data.size();
  if (unsynced_since_ == absl::InfiniteFuture()) unsynced_since_ = absl::Now();
  return absl::OkStatus();
}

absl::Status Wal::SyncNow() {
  if (unsynced_since_ == absl::InfiniteFuture()) return absl::OkStatus();
  if (absl::Status s = files::Fsync(fd_, segment_path_); !s.ok()) return s;
  const absl::Duration waited = absl::Now() - unsynced_since_;
  unsynced_since_ = absl::InfiniteFuture();
  MutexLock lock(&mu_);
  ++stats_.fsyncs;
  stats_.longest_unsynced = std::max(stats_.longest_unsynced, waited);
  return absl::OkStatus();
}

void Wal::Run() {
  const bool sync_each_write = options_.fsync == FsyncPolicy::kAlways;
  const bool sync_each_second = options_.fsync == FsyncPolicy::kEverySecond;
  while (true) {
    std::string data;
    uint64_t last_lsn;
    uint64_t event_sequence;
    bool rotate;
    size_t rotate_offset;
    uint64_t rotate_lsn;
    bool stopping;
    {
      MutexLock lock(&mu_);
      while (pending_.empty() && !rotate_requested_ && !stopping_) {
        if (sync_each_second && unsynced_since_ != absl::InfiniteFuture()) {
          const absl::Duration left = unsynced_since_ + absl::Seconds(1) - absl::Now();
          if (left <= absl::ZeroDuration()) break;
          work_cv_.WaitWithTimeout(&mu_, left);
        } else {
          work_cv_.WaitWithTimeout(&mu_, absl::Seconds(1));
        }
      }
      if (!failure_.ok()) {
        pending_.clear();
        if (stopping_) return;
        continue;
      }
      data.swap(pending_);
      last_lsn = next_lsn_ - 1;
      event_sequence = pending_event_sequence_;
      rotate = rotate_requested_;
      rotate_offset = rotate_offset_;
      rotate_lsn = rotate_lsn_;
      rotate_requested_ = false;
      stopping = stopping_;
    }

    absl::Status s;
    const absl::string_view all(data);
    if (rotate) {
      s = WriteOut(all.substr(0, rotate_offset));
      if (s.ok()) s = OpenSegment(rotate_lsn);
      if (s.ok()) unsynced_since_ = absl::InfiniteFuture();
      if (s.ok()) s = WriteOut(all.substr(rotate_offset));
    } else {
      s = WriteOut(all);
    }
    const bool sync = sync_each_write || stopping ||
                      (sync_each_second && unsynced_since_ != absl::InfiniteFuture() &&
                       absl::Now() - unsynced_since_ >= absl::Seconds(1));
    if (s.ok() && sync) s = SyncNow();
    if (s.ok() && !rotate && segment_size_ >= options_.segment_bytes) {
      s = OpenSegment(last_lsn + 1);
      if (s.ok()) unsynced_since_ = absl::InfiniteFuture();
    }

    // Before durable_lsn_ moves, so that whoever learns that a batch is
    // durable (a waiter, or a WhenDurable or Rotate that returns at once) finds
    // its events announced. Only this thread fails the log, so s.ok() means
    // the log has not failed.
    if (s.ok() && options_.on_durable && event_sequence != 0) {
      options_.on_durable(event_sequence);
    }

    std::vector<std::function<void(absl::Status)>> ready;
    absl::Status outcome;
    {
      MutexLock lock(&mu_);
      if (!s.ok()) Fail(s);
      outcome = failure_;
      if (failure_.ok()) {
        durable_lsn_ = last_lsn;
        if (!data.empty()) {
          ++stats_.writes;
          stats_.bytes_written += data.size();
          bytes_since_rotate_ += data.size();
        }
      }
      if (rotate && failure_.ok()) {
        ++rotations_done_;
        bytes_since_rotate_ = data.size() - rotate_offset;
        rotated_cv_.SignalAll();
      }
      // Every waiter at or below the durable LSN, or all of them on failure.
      auto end = failure_.ok() ? waiters_.upper_bound(durable_lsn_) : waiters_.end();
      for (auto it = waiters_.begin(); it != end; ++it) {
        for (auto& fn : it->second) ready.push_back(std::move(fn));
      }
      waiters_.erase(waiters_.begin(), end);
    }
    for (auto& fn : ready) fn(outcome);
    if (stopping) return;
  }
}

absl::StatusOr<WalReplayResult> ReplayWal(
    const std::string& dir, uint64_t from_lsn, bool truncate_damaged,
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
              ". Valid records follow the damage, so starting would silently drop "
              "acknowledged writes; lapsed refuses to start. To start anyway and discard "
              "everything from the damage on, restart with --wal_truncate_damaged."));
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

#include "server/storage/wal.h"

#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/files.h"
#include "server/storage/frame.h"
#include "testing/disk_fault.h"
#include "testing/temp_dir.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::lapse::testing::DiskFault;
using ::lapse::testing::TempDir;
using ::lapse::testing::WaitWithPatience;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

std::string Batch(int i) { return absl::StrCat("batch-", i, std::string(i % 7, 'x')); }

// Writes `n` batches with LSNs 1..n into a fresh log in `dir`.
void WriteBatches(const std::string& dir, int n, FsyncPolicy fsync = FsyncPolicy::kNever) {
  absl::StatusOr<std::unique_ptr<Wal>> wal = Wal::Open({.dir = dir, .fsync = fsync}, 1);
  ASSERT_TRUE(wal.ok()) << wal.status();
  for (int i = 1; i <= n; ++i) (*wal)->Append(Batch(i), "", 0);
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
}

struct Replayed {
  absl::StatusOr<WalReplayResult> result;
  std::vector<std::string> batches;
};

Replayed Replay(const std::string& dir, uint64_t from = 1, bool truncate_damaged = false) {
  Replayed r;
  uint64_t expected = from;
  r.result = ReplayWal(dir, from, truncate_damaged, "the test's truncate option",
                       [&](uint64_t lsn, absl::string_view batch) {
                         EXPECT_EQ(lsn, expected++);
                         r.batches.emplace_back(batch);
                         return absl::OkStatus();
                       });
  return r;
}

// The batches the log in `dir` replays from its start (none if the replay
// fails, which fails the test).
std::vector<std::string> ReplayedBatches(const std::string& dir) {
  Replayed r = Replay(dir);
  EXPECT_TRUE(r.result.ok()) << r.result.status();
  return r.batches;
}

std::string OnlySegment(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> listed = files::List(dir);
  EXPECT_TRUE(listed.ok());
  const std::vector<std::string> names = listed.ok() ? *listed : std::vector<std::string>{};
  std::vector<std::string> segments;
  for (const std::string& n : names) {
    uint64_t lsn;
    if (Wal::ParseSegmentName(n, &lsn)) segments.push_back(absl::StrCat(dir, "/", n));
  }
  EXPECT_EQ(segments.size(), 1u);
  return segments.empty() ? "" : segments[0];
}

void WriteFile(const std::string& path, const std::string& data) {
  ASSERT_TRUE(files::Remove(path).ok());
  ASSERT_TRUE(files::WriteAtomically(path.substr(0, path.rfind('/')),
                                     path.substr(path.rfind('/') + 1), data)
                  .ok());
}

// Where each frame of `data`, whole frames only, ends.
std::vector<size_t> FrameEnds(absl::string_view data) {
  std::vector<size_t> ends;
  for (size_t off = 0; off < data.size();) {
    Frame f;
    if (ParseFrame(data, off, &f) != FrameStatus::kOk) {
      ADD_FAILURE() << "no whole frame at offset " << off;
      break;
    }
    off += f.size;
    ends.push_back(off);
  }
  return ends;
}

// Each test has a data directory of its own, empty at the start.
class WalTest : public ::testing::Test {
 protected:
  // A log in dir_ under `fsync` reserving `reserve_bytes` ahead (with none,
  // no write is left to the flusher for space), its disk calls going through
  // `hook`; null if it does not open.
  std::unique_ptr<Wal> OpenWatched(FsyncPolicy fsync, size_t reserve_bytes,
                                   std::function<int(DiskOp)> hook) {
    absl::StatusOr<std::unique_ptr<Wal>> wal =
        Wal::Open({.dir = dir_,
                   .fsync = fsync,
                   .reserve_bytes = reserve_bytes,
                   .disk_fault_for_testing = std::move(hook)},
                  1);
    EXPECT_TRUE(wal.ok()) << wal.status();
    return wal.ok() ? *std::move(wal) : nullptr;
  }

  const TempDir temp_dir_;
  const std::string& dir_ = temp_dir_.path();
};

TEST_F(WalTest, BatchesReplayInOrderWithTheirLsns) {
  WriteBatches(dir_, 50);
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  ASSERT_EQ(r.batches.size(), 50u);
  EXPECT_EQ(r.batches[9], Batch(10));
  EXPECT_EQ(r.result->next_lsn, 51u);
  EXPECT_TRUE(r.result->cut_file.empty());
}

TEST_F(WalTest, ReplayFromAnLsnSkipsEarlierBatches) {
  WriteBatches(dir_, 10);
  Replayed r = Replay(dir_, 8);
  ASSERT_TRUE(r.result.ok());
  EXPECT_EQ(r.batches.size(), 3u);
}

TEST_F(WalTest, EmptyDirectoryReplaysNothing) {
  Replayed r = Replay(dir_, 7);
  ASSERT_TRUE(r.result.ok());
  EXPECT_TRUE(r.batches.empty());
  EXPECT_EQ(r.result->next_lsn, 7u);
}

TEST_F(WalTest, AlwaysPolicySharesFsyncsBetweenConcurrentWriters) {
  auto wal = Wal::Open({.dir = dir_, .fsync = FsyncPolicy::kAlways}, 1);
  ASSERT_TRUE(wal.ok());
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        (*wal)->Append(Batch(t * kPerThread + i), "", 0);
        ASSERT_TRUE((*wal)->AwaitDurable().ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  const WalStats stats = (*wal)->stats();
  EXPECT_GT(stats.fsyncs, 0u);
  EXPECT_LE(stats.fsyncs, stats.writes);
  wal->reset();
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok());
  EXPECT_EQ(r.batches.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST_F(WalTest, OnDurableHearsTheLastEventSequenceBeforeTheWaiters) {
  Mutex mu;
  std::vector<uint64_t> heard;
  auto wal = Wal::Open({.dir = dir_,
                        .fsync = FsyncPolicy::kAlways,
                        .on_durable =
                            [&](uint64_t last_event_sequence) {
                              MutexLock lock(&mu);
                              heard.push_back(last_event_sequence);
                            }},
                       1);
  ASSERT_TRUE(wal.ok());
  (*wal)->Append("no expiry", "", 0);
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(heard.empty()) << "no durable batch has carried an event yet";
  }

  (*wal)->Append("expires 1..7", "", 7);
  (*wal)->Append("no expiry", "", 0);
  std::vector<uint64_t> heard_when_durable;
  (*wal)->WhenDurable(0, [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    MutexLock lock(&mu);
    heard_when_durable = heard;
  });
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
  MutexLock lock(&mu);
  EXPECT_THAT(heard_when_durable, Contains(7u));
  EXPECT_THAT(heard, Each(7u));
}

TEST_F(WalTest, RotateStartsANewSegmentAndReplayCrossesSegments) {
  auto wal = Wal::Open({.dir = dir_, .fsync = FsyncPolicy::kNever}, 1);
  ASSERT_TRUE(wal.ok());
  for (int i = 1; i <= 5; ++i) (*wal)->Append(Batch(i), "", 0);
  absl::StatusOr<uint64_t> next = (*wal)->Rotate();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 6u);
  for (int i = 6; i <= 9; ++i) (*wal)->Append(Batch(i), "", 0);
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
  wal->reset();
  EXPECT_TRUE(files::ReadAll(absl::StrCat(dir_, "/", Wal::SegmentName(6))).ok());
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok());
  EXPECT_EQ(r.batches.size(), 9u);
  Replayed tail = Replay(dir_, 6);
  EXPECT_EQ(tail.batches.size(), 4u);
}

TEST_F(WalTest, SegmentsRollOverBySize) {
  {
    auto wal = Wal::Open({.dir = dir_, .fsync = FsyncPolicy::kNever, .segment_bytes = 200}, 1);
    ASSERT_TRUE(wal.ok());
    for (int i = 1; i <= 40; ++i) {
      (*wal)->Append(Batch(i), "", 0);
      ASSERT_TRUE((*wal)->AwaitDurable().ok());
    }
  }
  EXPECT_GT(files::List(dir_)->size(), 3u);
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 40u);
}

TEST_F(WalTest, ATruncationAtAnyOffsetKeepsEveryWholeBatchAndCutsTheRest) {
  WriteBatches(dir_, 12);
  const std::string path = OnlySegment(dir_);
  const std::string original = *files::ReadAll(path);
  const std::vector<size_t> ends = FrameEnds(original);
  for (size_t cut = 0; cut <= original.size(); ++cut) {
    WriteFile(path, original.substr(0, cut));
    Replayed r = Replay(dir_);
    ASSERT_TRUE(r.result.ok()) << "cut at " << cut << ": " << r.result.status();
    const size_t whole = std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin();
    EXPECT_EQ(r.batches.size(), whole) << "cut at " << cut;
    const size_t kept = whole == 0 ? 0 : ends[whole - 1];
    EXPECT_EQ(r.result->cut_bytes, cut - kept) << "cut at " << cut;
    EXPECT_EQ(files::ReadAll(path)->size(), kept) << "the torn tail is cut off the file";
  }
}

TEST_F(WalTest, ABitFlipInTheLastBatchIsATornTail) {
  WriteBatches(dir_, 5);
  const std::string path = OnlySegment(dir_);
  std::string data = *files::ReadAll(path);
  data[data.size() - 2] ^= 0x10;
  WriteFile(path, data);
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 4u);
  EXPECT_GT(r.result->cut_bytes, 0u);
}

// The refusal names the truncate option as the store's configurer calls it,
// never a flag of lapsed's: lapsed's wiring gives its flag as that name.
TEST_F(WalTest, ABitFlipInTheMiddleRefusesToReplayNamingFileOffsetAndTheTruncateOption) {
  WriteBatches(dir_, 10);
  const std::string path = OnlySegment(dir_);
  const std::string original = *files::ReadAll(path);
  // Flip one bit in every byte of the first frames, one at a time.
  Frame first;
  ASSERT_EQ(ParseFrame(original, 0, &first), FrameStatus::kOk);
  for (size_t pos = 0; pos < 3 * first.size; ++pos) {
    std::string data = original;
    data[pos] ^= 0x04;
    WriteFile(path, data);
    Replayed r = Replay(dir_);
    ASSERT_FALSE(r.result.ok()) << "flip at " << pos;
    EXPECT_EQ(r.result.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(r.result.status().message(), HasSubstr(path));
    EXPECT_THAT(r.result.status().message(),
                HasSubstr("Opening it with the test's truncate option discards everything"));
    EXPECT_THAT(r.result.status().message(), Not(HasSubstr("--")));
    EXPECT_EQ(*files::ReadAll(path), data) << "a refused start changes nothing";
  }
}

TEST_F(WalTest, TruncateDamagedKeepsWhatPrecedesTheDamage) {
  WriteBatches(dir_, 10);
  const std::string path = OnlySegment(dir_);
  std::string data = *files::ReadAll(path);
  Frame first, second;
  ASSERT_EQ(ParseFrame(data, 0, &first), FrameStatus::kOk);
  ASSERT_EQ(ParseFrame(data, first.size, &second), FrameStatus::kOk);
  data[first.size + second.size + kFrameHeaderSize + 1] ^= 0x01;  // In batch 3.
  WriteFile(path, data);
  Replayed r = Replay(dir_, 1, /*truncate_damaged=*/true);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 2u);
  EXPECT_THAT(r.result->discarded, HasSubstr("LSN 3"));
  EXPECT_EQ(r.result->next_lsn, 3u);
}

TEST_F(WalTest, AMissingSegmentIsDataLoss) {
  {
    auto wal = Wal::Open({.dir = dir_, .fsync = FsyncPolicy::kNever}, 1);
    ASSERT_TRUE(wal.ok());
    for (int round = 0; round < 3; ++round) {
      (*wal)->Append(Batch(round), "", 0);
      ASSERT_TRUE((*wal)->Rotate().ok());
    }
  }
  ASSERT_TRUE(files::Remove(absl::StrCat(dir_, "/", Wal::SegmentName(2))).ok());
  Replayed r = Replay(dir_);
  EXPECT_EQ(r.result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.result.status().message(), HasSubstr("missing"));
}

// Frames of batches `from`..`to` with their own LSNs, as a segment holds them.
std::string Frames(int from, int to) {
  std::string data;
  for (int i = from; i <= to; ++i) AppendFrame(&data, i, Batch(i));
  return data;
}

TEST_F(WalTest, UnderAlwaysWritesGoOverZerosFilledAheadAndCloseCutsThemOff) {
  const std::string frames = Frames(1, 3);
  {
    auto wal =
        Wal::Open({.dir = dir_, .fsync = FsyncPolicy::kAlways, .reserve_bytes = 64 << 10}, 1);
    ASSERT_TRUE(wal.ok());
    ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(1), "", 0)).ok());
    const std::string path = OnlySegment(dir_);
    const uint64_t filled = *files::FileSize(path);
    EXPECT_GE(filled, uint64_t{64} << 10) << "zeros written ahead";
    ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(2), "", 0)).ok());
    ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(3), "", 0)).ok());
    const std::string image = *files::ReadAll(path);
    EXPECT_EQ(image.size(), filled) << "the writes went over the zeros: the size never changed";
    EXPECT_EQ(image.substr(0, frames.size()), frames);
    EXPECT_TRUE(OnlyZerosFrom(image, frames.size()));
  }
  EXPECT_EQ(*files::ReadAll(OnlySegment(dir_)), frames);
}

TEST_F(WalTest, ZerosAtTheEndOfTheLastSegmentAreItsEndNotATornTail) {
  const std::string frames = Frames(1, 4);
  const std::string path = absl::StrCat(dir_, "/", Wal::SegmentName(1));
  WriteFile(path, frames + std::string(4096, '\0'));
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 4u);
  EXPECT_EQ(r.result->next_lsn, 5u);
  EXPECT_TRUE(r.result->cut_file.empty());
  EXPECT_EQ(r.result->cut_bytes, 0u);
  EXPECT_EQ(*files::ReadAll(path), frames) << "the zeros are cut off";
}

TEST_F(WalTest, ZerosAtTheEndOfAnEarlierSegmentEndItAndReplayGoesOn) {
  // A crash between starting a segment and cutting the zeros off the last.
  WriteFile(absl::StrCat(dir_, "/", Wal::SegmentName(1)), Frames(1, 3) + std::string(4096, '\0'));
  WriteFile(absl::StrCat(dir_, "/", Wal::SegmentName(4)), Frames(4, 5));
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 5u);
  EXPECT_EQ(r.result->next_lsn, 6u);
}

TEST_F(WalTest, ATornWriteOverZerosKeepsEveryWholeBatchAndCutsTheRest) {
  const std::string original = Frames(1, 12);
  const std::string zeros(4096, '\0');
  const std::string path = absl::StrCat(dir_, "/", Wal::SegmentName(1));
  const std::vector<size_t> ends = FrameEnds(original);
  for (size_t cut = 0; cut <= original.size(); ++cut) {
    WriteFile(path, original.substr(0, cut) + zeros);
    Replayed r = Replay(dir_);
    ASSERT_TRUE(r.result.ok()) << "cut at " << cut << ": " << r.result.status();
    const size_t whole = std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin();
    EXPECT_EQ(r.batches.size(), whole) << "cut at " << cut;
    const size_t kept = whole == 0 ? 0 : ends[whole - 1];
    EXPECT_EQ(r.result->cut_bytes, cut == kept ? 0 : cut - kept + zeros.size()) << "cut at " << cut;
    EXPECT_EQ(files::ReadAll(path)->size(), kept) << "cut at " << cut;
  }
}

TEST_F(WalTest, ZerosBetweenFramesAreDamageInTheMiddle) {
  WriteFile(absl::StrCat(dir_, "/", Wal::SegmentName(1)),
            Frames(1, 2) + std::string(64, '\0') + Frames(3, 4));
  Replayed r = Replay(dir_);
  EXPECT_EQ(r.result.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(WalTest, ParsesFsyncPolicies) {
  EXPECT_EQ(*ParseFsyncPolicy("always"), FsyncPolicy::kAlways);
  EXPECT_EQ(*ParseFsyncPolicy("everysec"), FsyncPolicy::kEverySecond);
  EXPECT_EQ(*ParseFsyncPolicy("never"), FsyncPolicy::kNever);
  EXPECT_EQ(ParseFsyncPolicy("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

// What a log told its listeners: whether it takes writes, and the undos it
// handed back. Thread-safe.
class Heard {
 public:
  // `options` on a disk that `disk` (a DiskFault's or a DiskGate's hook)
  // fails or holds up, retrying every millisecond while refusing, with the
  // listeners wired to this object.
  Wal::Options OnFaultyDisk(std::function<int(DiskOp)> disk, Wal::Options options) {
    options.retry_interval = absl::Milliseconds(1);
    options.disk_fault_for_testing = std::move(disk);
    options.on_writable_changed = [this](const absl::Status& s) {
      MutexLock lock(&mu_);
      writable_.push_back(s);
      cv_.SignalAll();
    };
    options.roll_back = [this](const std::function<std::vector<std::string>()>& refuse) {
      std::vector<std::string> undos = refuse();
      MutexLock lock(&mu_);
      undos_.insert(undos_.end(), undos.begin(), undos.end());
    };
    return options;
  }

  // Waits until `n` changes were heard; all of them.
  std::vector<absl::Status> WaitForChanges(size_t n) {
    MutexLock lock(&mu_);
    EXPECT_TRUE(WaitWithPatience(
        mu_, cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return writable_.size() >= n; }));
    return writable_;
  }
  std::vector<std::string> undos() {
    MutexLock lock(&mu_);
    return undos_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<absl::Status> writable_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> undos_ ABSL_GUARDED_BY(mu_);
};

// How the batch of `ticket` ended.
absl::Status Outcome(Wal& wal, CommitTicket ticket) {
  Mutex mu;
  CondVar cv;
  bool done = false;
  absl::Status result;
  wal.WhenDurable(ticket, [&](absl::Status s) {
    MutexLock lock(&mu);
    result = std::move(s);
    done = true;
    cv.Signal();
  });
  MutexLock lock(&mu);
  EXPECT_TRUE(WaitWithPatience(mu, cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done; }));
  return result;
}

TEST_F(WalTest, OpenThatCannotCreateItsSegmentFailsWithoutAborting) {
  DiskFault disk;
  disk.Fail(ENOSPC, {DiskOp::kCreate});
  absl::StatusOr<std::unique_ptr<Wal>> wal =
      Wal::Open({.dir = dir_, .disk_fault_for_testing = disk.Hook()}, 1);
  EXPECT_EQ(wal.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(wal.status().message(), HasSubstr(Wal::SegmentName(1)));
}

TEST_F(WalTest, AFailedWriteLeavesNoFrameFailsEveryBatchNotDurableAndResumesOnceHealed) {
  DiskFault disk;
  Heard heard;
  // No space reserved ahead, so that the write itself fails, half done.
  auto wal =
      Wal::Open(heard.OnFaultyDisk(disk.Hook(),
                                   {.dir = dir_, .fsync = FsyncPolicy::kNever, .reserve_bytes = 0}),
                1);
  ASSERT_TRUE(wal.ok());
  Wal& log = **wal;
  ASSERT_TRUE(Outcome(log, log.Append(Batch(1), "undo 1", 0)).ok());

  disk.Fail(ENOSPC, {DiskOp::kWrite, DiskOp::kReserve});
  const CommitTicket second = log.Append(Batch(2), "undo 2", 0);
  const CommitTicket third = log.Append(Batch(3), "undo 3", 0);
  const absl::Status failed = Outcome(log, second);
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.message(), HasSubstr("disk full"));
  EXPECT_THAT(failed.message(), HasSubstr("No space left on device"));
  EXPECT_THAT(failed.message(), HasSubstr("resume by themselves"));
  EXPECT_EQ(Outcome(log, third), failed);
  // The third batch was either queued behind the failed write, and undone
  // with it, newest first, or appended once the log refused: then it was
  // refused up front (the engine never appends then: see Engine::RollBack).
  const std::vector<std::string> undos = heard.undos();
  EXPECT_THAT(undos, AnyOf(ElementsAre("undo 3", "undo 2"), ElementsAre("undo 2")));
  EXPECT_EQ(log.status(), failed);
  EXPECT_EQ(Outcome(log, log.Append(Batch(4), "undo 4", 0)), failed) << "refused while refusing";
  WalStats stats = log.stats();
  EXPECT_TRUE(stats.refusing);
  EXPECT_EQ(stats.write_failures, 1u);
  EXPECT_EQ(stats.batches_rolled_back, undos.size());

  // The half-written frame was cut off: the log holds only what was durable.
  Replayed during = Replay(dir_);
  ASSERT_TRUE(during.result.ok()) << during.result.status();
  EXPECT_THAT(during.batches, ElementsAre(Batch(1)));
  EXPECT_TRUE(during.result->cut_file.empty());

  disk.Heal();
  EXPECT_TRUE(heard.WaitForChanges(2).back().ok());
  EXPECT_TRUE(log.status().ok());
  ASSERT_TRUE(Outcome(log, log.Append(Batch(5), "undo 5", 0)).ok());
  stats = log.stats();
  EXPECT_FALSE(stats.refusing);
  EXPECT_GT(stats.time_refusing, absl::ZeroDuration());
  wal->reset();
  Replayed after = Replay(dir_);
  ASSERT_TRUE(after.result.ok()) << after.result.status();
  EXPECT_THAT(after.batches, ElementsAre(Batch(1), Batch(5))) << "with consecutive LSNs";
}

TEST_F(WalTest, NoWriterLearnsOfAFailureBeforeItsBatchIsUndone) {
  DiskFault disk;
  Mutex mu;
  CommitTicket ticket = 0;
  std::atomic<bool> answered{false};
  bool answered_during_roll_back = true;
  std::unique_ptr<Wal> wal;
  Wal::Options options{.dir = dir_,
                       .fsync = FsyncPolicy::kNever,
                       .retry_interval = absl::Milliseconds(1),
                       .disk_fault_for_testing = disk.Hook()};
  options.roll_back = [&](const std::function<std::vector<std::string>()>& refuse) {
    refuse();
    // A writer that asks now, between the failure and the undo, waits.
    MutexLock lock(&mu);
    wal->WhenDurable(ticket, [&](absl::Status) { answered = true; });
    answered_during_roll_back = answered;
  };
  absl::StatusOr<std::unique_ptr<Wal>> opened = Wal::Open(options, 1);
  ASSERT_TRUE(opened.ok());
  wal = *std::move(opened);
  disk.Fail(ENOSPC, {DiskOp::kWrite, DiskOp::kReserve});
  {
    MutexLock lock(&mu);
    ticket = wal->Append(Batch(1), "undo 1", 0);
  }
  EXPECT_EQ(Outcome(*wal, ticket).code(), absl::StatusCode::kResourceExhausted);
  MutexLock lock(&mu);
  EXPECT_FALSE(answered_during_roll_back);
}

TEST_F(WalTest, AFailedReservationWritesNothing) {
  DiskFault disk;
  Heard heard;
  auto wal = Wal::Open(
      heard.OnFaultyDisk(disk.Hook(),
                         {.dir = dir_, .fsync = FsyncPolicy::kNever, .reserve_bytes = 4096}),
      1);
  ASSERT_TRUE(wal.ok());
  disk.Fail(EDQUOT, {DiskOp::kReserve});
  EXPECT_EQ(Outcome(**wal, (*wal)->Append(Batch(1), "", 0)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(files::ReadAll(OnlySegment(dir_))->size(), 0u);
  EXPECT_GT(disk.failed(), 0);
}

TEST_F(WalTest, AFailedFsyncUnderAlwaysRollsBackAndResumes) {
  DiskFault disk;
  Heard heard;
  auto wal =
      Wal::Open(heard.OnFaultyDisk(disk.Hook(), {.dir = dir_, .fsync = FsyncPolicy::kAlways}), 1);
  ASSERT_TRUE(wal.ok());
  ASSERT_TRUE(Outcome(**wal, (*wal)->Append(Batch(1), "", 0)).ok());
  disk.Fail(EIO, {DiskOp::kSync});
  const absl::Status failed = Outcome(**wal, (*wal)->Append(Batch(2), "undo 2", 0));
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("Input/output error"));
  EXPECT_THAT(heard.undos(), ElementsAre("undo 2"));
  disk.Heal();
  EXPECT_TRUE(heard.WaitForChanges(2).back().ok());
  ASSERT_TRUE(Outcome(**wal, (*wal)->Append(Batch(3), "", 0)).ok());
  wal->reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(1), Batch(3)));
}

TEST_F(WalTest, AFailedFsyncOfAcknowledgedWritesRefusesWritesForGood) {
  DiskFault disk;
  Heard heard;
  auto wal = Wal::Open(
      heard.OnFaultyDisk(disk.Hook(), {.dir = dir_, .fsync = FsyncPolicy::kEverySecond}), 1);
  ASSERT_TRUE(wal.ok());
  ASSERT_TRUE(Outcome(**wal, (*wal)->Append(Batch(1), "undo 1", 0)).ok());
  disk.Fail(EIO, {DiskOp::kSync});
  // The fsync due a second after the write fails.
  const absl::Status refusal = heard.WaitForChanges(1).front();
  EXPECT_EQ(refusal.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(refusal.message(), HasSubstr("until lapsed is restarted"));
  EXPECT_TRUE(heard.undos().empty()) << "an acknowledged write is not undone";
  disk.Heal();
  EXPECT_EQ(Outcome(**wal, (*wal)->Append(Batch(2), "", 0)), refusal);
}

TEST_F(WalTest, AFailedWriteLeavesTheFsyncOfEarlierWritesDue) {
  DiskFault disk;
  Heard heard;
  auto wal = Wal::Open(
      heard.OnFaultyDisk(disk.Hook(), {.dir = dir_, .fsync = FsyncPolicy::kEverySecond}), 1);
  ASSERT_TRUE(wal.ok());
  ASSERT_TRUE(Outcome(**wal, (*wal)->Append(Batch(1), "", 0)).ok());
  disk.Fail(ENOSPC, {DiskOp::kWrite});
  EXPECT_FALSE(Outcome(**wal, (*wal)->Append(Batch(2), "", 0)).ok());
  disk.Heal();
  EXPECT_TRUE(heard.WaitForChanges(2).back().ok());
  // Batch 1 was acknowledged unsynced: its fsync still comes, with no
  // further write.
  EXPECT_TRUE(disk.WaitForCalls(DiskOp::kSync, 1));
}

// Restores the file size limit, and SIGXFSZ's disposition, on scope exit.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_), 0);
    previous_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    Set(bytes);
  }
  ~FileSizeLimit() {
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_), 0);
    ::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  void Set(rlim_t bytes) {
    rlimit limit = saved_;
    limit.rlim_cur = std::min(bytes, saved_.rlim_max);
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  void Lift() { EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_), 0); }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

// A log in `dir` under `fsync` reserving `reserve_bytes` ahead meets the
// file size limit: it refuses writes until the limit is lifted, then resumes,
// and replays exactly the batches acknowledged.
void ExpectTheFileSizeLimitRefusesWritesUntilItIsLifted(const std::string& dir, FsyncPolicy fsync,
                                                        size_t reserve_bytes) {
  Heard heard;
  DiskFault disk;  // Fails nothing: counts the retries.
  auto wal = Wal::Open(
      heard.OnFaultyDisk(disk.Hook(), {.dir = dir, .fsync = fsync, .reserve_bytes = reserve_bytes}),
      1);
  ASSERT_TRUE(wal.ok());
  const std::string big(16 << 10, 'x');
  std::vector<std::string> durable;
  absl::Status failed;
  {
    FileSizeLimit limit(100 << 10);
    // A batch crosses the limit (or the zeros filled ahead of it do): EFBIG.
    for (int i = 0; i < 10 && failed.ok(); ++i) {
      const std::string batch = absl::StrCat(i, big);
      failed = Outcome(**wal, (*wal)->Append(batch, "", 0));
      if (failed.ok()) durable.push_back(batch);
    }
    EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(failed.message(), HasSubstr("File too large"));
    // Retrying does not let writes through while the limit holds.
    ASSERT_TRUE(disk.WaitForCalls(DiskOp::kReserve, disk.calls(DiskOp::kReserve) + 3));
    EXPECT_EQ((*wal)->status().code(), absl::StatusCode::kResourceExhausted);
    limit.Lift();
  }
  // Writes resume by themselves once the limit is gone.
  const std::vector<absl::Status> changes = heard.WaitForChanges(2);
  ASSERT_EQ(changes.size(), 2u) << "refused once, resumed once";
  EXPECT_TRUE(changes[1].ok());
  const std::string after = absl::StrCat("after", big);
  ASSERT_TRUE(Outcome(**wal, (*wal)->Append(after, "", 0)).ok());
  durable.push_back(after);
  wal->reset();
  Replayed r = Replay(dir);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches, durable);
}

TEST_F(WalTest, TheFileSizeLimitRefusesWritesUntilItIsLifted) {
  ExpectTheFileSizeLimitRefusesWritesUntilItIsLifted(dir_, FsyncPolicy::kNever, 0);
}

TEST_F(WalTest, UnderAlwaysTheFileSizeLimitStopsTheZerosFilledAheadUntilItIsLifted) {
  ExpectTheFileSizeLimitRefusesWritesUntilItIsLifted(dir_, FsyncPolicy::kAlways, 16 << 10);
}

TEST_F(WalTest, UnderAlwaysSegmentsRollOverAndEachIsCutToItsFrames) {
  {
    auto wal = Wal::Open(
        {.dir = dir_, .fsync = FsyncPolicy::kAlways, .segment_bytes = 200, .reserve_bytes = 4096},
        1);
    ASSERT_TRUE(wal.ok());
    for (int i = 1; i <= 40; ++i) {
      ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(i), "", 0)).ok());
    }
  }
  const std::vector<std::string> names = *files::List(dir_);
  EXPECT_GT(names.size(), 3u);
  for (const std::string& name : names) {
    const std::string data = *files::ReadAll(absl::StrCat(dir_, "/", name));
    EXPECT_TRUE(data.empty() || data.back() != 0) << name << " keeps zeros at its end";
  }
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.batches.size(), 40u);
  EXPECT_TRUE(r.result->cut_file.empty());
}

// Lets through the first `allowed` calls of one disk operation, holding the
// rest until Allow (kPatience at most), and fails them from the `fail_from`th
// on. Thread-safe.
class DiskGate {
 public:
  explicit DiskGate(DiskOp op) : op_(op) {}

  std::function<int(DiskOp)> Hook() {
    return [this](DiskOp op) { return op == op_ ? Pass() : 0; };
  }
  // Lets the first `n` calls through.
  void Allow(int n) {
    MutexLock lock(&mu_);
    allowed_ = n;
    cv_.SignalAll();
  }
  // Calls from the `n`th on fail with `err`.
  void FailFrom(int n, int err) {
    MutexLock lock(&mu_);
    fail_from_ = n;
    err_ = err;
  }
  // Waits until the `n`th call has come.
  bool WaitForCall(int n) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return calls_ >= n; });
  }

 private:
  int Pass() {
    MutexLock lock(&mu_);
    const int n = ++calls_;
    cv_.SignalAll();
    WaitWithPatience(mu_, cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return n <= allowed_; });
    return n >= fail_from_ ? err_ : 0;
  }

  const DiskOp op_;
  Mutex mu_;
  CondVar cv_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int allowed_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_from_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int>::max();
  int err_ ABSL_GUARDED_BY(mu_) = 0;
};

// The answers writers got, in the order they came. Thread-safe.
class Answers {
 public:
  // Asks `wal` for the outcome of `ticket`, recorded under `name`.
  void Await(Wal& wal, CommitTicket ticket, std::string name) {
    wal.WhenDurable(ticket, [this, name](absl::Status s) {
      MutexLock lock(&mu_);
      answers_.emplace_back(name, std::move(s));
      cv_.SignalAll();
    });
  }
  // Waits until `n` answers came; all of them.
  std::vector<std::pair<std::string, absl::Status>> WaitFor(size_t n) {
    MutexLock lock(&mu_);
    EXPECT_TRUE(WaitWithPatience(
        mu_, cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return answers_.size() >= n; }));
    return answers_;
  }
  std::vector<std::string> names() {
    MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, status] : answers_) names.push_back(name);
    return names;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<std::string, absl::Status>> answers_ ABSL_GUARDED_BY(mu_);
};

TEST_F(WalTest, OneFsyncCoversEveryWriterQueuedMeanwhileAndNoneIsAnsweredBeforeIt) {
  DiskGate syncs(DiskOp::kSync);
  auto wal = Wal::Open(
      {.dir = dir_, .fsync = FsyncPolicy::kAlways, .disk_fault_for_testing = syncs.Hook()}, 1);
  ASSERT_TRUE(wal.ok());
  Answers answers;
  answers.Await(**wal, (*wal)->Append(Batch(0), "", 0), "first");
  ASSERT_TRUE(syncs.WaitForCall(1));
  constexpr int kWriters = 8;
  std::vector<std::thread> writers;
  for (int i = 1; i <= kWriters; ++i) {
    writers.emplace_back(
        [&, i] { answers.Await(**wal, (*wal)->Append(Batch(i), "", 0), "group"); });
  }
  for (auto& w : writers) w.join();
  EXPECT_TRUE(answers.names().empty()) << "nothing is answered before its fsync";

  syncs.Allow(1);
  EXPECT_THAT(answers.WaitFor(1).front().first, "first");
  ASSERT_TRUE(syncs.WaitForCall(2));
  EXPECT_THAT(answers.names(), ElementsAre("first")) << "the group waits for its own fsync";

  syncs.Allow(2);
  const auto all = answers.WaitFor(1 + kWriters);
  for (const auto& [name, status] : all) EXPECT_TRUE(status.ok()) << name << ": " << status;
  const WalStats stats = (*wal)->stats();
  EXPECT_EQ(stats.writes, 2u);
  EXPECT_EQ(stats.fsyncs, 2u);
  EXPECT_EQ(stats.batches_written, 1u + kWriters);
}

TEST_F(WalTest, AFailedGroupFsyncFailsEachWriterOfTheGroupAfterTheRollBack) {
  DiskGate syncs(DiskOp::kSync);
  Heard heard;
  auto wal =
      Wal::Open(heard.OnFaultyDisk(syncs.Hook(), {.dir = dir_, .fsync = FsyncPolicy::kAlways}), 1);
  ASSERT_TRUE(wal.ok());
  Answers answers;
  answers.Await(**wal, (*wal)->Append(Batch(0), "undo 0", 0), "first");
  ASSERT_TRUE(syncs.WaitForCall(1));
  constexpr int kWriters = 5;
  for (int i = 1; i <= kWriters; ++i) {
    answers.Await(**wal, (*wal)->Append(Batch(i), absl::StrCat("undo ", i), 0), "group");
  }
  syncs.FailFrom(2, EIO);
  syncs.Allow(1'000);
  const auto all = answers.WaitFor(1 + kWriters);
  ASSERT_EQ(all.size(), 1u + kWriters);
  EXPECT_EQ(all[0].first, "first");
  EXPECT_TRUE(all[0].second.ok()) << all[0].second;
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_EQ(all[i].second.code(), absl::StatusCode::kUnavailable) << all[i].second;
  }
  EXPECT_THAT(heard.undos(), ElementsAre("undo 5", "undo 4", "undo 3", "undo 2", "undo 1"))
      << "every batch of the group undone, newest first, before its writer heard";
  wal->reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(0)));
}

TEST_F(WalTest, BatchesFailingAfterRoundsThatTookPartOfWhatWasPendingAreUndoneWithTheirOwnUndos) {
  DiskGate syncs(DiskOp::kSync);
  Heard heard;
  // One frame per round: the later batches stay queued while the first ones
  // are written.
  auto wal = Wal::Open(
      heard.OnFaultyDisk(syncs.Hook(),
                         {.dir = dir_, .fsync = FsyncPolicy::kAlways, .max_write_bytes = 1}),
      1);
  ASSERT_TRUE(wal.ok());
  // Large enough that, once two rounds are written, the log moves the undos
  // still needed to the front of the buffer it keeps them in.
  const auto undo = [](int i) {
    return std::string(size_t{700} << 10, static_cast<char>('a' + i));
  };
  Answers answers;
  answers.Await(**wal, (*wal)->Append(Batch(1), undo(1), 0), "1");
  ASSERT_TRUE(syncs.WaitForCall(1));
  for (int i = 2; i <= 4; ++i) {
    answers.Await(**wal, (*wal)->Append(Batch(i), undo(i), 0), absl::StrCat(i));
  }
  syncs.FailFrom(3, EIO);
  syncs.Allow(1'000);
  std::map<std::string, absl::StatusCode> codes;
  for (const auto& [name, status] : answers.WaitFor(4)) codes[name] = status.code();
  EXPECT_THAT(codes, ElementsAre(Pair("1", absl::StatusCode::kOk), Pair("2", absl::StatusCode::kOk),
                                 Pair("3", absl::StatusCode::kUnavailable),
                                 Pair("4", absl::StatusCode::kUnavailable)));
  // Each undo as its size and letter: the undos themselves are 700 KiB.
  std::vector<std::pair<size_t, char>> undone;
  for (const std::string& u : heard.undos()) undone.emplace_back(u.size(), u.empty() ? 0 : u[0]);
  EXPECT_THAT(undone, ElementsAre(Pair(undo(4).size(), 'e'), Pair(undo(3).size(), 'd')))
      << "the failed batches' undos, newest first, whole";
  for (const std::string& u : heard.undos()) {
    EXPECT_EQ(u.find_first_not_of(u[0]), std::string::npos) << "an undo mixes two batches'";
  }
  wal->reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(1), Batch(2)));
}

TEST_F(WalTest, UnderAlwaysTheNextFsyncWaitsForAsManyBatchesAsTheLastOneCovered) {
  DiskGate syncs(DiskOp::kSync);
  auto wal = Wal::Open({.dir = dir_,
                        .fsync = FsyncPolicy::kAlways,
                        .max_group_wait = ::lapse::testing::kPatience,
                        .disk_fault_for_testing = syncs.Hook()},
                       1);
  ASSERT_TRUE(wal.ok());
  Answers answers;
  answers.Await(**wal, (*wal)->Append(Batch(0), "", 0), "0");
  ASSERT_TRUE(syncs.WaitForCall(1));
  for (int i = 1; i <= 3; ++i) answers.Await(**wal, (*wal)->Append(Batch(i), "", 0), "group of 3");
  syncs.Allow(1);
  ASSERT_TRUE(syncs.WaitForCall(2));
  // Appended while the group of three is in its fsync; its writers come back
  // once answered.
  const CommitTicket first_back = (*wal)->Append(Batch(4), "", 0);
  syncs.Allow(1'000);
  answers.WaitFor(4);
  (*wal)->Append(Batch(5), "", 0);
  const CommitTicket last_back = (*wal)->Append(Batch(6), "", 0);
  ASSERT_TRUE((*wal)->AwaitDurable(last_back).ok());
  ASSERT_TRUE((*wal)->AwaitDurable(first_back).ok());
  const WalStats stats = (*wal)->stats();
  EXPECT_EQ(stats.writes, 3u) << "the three that came back share one write";
  EXPECT_EQ(stats.fsyncs, 3u);
}

TEST_F(WalTest, ALoneWriterUnderAlwaysIsWrittenAtOnce) {
  // A group wait that never ends: only a group of one may go.
  auto wal = Wal::Open(
      {.dir = dir_, .fsync = FsyncPolicy::kAlways, .max_group_wait = absl::InfiniteDuration()}, 1);
  ASSERT_TRUE(wal.ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(i), "", 0)).ok());
  }
  EXPECT_EQ((*wal)->stats().fsyncs, 5u);
}

// One stream's requests: a request is one writer, however many batches it
// carries, so a request smaller than the last is not held for the rest of a
// group that can only come after its answer.
TEST_F(WalTest, UnderAlwaysTheGroupWaitCountsBatchesStartedTogetherAsOneWriter) {
  // A group wait that never ends: only a group as large as the last may go.
  auto wal = Wal::Open(
      {.dir = dir_, .fsync = FsyncPolicy::kAlways, .max_group_wait = absl::InfiniteDuration()}, 1);
  ASSERT_TRUE(wal.ok());
  Answers answers;
  (*wal)->StartTogether([&] {
    for (int i = 0; i < 4; ++i) answers.Await(**wal, (*wal)->Append(Batch(i), "", 0), "four");
  });
  answers.WaitFor(4);
  (*wal)->StartTogether(
      [&] { answers.Await(**wal, (*wal)->Append(Batch(4), "", 0), "one, after four"); });
  for (const auto& [name, status] : answers.WaitFor(5)) EXPECT_TRUE(status.ok()) << name << status;
  EXPECT_EQ((*wal)->stats().fsyncs, 2u);
}

// The group wait is kAlways': under everysec the flusher writes batches
// started together, with events and nobody waiting, at once.
TEST_F(WalTest, UnderEverySecondTheGroupWaitNeverHoldsTheFlusher) {
  Mutex mu;
  CondVar cv;
  uint64_t heard = 0;
  auto wal = Wal::Open({.dir = dir_,
                        .fsync = FsyncPolicy::kEverySecond,
                        .max_group_wait = absl::InfiniteDuration(),
                        .on_durable =
                            [&](uint64_t last_event_sequence) {
                              MutexLock lock(&mu);
                              heard = last_event_sequence;
                              cv.SignalAll();
                            }},
                       1);
  ASSERT_TRUE(wal.ok());
  (*wal)->StartTogether([&] { (*wal)->Append("expires 1", "", 1); });
  MutexLock lock(&mu);
  EXPECT_TRUE(
      WaitWithPatience(mu, cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return heard == 1; }));
}

TEST_F(WalTest, AWriteTakesAtMostMaxWriteBytesOfWholeFrames) {
  DiskGate writes(DiskOp::kWrite);
  // Room for batches 4 and 5 together, the longest pair (Batch(i) grows
  // with i up to 6).
  std::string two_frames;
  AppendFrame(&two_frames, 4, Batch(4));
  AppendFrame(&two_frames, 5, Batch(5));
  auto wal = Wal::Open({.dir = dir_,
                        .fsync = FsyncPolicy::kNever,
                        .max_write_bytes = two_frames.size(),
                        .disk_fault_for_testing = writes.Hook()},
                       1);
  ASSERT_TRUE(wal.ok());
  (*wal)->Append(Batch(1), "", 0);
  ASSERT_TRUE(writes.WaitForCall(1));
  CommitTicket last = 0;
  for (int i = 2; i <= 6; ++i) last = (*wal)->Append(Batch(i), "", 0);
  writes.Allow(1'000);
  ASSERT_TRUE((*wal)->AwaitDurable(last).ok());
  EXPECT_EQ((*wal)->stats().writes, 4u) << "1, 2-3, 4-5, 6";
  wal->reset();
  EXPECT_THAT(ReplayedBatches(dir_),
              ElementsAre(Batch(1), Batch(2), Batch(3), Batch(4), Batch(5), Batch(6)));
}

TEST_F(WalTest, AwaitDurableOfATicketDoesNotWaitForLaterBatches) {
  DiskGate syncs(DiskOp::kSync);
  auto wal = Wal::Open(
      {.dir = dir_, .fsync = FsyncPolicy::kAlways, .disk_fault_for_testing = syncs.Hook()}, 1);
  ASSERT_TRUE(wal.ok());
  const CommitTicket first = (*wal)->Append(Batch(1), "", 0);
  ASSERT_TRUE(syncs.WaitForCall(1));
  Answers answers;
  answers.Await(**wal, (*wal)->Append(Batch(2), "", 0), "later");
  syncs.Allow(1);
  EXPECT_TRUE((*wal)->AwaitDurable(first).ok());
  EXPECT_TRUE(answers.names().empty()) << "the later batch's fsync is still held";
  syncs.Allow(2);
  EXPECT_TRUE(answers.WaitFor(1).front().second.ok());
}

TEST_F(WalTest, WaitersAskingOutOfTicketOrderAreEachAnsweredByTheWriteThatCoversTheirBatch) {
  DiskGate syncs(DiskOp::kSync);
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kAlways, 0, syncs.Hook());
  ASSERT_NE(wal, nullptr);
  std::vector<CommitTicket> tickets = {wal->Append(Batch(1), "", 0)};
  ASSERT_TRUE(syncs.WaitForCall(1));
  for (int i = 2; i <= 3; ++i) tickets.push_back(wal->Append(Batch(i), "", 0));
  Answers answers;
  for (int i = 2; i >= 0; --i) answers.Await(*wal, tickets[i], absl::StrCat("batch ", i + 1));
  syncs.Allow(1);
  answers.WaitFor(1);
  ASSERT_TRUE(syncs.WaitForCall(2));
  EXPECT_THAT(answers.names(), ElementsAre("batch 1")) << "the others wait for their own fsync";
  syncs.Allow(2);
  answers.WaitFor(3);
  EXPECT_THAT(answers.names(), ElementsAre("batch 1", "batch 2", "batch 3"));
}

// Which threads did what to the disk, in order. Thread-safe.
class DiskThreads {
 public:
  std::function<int(DiskOp)> Hook() {
    return [this](DiskOp op) {
      MutexLock lock(&mu_);
      ops_.emplace_back(op, std::this_thread::get_id());
      cv_.SignalAll();
      return 0;
    };
  }
  // The threads that did `op`, in order.
  std::vector<std::thread::id> ThreadsOf(DiskOp op) {
    MutexLock lock(&mu_);
    std::vector<std::thread::id> threads;
    for (const auto& [o, thread] : ops_) {
      if (o == op) threads.push_back(thread);
    }
    return threads;
  }
  int calls(DiskOp op) { return static_cast<int>(ThreadsOf(op).size()); }
  bool WaitForCall(DiskOp op) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (const auto& [o, thread] : ops_) {
        if (o == op) return true;
      }
      return false;
    });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<DiskOp, std::thread::id>> ops_ ABSL_GUARDED_BY(mu_);
};

// Only the first: after it the flusher is woken to schedule the fsync, and
// a writer that finds it waiting for the turn leaves its batch to it.
TEST_F(WalTest, UnderEverySecondALoneWriterWritesItsOwnBatchAndHearsOnItsThread) {
  DiskThreads disk;
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kEverySecond, 0, disk.Hook());
  ASSERT_NE(wal, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id answered_on;
  wal->WhenDurable(wal->Append(Batch(0), "", 0), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    answered_on = std::this_thread::get_id();
  });
  EXPECT_EQ(answered_on, me) << "answered before WhenDurable returned, by the writer";
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kWrite), ElementsAre(me));
  wal.reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(0)));
}

TEST_F(WalTest, AWriterWritesTheBatchesWaitedForDuringItsWriteInOrder) {
  DiskGate writes(DiskOp::kWrite);
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kEverySecond, 0, writes.Hook());
  ASSERT_NE(wal, nullptr);
  Answers answers;
  std::thread::id leader;
  std::thread::id followers_answered_on;
  std::thread first([&] {
    leader = std::this_thread::get_id();
    answers.Await(*wal, wal->Append(Batch(0), "", 0), "first");
  });
  ASSERT_TRUE(writes.WaitForCall(1));
  // Waited for while the first writer's write is in progress: not written
  // by their own threads, which return at once.
  for (int i = 1; i <= 3; ++i) answers.Await(*wal, wal->Append(Batch(i), "", 0), "follower");
  wal->WhenDurable(0, [&](absl::Status) { followers_answered_on = std::this_thread::get_id(); });
  EXPECT_THAT(answers.names(), ::testing::IsEmpty());
  writes.Allow(1'000);
  first.join();
  EXPECT_THAT(answers.names(), ElementsAre("first", "follower", "follower", "follower"))
      << "the first writer wrote the followers' batches before it returned";
  EXPECT_EQ(followers_answered_on, leader);
  EXPECT_EQ(wal->stats().writes, 2u) << "the followers share one write";
  wal.reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(0), Batch(1), Batch(2), Batch(3)));
}

TEST_F(WalTest, AWriterWhoseGroupWriteFailsUndoesTheWholeGroupBeforeAnyoneHears) {
  DiskGate writes(DiskOp::kWrite);
  Heard heard;
  auto wal = Wal::Open(
      heard.OnFaultyDisk(writes.Hook(),
                         {.dir = dir_, .fsync = FsyncPolicy::kEverySecond, .reserve_bytes = 0}),
      1);
  ASSERT_TRUE(wal.ok());
  Answers answers;
  std::thread::id leader;
  std::thread first([&] {
    leader = std::this_thread::get_id();
    answers.Await(**wal, (*wal)->Append(Batch(0), "undo 0", 0), "first");
  });
  ASSERT_TRUE(writes.WaitForCall(1));
  for (int i = 1; i <= 3; ++i) {
    answers.Await(**wal, (*wal)->Append(Batch(i), absl::StrCat("undo ", i), 0), "group");
  }
  writes.FailFrom(2, ENOSPC);
  writes.Allow(1'000);
  first.join();
  EXPECT_EQ(answers.names().size(), 4u) << "all answered by the first writer before it returned";
  const std::vector<std::pair<std::string, absl::Status>> all = answers.WaitFor(4);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(all[0].second.ok()) << all[0].second;
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_EQ(all[i].second.code(), absl::StatusCode::kResourceExhausted) << all[i].second;
  }
  EXPECT_THAT(heard.undos(), ElementsAre("undo 3", "undo 2", "undo 1"))
      << "every batch of the group undone, newest first, by the writer, before it returned";
  EXPECT_FALSE(heard.WaitForChanges(1).front().ok());
  wal->reset();
  Replayed r = Replay(dir_);
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_THAT(r.batches, ElementsAre(Batch(0))) << "the group's half-written frames cut off";
}

TEST_F(WalTest, UnderEverySecondWritersNeverFsyncTheFlusherDoes) {
  DiskThreads disk;
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kEverySecond, 0, disk.Hook());
  ASSERT_NE(wal, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  // Writes on until an fsync is due (a second after the first write) and
  // after it has been done.
  for (int i = 0; disk.calls(DiskOp::kSync) == 0; ++i) {
    ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(i % 7), "", 0)).ok());
  }
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(0), "", 0)).ok());
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kSync), Each(::testing::Ne(me)));
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kWrite), Contains(me));
}

TEST_F(WalTest, UnderEverySecondWritersGoOnWritingWhileTheFlusherFsyncs) {
  DiskGate syncs(DiskOp::kSync);
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kEverySecond, 0, syncs.Hook());
  ASSERT_NE(wal, nullptr);
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(1), "", 0)).ok());
  // The fsync due a second after that write is held.
  ASSERT_TRUE(syncs.WaitForCall(1));
  Answers answers;
  answers.Await(*wal, wal->Append(Batch(2), "", 0), "during the fsync");
  const std::vector<std::pair<std::string, absl::Status>> all = answers.WaitFor(1);
  ASSERT_EQ(all.size(), 1u) << "the write waited for the fsync";
  EXPECT_TRUE(all[0].second.ok()) << all[0].second;
  syncs.Allow(1'000);
  wal.reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(1), Batch(2)));
}

TEST_F(WalTest, UnderAlwaysOnlyTheFlusherWritesAndFsyncs) {
  DiskThreads disk;
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kAlways, 0, disk.Hook());
  ASSERT_NE(wal, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Outcome(*wal, wal->Append(Batch(i), "", 0)).ok());
    ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(i), "", 0)).ok());
  }
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kWrite), Each(::testing::Ne(me)));
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kSync), Each(::testing::Ne(me)));
  EXPECT_EQ(wal->stats().fsyncs, 6u);
}

// One system call instead of two per group: the write is its own fdatasync.
TEST_F(WalTest, UnderAlwaysEachWriteGoesThroughToTheDiskWithoutASeparateFdatasync) {
  Mutex mu;
  std::vector<WalIo> heard;
  auto wal = Wal::Open({.dir = dir_,
                        .fsync = FsyncPolicy::kAlways,
                        .on_io =
                            [&](WalIo io, absl::Duration) {
                              MutexLock lock(&mu);
                              heard.push_back(io);
                            }},
                       1);
  ASSERT_TRUE(wal.ok()) << wal.status();
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE((*wal)->AwaitDurable((*wal)->Append(Batch(i), "", 0)).ok());
  }
  EXPECT_EQ((*wal)->stats().writes, 3u);
  EXPECT_EQ((*wal)->stats().fsyncs, 3u);
  {
    MutexLock lock(&mu);
    EXPECT_THAT(heard, ElementsAre(WalIo::kFsync, WalIo::kFsync, WalIo::kFsync))
        << "each write timed as the fdatasync it is, and no write() apart";
  }
  wal->reset();
  EXPECT_THAT(ReplayedBatches(dir_), ElementsAre(Batch(1), Batch(2), Batch(3)));
}

// One StreamWrites request: its puts are applied one after another, and
// written together once all are.
TEST_F(WalTest, UnderEverySecondBatchesStartedTogetherShareOneWriteAfterTheLastIsStarted) {
  // The flusher, held in its once-a-second fsync, cannot take a batch between
  // its Append and its WhenDurable (nobody waits for it yet) and write it
  // sooner, which is allowed but not what this test looks at.
  DiskGate syncs(DiskOp::kSync);
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kEverySecond, 0, syncs.Hook());
  ASSERT_NE(wal, nullptr);
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(0), "", 0)).ok());
  ASSERT_TRUE(syncs.WaitForCall(1));
  constexpr int kBatches = 16;
  Answers answers;
  std::vector<std::string> names;
  wal->StartTogether([&] {
    for (int i = 1; i <= kBatches; ++i) {
      names.push_back(absl::StrCat(i));
      answers.Await(*wal, wal->Append(Batch(i), "", 0), names.back());
    }
    EXPECT_THAT(answers.names(), ::testing::IsEmpty()) << "written before the last was started";
  });
  for (const auto& [name, status] : answers.WaitFor(kBatches)) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(answers.names(), names);
  EXPECT_EQ(wal->stats().writes, 2u);
  syncs.Allow(std::numeric_limits<int>::max());
  wal.reset();
  std::vector<std::string> batches;
  for (int i = 0; i <= kBatches; ++i) batches.push_back(Batch(i));
  EXPECT_EQ(ReplayedBatches(dir_), batches);
}

TEST_F(WalTest, UnderAlwaysBatchesStartedTogetherShareOneFdatasync) {
  // A group wait longer than the test: the flusher, still awake after the
  // first write or not, writes only whole writers. Without one it takes what
  // is pending when it looks, and it may look while they are being appended.
  absl::StatusOr<std::unique_ptr<Wal>> opened = Wal::Open(
      {.dir = dir_, .fsync = FsyncPolicy::kAlways, .max_group_wait = ::lapse::testing::kPatience},
      1);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Wal> wal = *std::move(opened);
  constexpr int kBatches = 16;
  // Large enough that appending them takes longer than the flusher needs to
  // wake up, and waits awake: called at the first, it waits for the rest
  // through the group wait.
  auto batch = [](int i) { return absl::StrCat(i, std::string(size_t{128} << 10, 'x')); };
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(0), "", 0)).ok());
  Answers answers;
  std::vector<std::string> names;
  wal->StartTogether([&] {
    for (int i = 0; i < kBatches; ++i) {
      names.push_back(absl::StrCat(i));
      answers.Await(*wal, wal->Append(batch(i), "", 0), names.back());
    }
  });
  for (const auto& [name, status] : answers.WaitFor(kBatches)) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(answers.names(), names);
  EXPECT_EQ(wal->stats().writes, 2u);
  EXPECT_EQ(wal->stats().fsyncs, 2u);
}

// The flusher is called at the first batch started together, so that it
// wakes up while the rest are appended; it still writes them together.
TEST_F(WalTest, UnderAlwaysTheFirstBatchStartedTogetherCallsTheFlusher) {
  Mutex mu;
  CondVar cv;
  bool awake = false;
  absl::StatusOr<std::unique_ptr<Wal>> opened =
      Wal::Open({.dir = dir_,
                 .fsync = FsyncPolicy::kAlways,
                 .max_group_wait = ::lapse::testing::kPatience,
                 .on_called_for_together_for_testing =
                     [&] {
                       MutexLock lock(&mu);
                       awake = true;
                       cv.SignalAll();
                     }},
                1);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Wal> wal = *std::move(opened);
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(0), "", 0)).ok());
  Answers answers;
  wal->StartTogether([&] {
    answers.Await(*wal, wal->Append(Batch(1), "", 0), "first");
    {
      MutexLock lock(&mu);
      EXPECT_TRUE(WaitWithPatience(mu, cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return awake; }))
          << "the flusher was not called at the first batch";
    }
    answers.Await(*wal, wal->Append(Batch(2), "", 0), "second");
  });
  for (const auto& [name, status] : answers.WaitFor(2)) EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(answers.names(), ElementsAre("first", "second"));
  EXPECT_EQ(wal->stats().writes, 2u);
}

TEST_F(WalTest, AWriteThatNeedsSpaceReservedIsLeftToTheFlusher) {
  DiskThreads disk;
  std::unique_ptr<Wal> wal = OpenWatched(FsyncPolicy::kNever, 4096, disk.Hook());
  ASSERT_NE(wal, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(1), "", 0)).ok());
  ASSERT_TRUE(wal->AwaitDurable(wal->Append(Batch(2), "", 0)).ok());
  EXPECT_THAT(disk.ThreadsOf(DiskOp::kReserve), ElementsAre(::testing::Ne(me)));
  const std::vector<std::thread::id> writes = disk.ThreadsOf(DiskOp::kWrite);
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_NE(writes[0], me) << "the first write needed space reserved: the flusher's";
  EXPECT_EQ(writes[1], me) << "the second fits in the space reserved: the writer's";
}

}  // namespace
}  // namespace lapse

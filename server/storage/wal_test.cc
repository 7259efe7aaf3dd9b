#include "server/storage/wal.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/storage/files.h"
#include "server/storage/frame.h"
#include "testing/temp_dir.h"

namespace lapse {
namespace {

using ::lapse::testing::TempDir;
using ::testing::Contains;
using ::testing::Each;
using ::testing::HasSubstr;

std::string Batch(int i) { return absl::StrCat("batch-", i, std::string(i % 7, 'x')); }

// Writes `n` batches with LSNs 1..n into a fresh log in `dir`.
void WriteBatches(const std::string& dir, int n, FsyncPolicy fsync = FsyncPolicy::kNever) {
  absl::StatusOr<std::unique_ptr<Wal>> wal = Wal::Open({.dir = dir, .fsync = fsync}, 1);
  ASSERT_TRUE(wal.ok()) << wal.status();
  for (int i = 1; i <= n; ++i) (*wal)->Append(Batch(i), 0);
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
}

struct Replayed {
  absl::StatusOr<WalReplayResult> result;
  std::vector<std::string> batches;
};

Replayed Replay(const std::string& dir, uint64_t from = 1, bool truncate_damaged = false) {
  Replayed r;
  uint64_t expected = from;
  r.result = ReplayWal(dir, from, truncate_damaged, [&](uint64_t lsn, absl::string_view batch) {
    EXPECT_EQ(lsn, expected++);
    r.batches.emplace_back(batch);
    return absl::OkStatus();
  });
  return r;
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

// Each test has a data directory of its own, empty at the start.
class WalTest : public ::testing::Test {
 protected:
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
        (*wal)->Append(Batch(t * kPerThread + i), 0);
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
  (*wal)->Append("no expiry", 0);
  ASSERT_TRUE((*wal)->AwaitDurable().ok());
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(heard.empty()) << "no durable batch has carried an event yet";
  }

  (*wal)->Append("expires 1..7", 7);
  (*wal)->Append("no expiry", 0);
  std::vector<uint64_t> heard_when_durable;
  (*wal)->WhenDurable([&](absl::Status s) {
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
  for (int i = 1; i <= 5; ++i) (*wal)->Append(Batch(i), 0);
  absl::StatusOr<uint64_t> next = (*wal)->Rotate();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 6u);
  for (int i = 6; i <= 9; ++i) (*wal)->Append(Batch(i), 0);
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
      (*wal)->Append(Batch(i), 0);
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
  // Where each frame ends.
  std::vector<size_t> ends;
  for (size_t off = 0; off < original.size();) {
    Frame f;
    ASSERT_EQ(ParseFrame(original, off, &f), FrameStatus::kOk);
    off += f.size;
    ends.push_back(off);
  }
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

TEST_F(WalTest, ABitFlipInTheMiddleRefusesToStartNamingFileAndOffset) {
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
    EXPECT_THAT(r.result.status().message(), HasSubstr("--wal_truncate_damaged"));
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
      (*wal)->Append(Batch(round), 0);
      ASSERT_TRUE((*wal)->Rotate().ok());
    }
  }
  ASSERT_TRUE(files::Remove(absl::StrCat(dir_, "/", Wal::SegmentName(2))).ok());
  Replayed r = Replay(dir_);
  EXPECT_EQ(r.result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.result.status().message(), HasSubstr("missing"));
}

TEST_F(WalTest, ParsesFsyncPolicies) {
  EXPECT_EQ(*ParseFsyncPolicy("always"), FsyncPolicy::kAlways);
  EXPECT_EQ(*ParseFsyncPolicy("everysec"), FsyncPolicy::kEverySecond);
  EXPECT_EQ(*ParseFsyncPolicy("never"), FsyncPolicy::kNever);
  EXPECT_EQ(ParseFsyncPolicy("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lapse

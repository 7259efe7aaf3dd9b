#include "server/base/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "server/base/clock.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

// Whether the kernel still maps the page at `address` (mincore fails with
// ENOMEM for an unmapped one).
bool Mapped(void* address) {
  unsigned char resident;
  return mincore(address, static_cast<size_t>(getpagesize()), &resident) == 0;
}

TEST(BlockPoolTest, BlocksAreWritableThroughout) {
  BlockPool pool;
  void* block = pool.Allocate();
  std::memset(block, 0xab, BlockPool::kBlockSize);
  EXPECT_EQ(static_cast<unsigned char*>(block)[BlockPool::kBlockSize - 1], 0xab);
  pool.Free(block);
}

TEST(BlockPoolTest, ReusesAFreedBlock) {
  BlockPool pool;
  void* first = pool.Allocate();
  pool.Free(first);
  EXPECT_EQ(pool.kept_blocks(), 1u);
  EXPECT_EQ(pool.Allocate(), first);
  EXPECT_EQ(pool.kept_blocks(), 0u);
  pool.Free(first);
}

TEST(BlockPoolTest, KeepsBlocksWhileAllocationsGoOn) {
  BlockPool pool;
  for (int period = 0; period < 5; ++period) {
    void* block = pool.Allocate();
    pool.Free(block);
    EXPECT_EQ(pool.ReleaseIfQuiet(), 0u) << "period " << period;
    EXPECT_EQ(pool.kept_blocks(), 1u);
  }
}

TEST(BlockPoolTest, UnmapsKeptBlocksAfterAPeriodWithoutAllocations) {
  BlockPool pool;
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.Allocate());
  for (void* block : blocks) pool.Free(block);
  // The period the burst ended in saw allocations: nothing yet.
  EXPECT_EQ(pool.ReleaseIfQuiet(), 0u);
  EXPECT_TRUE(Mapped(blocks[0]));
  // A whole period without one: all of it, once.
  EXPECT_EQ(pool.ReleaseIfQuiet(), 3 * BlockPool::kBlockSize);
  EXPECT_EQ(pool.kept_blocks(), 0u);
  EXPECT_EQ(pool.mapped_blocks(), 0u);
  for (void* block : blocks) EXPECT_FALSE(Mapped(block));
  EXPECT_EQ(pool.ReleaseIfQuiet(), 0u);
}

TEST(BlockPoolTest, LeavesBlocksInUseAlone) {
  BlockPool pool;
  void* used = pool.Allocate();
  void* freed = pool.Allocate();
  pool.Free(freed);
  pool.ReleaseIfQuiet();
  EXPECT_EQ(pool.ReleaseIfQuiet(), BlockPool::kBlockSize);
  EXPECT_EQ(pool.mapped_blocks(), 1u);
  EXPECT_TRUE(Mapped(used));
  std::memset(used, 1, BlockPool::kBlockSize);
  pool.Free(used);
}

using Waiting = BlockReleaser::Waiting;
using ::lapse::testing::kPatience;

// While no block is taken the releaser waits without a timeout, however far
// its clock moves, and never passes; a burst of blocks wakes it, its second
// pass unmaps them, once, and it waits without a timeout again.
TEST(BlockReleaserTest, NeverPassesWhileNoBlockIsTakenAndUnmapsABurstOnceAfterIt) {
  BlockPool pool;
  FakeClock clock(absl::FromUnixSeconds(1000));
  BlockReleaser releaser(&pool, absl::Seconds(1), &clock);
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  EXPECT_EQ(releaser.passes(), 0u);

  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.Allocate());
  for (void* block : blocks) pool.Free(block);
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kPeriod);
  EXPECT_EQ(releaser.passes(), 0u);
  // The period the burst came in: its blocks are kept.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kPeriod);
  EXPECT_EQ(releaser.passes(), 1u);
  EXPECT_EQ(pool.kept_blocks(), 3u);
  // A period without an Allocate: unmapped.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  EXPECT_EQ(releaser.passes(), 2u);
  EXPECT_EQ(pool.mapped_blocks(), 0u);
  for (void* block : blocks) EXPECT_FALSE(Mapped(block));
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  EXPECT_EQ(releaser.passes(), 2u);
}

// A block still in use when a pass left nothing to release wakes the
// releaser when it is freed, and is unmapped a period later.
TEST(BlockReleaserTest, ABlockFreedAfterTheReleaserFellAsleepWakesIt) {
  BlockPool pool;
  FakeClock clock(absl::FromUnixSeconds(1000));
  BlockReleaser releaser(&pool, absl::Seconds(1), &clock);
  void* used = pool.Allocate();
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kPeriod);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  EXPECT_EQ(releaser.passes(), 1u);
  EXPECT_EQ(pool.mapped_blocks(), 1u);

  pool.Free(used);
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kPeriod);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(releaser.AwaitSettledForTesting(kPatience), Waiting::kBlocks);
  EXPECT_EQ(releaser.passes(), 2u);
  EXPECT_EQ(pool.mapped_blocks(), 0u);
  EXPECT_FALSE(Mapped(used));
}

}  // namespace
}  // namespace lapse

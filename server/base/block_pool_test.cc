#include "server/base/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace lapse

#include "server/base/block_pool.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace lapse {

BlockPool::~BlockPool() {
  MutexLock lock(&mu_);
  for (void* block : kept_) munmap(block, kBlockSize);
}

void* BlockPool::Allocate() {
  {
    MutexLock lock(&mu_);
    if (!HasWorkLocked()) work_.SignalAll();
    allocated_since_check_ = true;
    if (!kept_.empty()) {
      void* block = kept_.back();
      kept_.pop_back();
      return block;
    }
  }
  void* block =
      mmap(nullptr, kBlockSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) {
    std::perror("lapse: BlockPool cannot map a block");
    std::abort();
  }
  MutexLock lock(&mu_);
  ++mapped_;
  return block;
}

void BlockPool::Free(void* block) {
  MutexLock lock(&mu_);
  if (!HasWorkLocked()) work_.SignalAll();
  kept_.push_back(block);
}

size_t BlockPool::ReleaseIfQuiet() {
  std::vector<void*> released;
  {
    MutexLock lock(&mu_);
    if (std::exchange(allocated_since_check_, false)) return 0;
    released.swap(kept_);
  }
  for (void* block : released) munmap(block, kBlockSize);
  MutexLock lock(&mu_);
  mapped_ -= released.size();
  released_.SignalAll();
  return released.size() * kBlockSize;
}

size_t BlockPool::kept_blocks() const {
  MutexLock lock(&mu_);
  return kept_.size();
}

size_t BlockPool::mapped_blocks() const {
  MutexLock lock(&mu_);
  return mapped_;
}

bool BlockPool::AwaitNothingMappedForTesting(absl::Duration patience) {
  MutexLock lock(&mu_);
  return released_.WaitUntil(&mu_, absl::Now() + patience,
                             [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return mapped_ == 0; });
}

BlockReleaser::BlockReleaser(BlockPool* pool, absl::Duration period, const Clock* clock)
    : pool_(pool), period_(period), clock_(clock), thread_([this] { Run(); }) {}

BlockReleaser::~BlockReleaser() {
  {
    MutexLock lock(&pool_->mu_);
    stop_ = true;
    pool_->work_.SignalAll();
  }
  thread_.join();
}

uint64_t BlockReleaser::passes() const {
  MutexLock lock(&pool_->mu_);
  return passes_;
}

void BlockReleaser::Run() {
  for (;;) {
    {
      MutexLock lock(&pool_->mu_);
      if (!AwaitPassLocked()) return;
    }
    pool_->ReleaseIfQuiet();
    MutexLock lock(&pool_->mu_);
    ++passes_;
  }
}

bool BlockReleaser::AwaitPassLocked() {
  while (!stop_ && !pool_->HasWorkLocked()) {
    WaitLocked(Waiting::kBlocks, absl::InfiniteDuration());
  }
  const absl::Time due = clock_->Now() + period_;
  for (absl::Time now = clock_->Now(); !stop_ && now < due; now = clock_->Now()) {
    due_ = due;
    WaitLocked(Waiting::kPeriod, due - now);
  }
  return !stop_;
}

void BlockReleaser::WaitLocked(Waiting what, absl::Duration timeout) {
  waiting_ = what;
  waits_.SignalAll();
  pool_->work_.WaitWithTimeout(&pool_->mu_, timeout);
  waiting_.reset();
}

std::optional<BlockReleaser::Waiting> BlockReleaser::AwaitSettledForTesting(
    absl::Duration patience) {
  const absl::Time give_up = absl::Now() + patience;
  MutexLock lock(&pool_->mu_);
  for (;;) {
    if (waiting_ == Waiting::kBlocks && !pool_->HasWorkLocked()) return waiting_;
    if (waiting_ == Waiting::kPeriod && clock_->Now() < due_) return waiting_;
    if (absl::Now() >= give_up) return std::nullopt;
    pool_->work_.SignalAll();
    waits_.WaitWithTimeout(&pool_->mu_, give_up - absl::Now());
  }
}

}  // namespace lapse

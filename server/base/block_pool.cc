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

}  // namespace lapse

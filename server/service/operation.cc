#include "server/service/operation.h"

#include <new>

namespace lapse {
namespace {

// The smallest block the pool serves: the fifth block of a growing arena
// (1, 2, 4, 8, 16 KiB), which a request of some hundred members reaches.
constexpr size_t kSmallestPooledBlock = 16 << 10;

bool Pooled(size_t size) { return size >= kSmallestPooledBlock && size <= BlockPool::kBlockSize; }

}  // namespace

BlockPool& MessageArenaBlocks() {
  static BlockPool* const pool = new BlockPool;
  return *pool;
}

void* AllocateMessageArenaBlock(size_t size) {
  return Pooled(size) ? MessageArenaBlocks().Allocate() : ::operator new(size);
}

void FreeMessageArenaBlock(void* block, size_t size) {
  if (Pooled(size)) {
    MessageArenaBlocks().Free(block);
  } else {
    ::operator delete(block);
  }
}

}  // namespace lapse

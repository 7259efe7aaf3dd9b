// BlockPool: 64 KiB blocks mapped from the kernel, reused while they are
// asked for and unmapped once they are not.
//
// Why not malloc: lapsed's malloc is mimalloc, whose free pages belong to
// the thread that allocated them and go back to the kernel only when that
// thread next allocates or frees near them. The gRPC threads that parsed a
// burst of large requests touch their pages again only when they serve
// again, so the burst's request memory stayed resident after it
// (docs/benchmarks.md, "Resident memory after puts (perfmem2)"). A block
// here is the pool's: any thread can unmap it.
//
//   lapse::BlockPool pool;
//   void* block = pool.Allocate();  // kBlockSize bytes, reused or newly mapped
//   pool.Free(block);               // kept for the next Allocate
//   pool.ReleaseIfQuiet();          // from a timer: unmaps the kept blocks
//                                   // if no Allocate came since its last call
//
// A new block costs an mmap and its pages' first faults, a reused one
// neither, so the pool keeps what a burst needs for as long as the burst
// lasts: ReleaseIfQuiet called every period P unmaps only after a full
// period without an Allocate, between P and 2P after the last one.
//
// Thread-safe. Blocks still allocated when the pool is destroyed are leaked
// (the process-wide pools never are).
#ifndef LAPSE_SERVER_BASE_BLOCK_POOL_H_
#define LAPSE_SERVER_BASE_BLOCK_POOL_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse {

class BlockPool {
 public:
  static constexpr size_t kBlockSize = 64 << 10;

  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool();

  // kBlockSize bytes, aligned to the page. Aborts if the kernel has no
  // memory to map, as operator new would.
  void* Allocate();
  // REQUIRES: `block` came from this pool's Allocate and is not freed yet.
  void Free(void* block);

  // Unmaps every kept block if no Allocate came since the previous call;
  // the bytes unmapped.
  size_t ReleaseIfQuiet();

  // Blocks kept for reuse, resident until released.
  size_t kept_blocks() const;
  // Blocks mapped: in use or kept.
  size_t mapped_blocks() const;

  // For tests of whatever calls ReleaseIfQuiet on a timer: waits until no
  // block is mapped, at most `patience`; whether none is.
  bool AwaitNothingMappedForTesting(absl::Duration patience);

 private:
  mutable Mutex mu_;
  CondVar released_;
  std::vector<void*> kept_ ABSL_GUARDED_BY(mu_);
  size_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
  bool allocated_since_check_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_BLOCK_POOL_H_

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
//   lapse::BlockReleaser releaser(&pool, absl::Milliseconds(250));
//                                   // that timer, asleep while there is
//                                   // nothing to release
//
// A new block costs an mmap and its pages' first faults, a reused one
// neither, so the pool keeps what a burst needs for as long as the burst
// lasts: ReleaseIfQuiet called every period P unmaps only after a full
// period without an Allocate, between P and 2P after the last one.
//
// Thread-safe. Blocks still allocated when the pool is destroyed are leaked
// (the process-wide pools never are). A pool outlives its releasers.
#ifndef LAPSE_SERVER_BASE_BLOCK_POOL_H_
#define LAPSE_SERVER_BASE_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
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
  friend class BlockReleaser;

  // Whether ReleaseIfQuiet has anything to do: a block kept, or one
  // allocated since its last call.
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return allocated_since_check_ || !kept_.empty();
  }

  mutable Mutex mu_;
  CondVar released_;
  // Signalled when HasWorkLocked() becomes true (and by BlockReleaser).
  CondVar work_;
  std::vector<void*> kept_ ABSL_GUARDED_BY(mu_);
  size_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
  bool allocated_since_check_ ABSL_GUARDED_BY(mu_) = false;
};

// A thread that calls pool->ReleaseIfQuiet() every `period` (timed on
// `clock`) while the pool has something to release — a block kept, or one
// allocated since the last call — and waits, without a timeout, while it has
// not: an idle process never wakes for it. The pool wakes it on the first
// Allocate after a pass left nothing to release (or a Free, of a block that
// was in use during that pass). From construction to destruction.
//
// Tests move a FakeClock `clock` past the next pass, then call
// AwaitSettledForTesting.
class BlockReleaser {
 public:
  BlockReleaser(BlockPool* pool, absl::Duration period, const Clock* clock = RealClock());
  BlockReleaser(const BlockReleaser&) = delete;
  BlockReleaser& operator=(const BlockReleaser&) = delete;
  // Stops the thread (a pass under way ends first).
  ~BlockReleaser();

  // Calls of ReleaseIfQuiet so far.
  uint64_t passes() const;

  // What the thread waits for.
  enum class Waiting {
    kBlocks,  // the pool to have something to release; no timeout
    kPeriod,  // the next pass's time, by `clock`
  };
  // Returns, within `patience` (else nullopt), once the thread waits with
  // nothing due: kBlocks while the pool has nothing to release, or kPeriod
  // with its next pass later than clock->Now(). Wakes the thread to look at
  // the clock again.
  std::optional<Waiting> AwaitSettledForTesting(absl::Duration patience);

 private:
  void Run();
  // Waits until a pass is due; false once the destructor asks the thread to
  // stop.
  bool AwaitPassLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool_->mu_);
  void WaitLocked(Waiting what, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool_->mu_);

  BlockPool* const pool_;
  const absl::Duration period_;
  const Clock* const clock_;

  // Signalled whenever the thread starts to wait.
  CondVar waits_;
  bool stop_ ABSL_GUARDED_BY(pool_->mu_) = false;
  std::optional<Waiting> waiting_ ABSL_GUARDED_BY(pool_->mu_);
  // The next pass's time, while waiting_ is kPeriod.
  absl::Time due_ ABSL_GUARDED_BY(pool_->mu_);
  uint64_t passes_ ABSL_GUARDED_BY(pool_->mu_) = 0;

  // Last: starts once the state above is built.
  std::thread thread_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_BLOCK_POOL_H_

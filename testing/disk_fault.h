// DiskFault: a disk that fails on demand, for the write-ahead log's test seam
// (Wal::Options::disk_fault_for_testing, passed on by DurableStore::Options
// and EmbeddedStore::Options).
//
//   lapse::testing::DiskFault disk;
//   options.store.disk_fault_for_testing = disk.Hook();
//   disk.Fail(ENOSPC);                   // every operation on the log's disk fails
//   disk.Fail(EIO, {DiskOp::kSync});     // only fsyncs fail
//   disk.Heal();
//   ASSERT_TRUE(disk.WaitForCalls(DiskOp::kReserve, 3));  // the log retried
//   disk.Hold({DiskOp::kWrite});         // the log's next write waits...
//   disk.Release();                      // ...until now (kPatience at most)
//
// Header-only, so that it needs no more than the storage library its users
// link already. Thread-safe; must outlive whatever holds its Hook().
#ifndef LAPSE_TESTING_DISK_FAULT_H_
#define LAPSE_TESTING_DISK_FAULT_H_

#include <functional>
#include <initializer_list>
#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "server/base/mutex.h"
#include "server/storage/wal.h"
#include "testing/test_util.h"

namespace lapse::testing {

class DiskFault final {
 public:
  DiskFault() = default;
  DiskFault(const DiskFault&) = delete;
  DiskFault& operator=(const DiskFault&) = delete;

  std::function<int(DiskOp)> Hook() {
    return [this](DiskOp op) { return Next(op); };
  }

  // From now on, the operations `ops` fail with errno `err`.
  void Fail(int err, std::initializer_list<DiskOp> ops = {DiskOp::kCreate, DiskOp::kReserve,
                                                          DiskOp::kWrite, DiskOp::kSync}) {
    MutexLock lock(&mu_);
    err_ = err;
    ops_ = ops;
  }

  // From now on, nothing fails.
  void Heal() {
    MutexLock lock(&mu_);
    err_ = 0;
  }

  // From now on, the operations `ops` wait until Release, holding up the
  // log's flusher: what is committed meanwhile is not durable. A hold that is
  // never released ends after kPatience.
  void Hold(std::initializer_list<DiskOp> ops) {
    MutexLock lock(&mu_);
    held_ = ops;
  }

  // Lets the held operations go on.
  void Release() {
    MutexLock lock(&mu_);
    held_.clear();
    cv_.SignalAll();
  }

  // Operations failed so far.
  int failed() const {
    MutexLock lock(&mu_);
    return failed_;
  }

  // Operations `op` asked about so far, failed or not.
  int calls(DiskOp op) const {
    MutexLock lock(&mu_);
    auto it = calls_.find(op);
    return it == calls_.end() ? 0 : it->second;
  }
  // Waits (at most kPatience) until `op` has been asked about `n` times.
  bool WaitForCalls(DiskOp op, int n) {
    MutexLock lock(&mu_);
    return WaitWithPatience(mu_, cv_,
                            [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return calls_[op] >= n; });
  }

 private:
  int Next(DiskOp op) {
    MutexLock lock(&mu_);
    ++calls_[op];
    cv_.SignalAll();
    WaitWithPatience(mu_, cv_,
                     [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return held_.count(op) == 0; });
    if (err_ == 0 || ops_.count(op) == 0) return 0;
    ++failed_;
    return err_;
  }

  mutable Mutex mu_;
  CondVar cv_;
  int err_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<DiskOp, int> calls_ ABSL_GUARDED_BY(mu_);
  std::set<DiskOp> ops_ ABSL_GUARDED_BY(mu_);
  std::set<DiskOp> held_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_DISK_FAULT_H_

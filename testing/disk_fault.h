// DiskFault: a disk that fails on demand, for the write-ahead log's test seam
// (Wal::Options::disk_fault_for_testing, passed on by DurableStore::Options
// and EmbeddedStore::Options).
//
//   lapse::testing::DiskFault disk;
//   options.store.disk_fault_for_testing = disk.Hook();
//   disk.Fail(ENOSPC);                   // every operation on the log's disk fails
//   disk.Fail(EIO, {DiskOp::kSync});     // only fsyncs fail
//   disk.Heal();
//
// Header-only, so that it needs no more than the storage library its users
// link already. Thread-safe; must outlive whatever holds its Hook().
#ifndef LAPSE_TESTING_DISK_FAULT_H_
#define LAPSE_TESTING_DISK_FAULT_H_

#include <functional>
#include <initializer_list>
#include <set>

#include "absl/base/thread_annotations.h"
#include "server/base/mutex.h"
#include "server/storage/wal.h"

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

  // Operations failed so far.
  int failed() const {
    MutexLock lock(&mu_);
    return failed_;
  }

 private:
  int Next(DiskOp op) {
    MutexLock lock(&mu_);
    if (err_ == 0 || ops_.count(op) == 0) return 0;
    ++failed_;
    return err_;
  }

  mutable Mutex mu_;
  int err_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<DiskOp> ops_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_DISK_FAULT_H_

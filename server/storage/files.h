// Files: the few POSIX file operations the store needs, returning Status.
#ifndef LAPSE_SERVER_STORAGE_FILES_H_
#define LAPSE_SERVER_STORAGE_FILES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lapse {
namespace files {

absl::StatusOr<std::string> ReadAll(const std::string& path);
// Writes all of `data` to `fd`, retrying short writes.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);
absl::Status Fsync(int fd, const std::string& path);
// Makes renames and unlinks inside `dir` durable.
absl::Status FsyncDir(const std::string& dir);
absl::Status Truncate(const std::string& path, size_t size);
absl::Status Remove(const std::string& path);
absl::Status EnsureDir(const std::string& dir);
// Names (not paths) of the entries of `dir`, sorted.
absl::StatusOr<std::vector<std::string>> List(const std::string& dir);

// The Status for a failed call `what` on `path` that set errno `err`:
// RESOURCE_EXHAUSTED when the disk, a quota or the file size limit is full
// (ENOSPC, EDQUOT, EFBIG), NOT_FOUND for ENOENT, INTERNAL otherwise.
absl::Status ErrnoStatus(absl::string_view what, const std::string& path, int err);
// Allocates `length` bytes of `fd` from `offset` on without changing its size
// (fallocate FALLOC_FL_KEEP_SIZE), so that later writes there cannot run out
// of space. Where the filesystem cannot allocate ahead, checks instead that it
// has `length` bytes free. Also fails (EFBIG) past the file size limit
// (RLIMIT_FSIZE), which fallocate does not check.
absl::Status Reserve(int fd, size_t offset, size_t length, const std::string& path);
// Cuts the open file `fd` back to `size` bytes.
absl::Status TruncateOpen(int fd, size_t size, const std::string& path);

// Writes `data` to `path` so that a crash leaves either the old file or the
// whole new one: a temporary name, fsync, rename, fsync of the directory.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             absl::string_view data);

// An exclusive lock on a directory (flock on DIR/LOCK), held until
// destroyed. FAILED_PRECONDITION when another process holds it.
class DirLock {
 public:
  static absl::StatusOr<DirLock> Acquire(const std::string& dir);
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace files
}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_FILES_H_

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

// Writes `data` to `path` so that a crash leaves either the old file or the
// whole new one: a temporary name, fsync, rename, fsync of the directory.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             absl::string_view data);

// An exclusive lock on a directory, held until destroyed: flock() on a
// descriptor of the directory itself. A lock file inside it could be deleted
// or replaced while held, and the next process would lock the new file; the
// directory cannot go away while it holds files, and every path to it (a
// symlink, a bind mount, "dir/.") reaches the same inode and so the same
// lock. The kernel releases it when the process dies. For local file
// systems: over NFS flock() is emulated with byte-range locks, which need a
// descriptor open for writing, so Acquire fails there, naming the directory.
// FAILED_PRECONDITION when another holder has it, in this process or another.
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

// Files: the few POSIX file operations the store needs, returning Status.
// Errors name the path; ENOSPC and EDQUOT come back as RESOURCE_EXHAUSTED,
// ENOENT as NOT_FOUND.
#ifndef LAPSE_SERVER_STORAGE_FILES_H_
#define LAPSE_SERVER_STORAGE_FILES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lapse {
namespace files {

absl::StatusOr<std::string> ReadAll(const std::string& path);

// A file read from its start to its end, a piece at a time.
//
//   absl::StatusOr<files::Reader> in = files::Reader::Open(path);
//   std::string buffer;
//   while (*in->Read(1 << 20, &buffer) > 0) { ... }   // check each status
//
// Thread-compatible.
class Reader {
 public:
  static absl::StatusOr<Reader> Open(const std::string& path);
  Reader(Reader&& other) noexcept;
  Reader& operator=(Reader&&) = delete;
  Reader(const Reader&) = delete;
  ~Reader();

  // Appends up to `n` more bytes to `*out`; how many, 0 at the end.
  absl::StatusOr<size_t> Read(size_t n, std::string* out);

 private:
  Reader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;
};
// Writes all of `data` to `fd`, retrying short writes.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);
// The same at `offset` (pwrite); `fd` must not be O_APPEND.
absl::Status WriteAllAt(int fd, uint64_t offset, absl::string_view data, const std::string& path);
// The same, each piece on the disk before the call returns (pwritev2 with
// RWF_DSYNC): the data and what is needed to read it back, as a write and an
// fdatasync would do, in one system call.
absl::Status WriteAllAtThrough(int fd, uint64_t offset, absl::string_view data,
                               const std::string& path);
absl::Status Fsync(int fd, const std::string& path);
// Makes renames and unlinks inside `dir` durable.
absl::Status FsyncDir(const std::string& dir);
absl::Status Truncate(const std::string& path, size_t size);
absl::Status Remove(const std::string& path);
absl::Status EnsureDir(const std::string& dir);
// Names (not paths) of the entries of `dir`, sorted.
absl::StatusOr<std::vector<std::string>> List(const std::string& dir);
absl::StatusOr<uint64_t> FileSize(const std::string& path);
// Bytes an unprivileged process can still write on the file system of `dir`
// (statvfs).
absl::StatusOr<uint64_t> FreeBytes(const std::string& dir);

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
// Writes `length` zeros into `fd` from `offset` on (the file grows to
// offset + length if shorter), so that later writes there overwrite data the
// disk already holds and change neither the file's size nor its allocation.
// Fails (EFBIG) past the file size limit instead of raising SIGXFSZ.
absl::Status FillWithZeros(int fd, uint64_t offset, size_t length, const std::string& path);
// Cuts the open file `fd` back to `size` bytes.
absl::Status TruncateOpen(int fd, size_t size, const std::string& path);

// The name an AtomicFile writes NAME under until it commits: NAME + ".tmp".
std::string TempName(absl::string_view name);
// Whether `name` is TempName(x) for some x, which it stores in `*target`.
bool ParseTempName(absl::string_view name, std::string* target);

// A file written under TempName(NAME) and published as NAME by Commit, so
// that a crash leaves either no NAME (perhaps the temporary file) or the
// whole of it. Destroyed before a successful Commit, it removes the
// temporary file.
//
//   absl::StatusOr<files::AtomicFile> file = files::AtomicFile::Create(dir, name);
//   if (!file.ok()) return file.status();
//   if (absl::Status s = file->Append(data); !s.ok()) return s;
//   return file->Commit();
//
// Thread-compatible.
class AtomicFile {
 public:
  static absl::StatusOr<AtomicFile> Create(const std::string& dir, const std::string& name);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();

  absl::Status Append(absl::string_view data);
  // fsync, rename to NAME, fsync of the directory. Call at most once.
  absl::Status Commit();

  // DIR/NAME.
  const std::string& path() const { return path_; }

 private:
  AtomicFile(int fd, std::string dir, std::string path, std::string temp_path);

  int fd_;
  std::string dir_;
  std::string path_;
  std::string temp_path_;
  // Until the rename, and not in a moved-from object.
  bool remove_temp_ = true;
};

// Writes `data` to DIR/NAME with an AtomicFile: a crash leaves either the old
// file or the whole new one.
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

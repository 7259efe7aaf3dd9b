#include "server/storage/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lapse {
namespace files {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return ErrnoStatus(what, path, errno);
}

// Whether a file reaching `end` bytes would pass the file size limit
// (RLIMIT_FSIZE), which fallocate does not check and write() enforces with
// SIGXFSZ.
bool PastSizeLimit(uint64_t end) {
  struct rlimit limit;
  return ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
         end > limit.rlim_cur;
}

}  // namespace

absl::Status ErrnoStatus(absl::string_view what, const std::string& path, int err) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return absl::ResourceExhaustedError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

absl::Status Reserve(int fd, size_t offset, size_t length, const std::string& path) {
  if (length == 0) return absl::OkStatus();
  // fallocate ignores the file size limit that write() obeys.
  if (PastSizeLimit(offset + length)) return ErrnoStatus("reserve space for", path, EFBIG);
  int rc;
  do {
    rc = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                     static_cast<off_t>(length));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return absl::OkStatus();
  if (errno != EOPNOTSUPP && errno != ENOSYS) return ErrnoError("fallocate", path);
  struct statvfs fs;
  if (::fstatvfs(fd, &fs) != 0) return ErrnoError("statvfs", path);
  if (static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < length) {
    return ErrnoStatus("reserve space for", path, ENOSPC);
  }
  return absl::OkStatus();
}

absl::Status FillWithZeros(int fd, uint64_t offset, size_t length, const std::string& path) {
  if (PastSizeLimit(offset + length)) return ErrnoStatus("fill with zeros", path, EFBIG);
  static constexpr char kZeros[size_t{64} << 10] = {};
  while (length > 0) {
    const size_t n = std::min(length, sizeof(kZeros));
    if (absl::Status s = WriteAllAt(fd, offset, absl::string_view(kZeros, n), path); !s.ok()) {
      return s;
    }
    offset += n;
    length -= n;
  }
  return absl::OkStatus();
}

absl::Status TruncateOpen(int fd, size_t size, const std::string& path) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return ErrnoError("ftruncate", path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  absl::StatusOr<Reader> in = Reader::Open(path);
  if (!in.ok()) return in.status();
  std::string data;
  while (true) {
    absl::StatusOr<size_t> n = in->Read(1 << 16, &data);
    if (!n.ok()) return n.status();
    if (*n == 0) return data;
  }
}

absl::StatusOr<Reader> Reader::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path);
  return Reader(fd, path);
}

Reader::Reader(Reader&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<size_t> Reader::Read(size_t n, std::string* out) {
  const size_t old_size = out->size();
  out->resize(old_size + n);
  while (true) {
    const ssize_t got = ::read(fd_, out->data() + old_size, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      out->resize(old_size);
      return ErrnoError("read", path_);
    }
    out->resize(old_size + static_cast<size_t>(got));
    return static_cast<size_t>(got);
  }
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

namespace {

// pwritev2 with `flags` until all of `data` is written.
absl::Status WriteAllAtWith(int fd, uint64_t offset, absl::string_view data, int flags,
                            const std::string& path) {
  while (!data.empty()) {
    struct iovec piece = {const_cast<char*>(data.data()), data.size()};
    const ssize_t n = ::pwritev2(fd, &piece, 1, static_cast<off_t>(offset), flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteAllAt(int fd, uint64_t offset, absl::string_view data, const std::string& path) {
  return WriteAllAtWith(fd, offset, data, 0, path);
}

absl::Status WriteAllAtThrough(int fd, uint64_t offset, absl::string_view data,
                               const std::string& path) {
  return WriteAllAtWith(fd, offset, data, RWF_DSYNC, path);
}

absl::Status Fsync(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) return ErrnoError("fsync", path);
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", dir);
  const int rc = ::fsync(fd);
  absl::Status s = rc == 0 ? absl::OkStatus() : ErrnoError("fsync", dir);
  ::close(fd);
  return s;
}

absl::Status Truncate(const std::string& path, size_t size) {
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
    return ErrnoError("truncate", path);
  }
  return absl::OkStatus();
}

absl::Status Remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("unlink", path);
  return absl::OkStatus();
}

absl::Status EnsureDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir", dir);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError("stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> List(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError("opendir", dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path);
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return ErrnoError("statvfs", dir);
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

constexpr absl::string_view kTempSuffix = ".tmp";

std::string TempName(absl::string_view name) { return absl::StrCat(name, kTempSuffix); }

bool ParseTempName(absl::string_view name, std::string* target) {
  if (!absl::ConsumeSuffix(&name, kTempSuffix) || name.empty()) return false;
  *target = std::string(name);
  return true;
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& dir, const std::string& name) {
  std::string path = absl::StrCat(dir, "/", name);
  std::string temp_path = absl::StrCat(dir, "/", TempName(name));
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", temp_path);
  return AtomicFile(fd, dir, std::move(path), std::move(temp_path));
}

AtomicFile::AtomicFile(int fd, std::string dir, std::string path, std::string temp_path)
    : fd_(fd), dir_(std::move(dir)), path_(std::move(path)), temp_path_(std::move(temp_path)) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : fd_(other.fd_),
      dir_(std::move(other.dir_)),
      path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      remove_temp_(other.remove_temp_) {
  other.fd_ = -1;
  other.remove_temp_ = false;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (remove_temp_) Remove(temp_path_).IgnoreError();
}

absl::Status AtomicFile::Append(absl::string_view data) { return WriteAll(fd_, data, temp_path_); }

absl::Status AtomicFile::Commit() {
  absl::Status s = Fsync(fd_, temp_path_);
  ::close(fd_);
  fd_ = -1;
  if (!s.ok()) return s;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) return ErrnoError("rename", temp_path_);
  remove_temp_ = false;
  return FsyncDir(dir_);
}

absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             absl::string_view data) {
  absl::StatusOr<AtomicFile> file = AtomicFile::Create(dir, name);
  if (!file.ok()) return file.status();
  if (absl::Status s = file->Append(data); !s.ok()) return s;
  return file->Commit();
}

absl::StatusOr<DirLock> DirLock::Acquire(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", dir);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory ", dir,
          " is in use by another process (it holds the lock on the directory); stop that one "
          "or choose another directory"));
    }
    errno = err;
    return ErrnoError("lock (flock)", dir);
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace files
}  // namespace lapse

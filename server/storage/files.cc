#include "server/storage/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lapse {
namespace files {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return ErrnoStatus(what, path, errno);
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
  struct rlimit limit;
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      offset + length > limit.rlim_cur) {
    return ErrnoStatus("reserve space for", path, EFBIG);
  }
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

absl::Status TruncateOpen(int fd, size_t size, const std::string& path) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return ErrnoError("ftruncate", path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path);
  std::string data;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
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

absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             absl::string_view data) {
  const std::string final_path = absl::StrCat(dir, "/", name);
  const std::string tmp_path = absl::StrCat(final_path, ".tmp");
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", tmp_path);
  absl::Status s = WriteAll(fd, data, tmp_path);
  if (s.ok()) s = Fsync(fd, tmp_path);
  ::close(fd);
  if (s.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    s = ErrnoError("rename", tmp_path);
  }
  if (!s.ok()) {
    Remove(tmp_path).IgnoreError();
    return s;
  }
  return FsyncDir(dir);
}

absl::StatusOr<DirLock> DirLock::Acquire(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/LOCK");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory ", dir, " is in use by another lapsed (", path, " is locked)"));
    }
    errno = err;
    return ErrnoError("flock", path);
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace files
}  // namespace lapse

#include "server/accept_guard.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "server/base/log.h"
#include "server/base/mutex.h"

namespace lapse {
namespace {

// Connections may take descriptors below this number; 0 until installed.
std::atomic<int64_t> g_connection_fd_limit{0};
std::atomic<uint64_t> g_refused{0};

Mutex g_spare_mu;
// Open on /dev/null; -1 while it could not be (re)opened.
int g_spare ABSL_GUARDED_BY(g_spare_mu) = -1;

int SystemAccept4(int listener, sockaddr* addr, socklen_t* len, int flags) {
  return static_cast<int>(syscall(SYS_accept4, listener, addr, len, flags));
}

// Closes an accepted connection with a reset, so that its client learns at
// once that it was refused.
void Reset(int fd) {
  const linger abort = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  close(fd);
  g_refused.fetch_add(1, std::memory_order_relaxed);
}

void LogRefused(const char* why) {
  // Any client can cause these.
  static RateLimitedLog* const log = new RateLimitedLog(5, absl::Minutes(1));
  log->Log(LogLevel::kWarning, "refused a connection: %s (%d refused so far)", why,
           g_refused.load(std::memory_order_relaxed));
}

// With the descriptor table full, takes one pending connection off the
// listener's queue through the spare descriptor's slot and resets it. False
// if there was no spare or nothing was pending; `errno` then says why.
bool RefuseThroughSpare(int listener) {
  MutexLock lock(&g_spare_mu);
  if (g_spare < 0) g_spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (g_spare < 0) {
    errno = EMFILE;
    return false;
  }
  close(g_spare);
  const int fd = SystemAccept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  const int accept_errno = errno;
  if (fd >= 0) Reset(fd);
  g_spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  errno = accept_errno;
  return fd >= 0;
}

int GuardedAccept4(int listener, sockaddr* addr, socklen_t* len, int flags) {
  const int64_t fd_limit = g_connection_fd_limit.load(std::memory_order_relaxed);
  if (fd_limit == 0) return SystemAccept4(listener, addr, len, flags);
  // Each try gets the caller's whole address buffer back.
  const socklen_t capacity = len != nullptr ? *len : 0;
  while (true) {
    if (len != nullptr) *len = capacity;
    const int fd = SystemAccept4(listener, addr, len, flags);
    if (fd >= 0) {
      if (fd < fd_limit) return fd;
      Reset(fd);
      LogRefused("too few descriptors left below the open-file limit (--reserved_fds)");
      continue;
    }
    if (errno != EMFILE && errno != ENFILE) return fd;
    if (RefuseThroughSpare(listener)) {
      LogRefused("no descriptors left (open-file limit reached)");
      continue;
    }
    // Nothing pending (EAGAIN), or no spare: either way gRPC re-arms the
    // listener, and the next connection gets another try.
    if (errno == EMFILE || errno == ENFILE) errno = EAGAIN;
    return -1;
  }
}

}  // namespace

absl::StatusOr<FileLimit> RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  FileLimit result;
  result.before = limit.rlim_cur;
  result.hard = limit.rlim_max;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE, ", limit.rlim_max, "): ", std::strerror(errno)));
    }
  }
  result.after = limit.rlim_cur;
  return result;
}

absl::Status InstallAcceptGuard(int reserved) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  // Descriptors are ints; RLIM_INFINITY is far above that.
  const int64_t soft =
      limit.rlim_cur > INT32_MAX ? INT32_MAX : static_cast<int64_t>(limit.rlim_cur);
  if (soft <= reserved) {
    return absl::FailedPreconditionError(absl::StrCat("the open-file limit (", soft,
                                                      ") leaves no descriptors for connections "
                                                      "beyond --reserved_fds=",
                                                      reserved,
                                                      "; raise it (ulimit -n) or lower "
                                                      "--reserved_fds"));
  }
  {
    MutexLock lock(&g_spare_mu);
    if (g_spare < 0) g_spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  g_connection_fd_limit.store(soft - reserved, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace lapse

// The interposed accept4 (see accept_guard.h): libgrpc's calls land here.
extern "C" int accept4(int listener, sockaddr* addr, socklen_t* len, int flags) {
  return lapse::GuardedAccept4(listener, addr, len, flags);
}

#include "server/auth/auth_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/base/log.h"

namespace lapse {
namespace {

// The file's identity, or the error of stat(2) on it.
std::string Identity(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return absl::StrCat("error ", errno);
  return absl::StrCat(info.st_dev, ":", info.st_ino, ":", info.st_size, ":", info.st_mtim.tv_sec,
                      ".", info.st_mtim.tv_nsec);
}

absl::StatusOr<AuthPolicy> Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_file=", path, ": cannot read it: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(text.str());
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_file=", path, ": ", policy.status().message()));
  }
  return policy;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuthFile>> AuthFile::Open(const std::string& path,
                                                         absl::Duration poll_interval) {
  std::unique_ptr<AuthFile> file(new AuthFile(path, poll_interval));
  const std::string identity = Identity(path);
  absl::StatusOr<AuthPolicy> policy = Load(path);
  if (!policy.ok()) return policy.status();
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && (info.st_mode & S_IROTH) != 0) {
    Log(LogLevel::kWarning,
        "--auth_file=%s is readable by every user; make it readable by lapsed only (chmod 600)",
        path);
  }
  {
    MutexLock lock(&file->mu_);
    file->identity_ = identity;
    file->policy_ = std::make_shared<const AuthPolicy>(*std::move(policy));
  }
  if (poll_interval > absl::ZeroDuration()) {
    file->poller_ = std::thread([f = file.get()] { f->Poll(); });
  }
  return file;
}

AuthFile::AuthFile(std::string path, absl::Duration poll_interval)
    : path_(std::move(path)), poll_interval_(poll_interval) {}

AuthFile::~AuthFile() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<const AuthPolicy> AuthFile::policy() const {
  MutexLock lock(&mu_);
  return policy_;
}

absl::Status AuthFile::ReloadIfChanged() {
  const std::string identity = Identity(path_);
  {
    MutexLock lock(&mu_);
    if (identity == identity_) return absl::OkStatus();
    identity_ = identity;
  }
  absl::StatusOr<AuthPolicy> policy = Load(path_);
  if (!policy.ok()) {
    Log(LogLevel::kError, "%s; keeping the previous grants until the file changes again",
        policy.status().message());
    return policy.status();
  }
  const size_t principals = policy->principal_count();
  {
    MutexLock lock(&mu_);
    policy_ = std::make_shared<const AuthPolicy>(*std::move(policy));
  }
  Log(LogLevel::kInfo, "--auth_file=%s reloaded: %d principals", path_, principals);
  return absl::OkStatus();
}

void AuthFile::Poll() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) stop_cv_.WaitWithTimeout(&mu_, poll_interval_);
      if (stopping_) return;
    }
    ReloadIfChanged().IgnoreError();
  }
}

}  // namespace lapse

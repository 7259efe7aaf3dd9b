// AuthFile: lapsed's --auth_file, read at start-up and re-read when it
// changes, so tokens and grants can be rotated (a Kubernetes Secret update,
// an editor's atomic rename) without a restart.
//
// The file's identity (device, inode, size, modification time; through
// symbolic links) is polled by a thread every `poll_interval`. When it
// changed, the file is read and parsed again: a good file replaces the policy
// (logged at info), a bad one or an unreadable file is logged as an error and
// the previous policy stays, until the file changes again.
//
//   absl::StatusOr<std::unique_ptr<lapse::AuthFile>> auth =
//       lapse::AuthFile::Open("/etc/lapse/auth", absl::Seconds(2));
//   std::shared_ptr<const lapse::AuthPolicy> policy = (*auth)->policy();
//
// Thread-safe. Polling stops when the AuthFile is destroyed.
#ifndef LAPSE_SERVER_AUTH_AUTH_FILE_H_
#define LAPSE_SERVER_AUTH_AUTH_FILE_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/auth_policy.h"
#include "server/base/mutex.h"

namespace lapse {

class AuthFile final {
 public:
  // Reads and parses `path`; INVALID_ARGUMENT naming the file and the line
  // when it cannot be used. With a positive `poll_interval`, polls it from a
  // thread of its own; with zero, only ReloadIfChanged() reads it again.
  static absl::StatusOr<std::unique_ptr<AuthFile>> Open(const std::string& path,
                                                        absl::Duration poll_interval);
  ~AuthFile();
  AuthFile(const AuthFile&) = delete;
  AuthFile& operator=(const AuthFile&) = delete;

  // The policy in force; it stays valid as long as the caller holds it.
  std::shared_ptr<const AuthPolicy> policy() const;

  // Reads the file again if its identity changed since the last attempt.
  // OK when unchanged or reloaded; otherwise the error, which was logged,
  // and the previous policy stays.
  absl::Status ReloadIfChanged();

  const std::string& path() const { return path_; }

 private:
  AuthFile(std::string path, absl::Duration poll_interval);
  void Poll();

  // Constant after construction.
  const std::string path_;
  const absl::Duration poll_interval_;

  // State below is protected by mu_.
  mutable Mutex mu_;
  CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const AuthPolicy> policy_ ABSL_GUARDED_BY(mu_);
  // What stat(2) said at the last attempt to read the file.
  std::string identity_ ABSL_GUARDED_BY(mu_);

  // Started by Open, joined by the destructor; last, so it starts after the
  // state above exists.
  std::thread poller_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_AUTH_AUTH_FILE_H_

// LapsedProcess: a real lapsed binary as a child process, for tests that need
// the whole program (flags, signals, exit status, restarts, crashes).
//
//   lapse::testing::LapsedProcess lapsed({"--listen=127.0.0.1:0"});
//   absl::StatusOr<int> port = lapsed.AwaitPort();   // parses the start line
//   ...
//   lapsed.Signal(SIGTERM);
//   int status = lapsed.Wait();
//
// The binary is LAPSED_PATH, a compile definition. Not thread-safe; the
// destructor kills a child that is still running.
#ifndef LAPSE_TESTS_LAPSED_PROCESS_H_
#define LAPSE_TESTS_LAPSED_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

extern char** environ;

namespace lapse::testing {

class LapsedProcess {
 public:
  // How long a test waits for output or exit before it counts as a failure.
  static constexpr absl::Duration kPatience = absl::Seconds(30);

  explicit LapsedProcess(const std::vector<std::string>& flags) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
    stdout_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<std::string> args = {LAPSED_PATH};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    spawned_ =
        posix_spawn(&pid_, LAPSED_PATH, &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
  }
  LapsedProcess(const LapsedProcess&) = delete;
  LapsedProcess& operator=(const LapsedProcess&) = delete;

  ~LapsedProcess() {
    if (spawned_ && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(stdout_);
  }

  bool spawned() const { return spawned_; }
  pid_t pid() const { return pid_; }

  // The next line lapsed prints, or "" if none comes within kPatience.
  std::string ReadLine() {
    std::string line;
    const absl::Time deadline = absl::Now() + kPatience;
    while (line.empty() || line.back() != '\n') {
      pollfd fd = {stdout_, POLLIN, 0};
      const int timeout_ms =
          static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (timeout_ms <= 0 || poll(&fd, 1, timeout_ms) <= 0) return "";
      char c;
      if (read(stdout_, &c, 1) != 1) return "";
      line.push_back(c);
    }
    return line;
  }

  // Reads the start line ("lapsed listening on HOST:PORT (port N); ...") and
  // returns the port. The line itself is kept in start_line().
  absl::StatusOr<int> AwaitPort() {
    start_line_ = ReadLine();
    const size_t at = start_line_.find("(port ");
    const size_t end = start_line_.find(')', at);
    int port = 0;
    if (at == std::string::npos || end == std::string::npos ||
        !absl::SimpleAtoi(start_line_.substr(at + 6, end - at - 6), &port) || port <= 0) {
      return absl::UnavailableError(absl::StrCat("no start line; got \"", start_line_, "\""));
    }
    return port;
  }
  const std::string& start_line() const { return start_line_; }

  void Signal(int signal_number) { kill(pid_, signal_number); }

  // Waits for the process to exit; its wait status, or -1 on timeout.
  int Wait() {
    absl::Notification exited;
    int status = -1;
    std::thread waiter([&] {
      int s;
      if (waitpid(pid_, &s, 0) == pid_) status = s;
      exited.Notify();
    });
    if (!exited.WaitForNotificationWithTimeout(kPatience)) kill(pid_, SIGKILL);
    waiter.join();
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  bool spawned_ = false;
  bool reaped_ = false;
  std::string start_line_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTS_LAPSED_PROCESS_H_

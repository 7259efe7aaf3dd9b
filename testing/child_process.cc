#include "testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "testing/test_util.h"

extern char** environ;

namespace lapse::testing {
namespace {

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!absl::StartsWith(*entry, "LAPSE_ADDR=")) out.emplace_back(*entry);
  }
  out.insert(out.end(), env.begin(), env.end());
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

ChildProcess::ChildProcess(const std::string& path, const std::vector<std::string>& args,
                           const std::vector<std::string>& env) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  // The child starts with default dispositions and nothing blocked, whatever
  // this test process did to its own signals.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_strings = {path};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<char*> envp = Pointers(env_strings);
  pid_t pid;
  if (posix_spawn(&pid, path.c_str(), &actions, &attributes, argv.data(), envp.data()) == 0) {
    pid_ = pid;
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_ = in[1];
  fds_[kStdout] = out[0];
  fds_[kStderr] = err[0];
}

ChildProcess::~ChildProcess() {
  if (spawned() && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {stdin_, fds_[0], fds_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void ChildProcess::CloseStdin(absl::string_view input) {
  if (stdin_ < 0) return;
  // SIGPIPE would kill the test if the child exited without reading.
  signal(SIGPIPE, SIG_IGN);
  while (!input.empty()) {
    const ssize_t n = write(stdin_, input.data(), input.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    input.remove_prefix(static_cast<size_t>(n));
  }
  close(stdin_);
  stdin_ = -1;
}

bool ChildProcess::ReadSome(absl::Time deadline) {
  pollfd polls[2];
  int count = 0;
  int streams[2];
  for (int s : {kStdout, kStderr}) {
    if (fds_[s] < 0) continue;
    polls[count] = {fds_[s], POLLIN, 0};
    streams[count++] = s;
  }
  if (count == 0) return false;
  const int64_t timeout_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  if (timeout_ms <= 0) return false;
  const int ready = poll(polls, count, static_cast<int>(timeout_ms));
  if (ready < 0 && errno == EINTR) return true;
  if (ready <= 0) return false;
  for (int i = 0; i < count; ++i) {
    if (polls[i].revents == 0) continue;
    const int s = streams[i];
    char buffer[4096];
    const ssize_t n = read(fds_[s], buffer, sizeof(buffer));
    if (n > 0) {
      output_[s].append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(fds_[s]);
      fds_[s] = -1;
    }
  }
  return true;
}

std::string ChildProcess::WaitForLine(Stream stream, absl::string_view needle) {
  const absl::Time deadline = absl::Now() + kPatience;
  while (true) {
    size_t newline;
    while ((newline = output_[stream].find('\n', consumed_[stream])) != std::string::npos) {
      std::string line = output_[stream].substr(consumed_[stream], newline - consumed_[stream]);
      consumed_[stream] = newline + 1;
      if (absl::StrContains(line, needle)) return line;
    }
    if (!ReadSome(deadline)) return "";
  }
}

void ChildProcess::Signal(int signal_number) {
  if (spawned() && !reaped_) kill(pid_, signal_number);
}

ChildProcess::Result ChildProcess::Wait() {
  CloseStdin();
  const absl::Time deadline = absl::Now() + kPatience;
  while (ReadSome(deadline)) {
  }
  if (spawned() && !reaped_) {
    if (fds_[kStdout] >= 0 || fds_[kStderr] >= 0) kill(pid_, SIGKILL);
    int status = 0;
    if (waitpid(pid_, &status, 0) == pid_) wait_status_ = status;
    reaped_ = true;
  }
  Result result;
  result.wait_status = wait_status_;
  result.exit_code = wait_status_ != -1 && WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : -1;
  result.out = output_[kStdout];
  result.err = output_[kStderr];
  return result;
}

ChildProcess::Result RunToCompletion(const std::string& path, const std::vector<std::string>& args,
                                     const std::vector<std::string>& env,
                                     absl::string_view stdin_data) {
  ChildProcess child(path, args, env);
  child.CloseStdin(stdin_data);
  return child.Wait();
}

}  // namespace lapse::testing

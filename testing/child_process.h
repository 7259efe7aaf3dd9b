// ChildProcess: a program run as a user would, with its stdin, stdout and
// stderr on pipes, for tests that drive lapsed and lapsectl.
//
//   ChildProcess lapsed(LAPSED_PATH, {"--listen=127.0.0.1:0"});
//   std::string line = lapsed.WaitForLine(ChildProcess::kStdout, "listening");
//   ...
//   lapsed.Signal(SIGTERM);
//   ChildProcess::Result result = lapsed.Wait();
//
// Every wait gives up after kPatience (a failure guard, not a sleep). The
// environment is the test's, minus LAPSE_ADDR, plus `env`. Not thread-safe.
#ifndef LAPSE_TESTING_CHILD_PROCESS_H_
#define LAPSE_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse::testing {

class ChildProcess final {
 public:
  enum Stream { kStdout = 0, kStderr = 1 };

  struct Result {
    // The exit status, or -1 if the process was killed by a signal or did
    // not exit within kPatience.
    int exit_code = -1;
    // The status waitpid() reported (WIFSIGNALED etc. apply), or -1 if the
    // process could not be reaped.
    int wait_status = -1;
    std::string out;
    std::string err;
  };

  // `env` entries are "NAME=value".
  ChildProcess(const std::string& path, const std::vector<std::string>& args,
               const std::vector<std::string>& env = {});
  // Kills the process if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool spawned() const { return pid_ > 0; }
  // Its process id; -1 if it was not spawned.
  pid_t pid() const { return pid_; }

  // Writes `input` to the process's stdin and closes it.
  void CloseStdin(absl::string_view input = "");

  // Reads until a line of `stream` that has not been returned yet contains
  // `needle`, and returns it (without its newline); "" if the stream ended or
  // kPatience passed first.
  std::string WaitForLine(Stream stream, absl::string_view needle);

  void Signal(int signal_number);

  // Closes stdin, reads both streams to their end and reaps the process.
  Result Wait();

 private:
  // Reads whatever is available (waiting until `deadline` for something);
  // false once nothing more can come or the deadline passed.
  bool ReadSome(absl::Time deadline);

  pid_t pid_ = -1;
  int stdin_ = -1;
  int fds_[2] = {-1, -1};
  std::string output_[2];
  // How much of output_ WaitForLine has consumed.
  size_t consumed_[2] = {0, 0};
  bool reaped_ = false;
  int wait_status_ = -1;
};

// Runs `path` to completion with `stdin_data` as its input.
ChildProcess::Result RunToCompletion(const std::string& path, const std::vector<std::string>& args,
                                     const std::vector<std::string>& env = {},
                                     absl::string_view stdin_data = "");

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_CHILD_PROCESS_H_

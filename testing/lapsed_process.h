// LapsedProcess: a real lapsed binary as a child process, for tests that need
// the whole program (flags, start line, signals, exit status, restarts,
// crashes). It listens on 127.0.0.1 and the port it bound is read from its
// start line.
//
//   LapsedProcess lapsed(LAPSED_PATH, {"--data-dir=" + dir.path()});
//   ASSERT_GT(lapsed.port(), 0);
//   Client client(lapsed.address());
//   std::unique_ptr<v1::LapseService::Stub> stub = lapsed.NewStub();
//   ...
//   EXPECT_EQ(lapsed.Stop(), 0);  // SIGTERM, then its exit status
//
// Not thread-safe; the destructor kills a lapsed that is still running.
#ifndef LAPSE_TESTING_LAPSED_PROCESS_H_
#define LAPSE_TESTING_LAPSED_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "testing/child_process.h"

namespace lapse::testing {

class LapsedProcess final {
 public:
  // Starts `path` listening on 127.0.0.1:`port` (0: a port the kernel picks)
  // with errors-only logging and a short shutdown grace, then `flags` (which
  // may override those), and waits (at most kPatience) for its start line.
  // Returns early if lapsed exits instead, e.g. on a refused flag. With
  // `open_file_limit` > 0, lapsed runs under `prlimit --nofile=N` (util-linux):
  // soft and hard limit N.
  LapsedProcess(const std::string& path, std::vector<std::string> flags, int port = 0,
                int open_file_limit = 0);

  bool spawned() const { return process_.spawned(); }
  // The port lapsed reported listening on; 0 if it did not start.
  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  // A LapseService stub on a new plaintext channel to address().
  std::unique_ptr<v1::LapseService::Stub> NewStub() const;
  // The port the start line names as "(metrics port N)" (--metrics_listen);
  // 0 if none.
  int metrics_port() const;
  // "lapsed listening on HOST:PORT (port N); ..."; empty if none came.
  const std::string& start_line() const { return start_line_; }

  void Signal(int signal_number) { process_.Signal(signal_number); }
  // A line of lapsed's `stream` containing `needle` (see ChildProcess).
  std::string WaitForLine(ChildProcess::Stream stream, absl::string_view needle) {
    return process_.WaitForLine(stream, needle);
  }
  // Waits (at most kPatience, then kills it) for lapsed to exit; what it
  // printed and how it ended.
  ChildProcess::Result Wait() { return process_.Wait(); }
  // SIGTERM, then the exit status (-1 if it did not exit by itself).
  int Stop();

 private:
  ChildProcess process_;
  std::string start_line_;
  int port_ = 0;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_LAPSED_PROCESS_H_

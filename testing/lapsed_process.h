// LapsedProcess: a real lapsed started on 127.0.0.1 for a test, with the port
// it bound read from its first line of output.
//
//   LapsedProcess lapsed(LAPSED_PATH, {"--data-dir=/tmp/x"});
//   ASSERT_GT(lapsed.port(), 0);
//   ...
//   EXPECT_EQ(lapsed.Stop(), 0);  // SIGTERM, then its exit status
//
// Not thread-safe.
#ifndef LAPSE_TESTING_LAPSED_PROCESS_H_
#define LAPSE_TESTING_LAPSED_PROCESS_H_

#include <string>
#include <vector>

#include "testing/child_process.h"

namespace lapse::client::testing {

class LapsedProcess final {
 public:
  // Listens on 127.0.0.1:`port` (0: any free port) with `flags` added.
  LapsedProcess(const std::string& path, std::vector<std::string> flags,
                int port = 0);

  // 0 if lapsed did not report listening.
  int port() const { return port_; }
  std::string address() const;

  // SIGTERM; the exit status (-1 if it did not exit cleanly).
  int Stop();

 private:
  ChildProcess process_;
  int port_ = 0;
};

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with its contents
// when destroyed.
class TempDir final {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty if it could not be created.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lapse::client::testing

#endif  // LAPSE_TESTING_LAPSED_PROCESS_H_

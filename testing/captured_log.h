// CapturedLog: while it lives, lapse's log lines (server/base/log.h) are
// written to memory instead of stderr, for a test to read back.
//
//   CapturedLog log;
//   ... code that logs ...
//   EXPECT_THAT(log.Text(), HasSubstr("ERROR: --auth_file="));
//
// The sink is process-wide: one CapturedLog at a time. Not thread-safe: read
// Text() and destroy it once the code under test has stopped logging.
#ifndef LAPSE_TESTING_CAPTURED_LOG_H_
#define LAPSE_TESTING_CAPTURED_LOG_H_

#include <stdio.h>

#include <cstdlib>
#include <string>

#include "server/base/log.h"

namespace lapse::testing {

class CapturedLog final {
 public:
  CapturedLog() : sink_(open_memstream(&buffer_, &size_)) { SetLogSinkForTesting(sink_); }
  ~CapturedLog() {
    SetLogSinkForTesting(nullptr);
    std::fclose(sink_);
    std::free(buffer_);
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // Everything logged since construction.
  std::string Text() {
    std::fflush(sink_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* const sink_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_CAPTURED_LOG_H_

// TempDir: a fresh directory for one test, removed with everything in it when
// the TempDir is destroyed, so tests leave nothing behind in /tmp.
//
//   lapse::testing::TempDir dir;
//   options.data_dir = dir.path();
//
// Created under $TEST_TMPDIR, else $TMPDIR, else /tmp. Not thread-safe.
#ifndef LAPSE_TESTING_TEMP_DIR_H_
#define LAPSE_TESTING_TEMP_DIR_H_

#include <string>

namespace lapse::testing {

class TempDir final {
 public:
  // Aborts if the directory cannot be created.
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEMP_DIR_H_

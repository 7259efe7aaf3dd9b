// TempDir: a fresh directory for one test, removed with everything in it when
// the TempDir is destroyed, so tests leave nothing behind in /tmp.
//
//   TempDir dir;
//   ASSERT_FALSE(dir.path().empty());
//   WriteFile(dir.path() + "/wal-0001", ...);
//
// The directory is created under $TEST_TMPDIR if set, else under
// ::testing::TempDir(). Thread-compatible.
#ifndef LAPSE_TESTING_TEMP_DIR_H_
#define LAPSE_TESTING_TEMP_DIR_H_

#include <string>

namespace lapse::testing {

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

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEMP_DIR_H_

// TempDir: a fresh, empty directory for one test, removed with everything in
// it when the TempDir goes out of scope.
//
//   lapse::testing::TempDir dir;
//   auto store = DurableStore::Open({.dir = dir.path()});
//
// It is made under ::testing::TempDir() ($TEST_TMPDIR, else /tmp) and named
// lapse-test-XXXXXX. A test program that cannot create it aborts.
//
// Thread-compatible: path() never changes.
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

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEMP_DIR_H_

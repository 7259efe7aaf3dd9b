#include "testing/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace lapse::testing {

TempDir::TempDir() {
  const char* test_tmpdir = getenv("TEST_TMPDIR");
  const std::string base =
      test_tmpdir != nullptr && *test_tmpdir != '\0' ? test_tmpdir : ::testing::TempDir();
  std::string pattern = absl::StrCat(absl::StripSuffix(base, "/"), "/lapse-test-XXXXXX");
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

}  // namespace lapse::testing

#include "testing/temp_dir.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lapse::testing {

TempDir::TempDir() {
  std::string base = ::testing::TempDir();
  if (!absl::EndsWith(base, "/")) base += '/';
  std::string pattern = absl::StrCat(base, "lapse-test-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror(pattern.c_str());
    std::abort();
  }
  path_ = std::move(pattern);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace lapse::testing

#include "testing/temp_dir.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace lapse::testing {
namespace {

std::string Root() {
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"}) {
    if (const char* dir = std::getenv(var); dir != nullptr && *dir != '\0') return dir;
  }
  return "/tmp";
}

}  // namespace

TempDir::TempDir() : path_(Root() + "/lapse-test-XXXXXX") {
  if (::mkdtemp(path_.data()) == nullptr) {
    std::perror(("mkdtemp " + path_).c_str());
    std::abort();
  }
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace lapse::testing

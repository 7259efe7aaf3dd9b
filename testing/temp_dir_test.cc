#include "testing/temp_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace lapse::testing {
namespace {

namespace fs = std::filesystem;

TEST(TempDirTest, MakesAFreshEmptyDirectoryUnderTheTestTempDir) {
  TempDir a;
  TempDir b;
  EXPECT_NE(a.path(), b.path());
  for (const TempDir* dir : {&a, &b}) {
    EXPECT_TRUE(fs::is_directory(dir->path())) << dir->path();
    EXPECT_TRUE(fs::is_empty(dir->path())) << dir->path();
    EXPECT_TRUE(absl::StartsWith(dir->path(), ::testing::TempDir())) << dir->path();
  }
}

TEST(TempDirTest, RemovesItselfAndEverythingInItWhenDestroyed) {
  std::string path;
  {
    TempDir dir;
    path = dir.path();
    fs::create_directories(fs::path(path) / "nested" / "deeper");
    std::ofstream(fs::path(path) / "file") << "data";
    std::ofstream(fs::path(path) / "nested" / "deeper" / "file") << "data";
    ASSERT_TRUE(fs::exists(fs::path(path) / "nested" / "deeper" / "file"));
  }
  EXPECT_FALSE(fs::exists(path)) << path;
}

}  // namespace
}  // namespace lapse::testing

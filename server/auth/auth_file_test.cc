#include "server/auth/auth_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/log.h"
#include "testing/temp_dir.h"

namespace lapse {
namespace {

using ::testing::HasSubstr;

std::string TokenLine(absl::string_view token, absl::string_view rest) {
  return absl::StrCat("token:sha256:", absl::BytesToHexString(Sha256(token)), " ", rest, "\n");
}

// Replaces `path` the way editors and Kubernetes do: a new file renamed over it.
void Replace(const std::string& path, const std::string& text) {
  const std::string next = path + ".next";
  std::ofstream(next, std::ios::binary | std::ios::trunc) << text;
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
}

// Captures lapse's log lines while it lives.
class CapturedLog {
 public:
  CapturedLog() : file_(std::tmpfile()) { SetLogSinkForTesting(file_); }
  ~CapturedLog() {
    SetLogSinkForTesting(nullptr);
    std::fclose(file_);
  }
  std::string Text() {
    std::fflush(file_);
    std::rewind(file_);
    std::string text;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), file_)) text.append(buffer, n);
    return text;
  }

 private:
  std::FILE* file_;
};

TEST(AuthFileTest, OpenRefusesABadFileNamingItAndTheLine) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/auth";
  Replace(path, "alice read *\n");
  absl::StatusOr<std::unique_ptr<AuthFile>> file = AuthFile::Open(path, absl::ZeroDuration());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr(absl::StrCat("--auth_file=", path, ": line 1")));

  absl::StatusOr<std::unique_ptr<AuthFile>> missing =
      AuthFile::Open(dir.path() + "/none", absl::ZeroDuration());
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot read it"));
}

TEST(AuthFileTest, ReloadsAChangedFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/auth";
  Replace(path, TokenLine("old", "read *"));
  absl::StatusOr<std::unique_ptr<AuthFile>> file = AuthFile::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();
  std::shared_ptr<const AuthPolicy> before = (*file)->policy();
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy(), before);

  Replace(path, TokenLine("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_NE(before->Identify("old", {}), nullptr);
}

TEST(AuthFileTest, ABadNewFileKeepsTheOldPolicyAndLogsAnError) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/auth";
  Replace(path, TokenLine("old", "read *"));
  absl::StatusOr<std::unique_ptr<AuthFile>> file = AuthFile::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();

  CapturedLog log;
  Replace(path, absl::StrCat(TokenLine("new", "read *"), "bob write *\n"));
  absl::Status reloaded = (*file)->ReloadIfChanged();
  EXPECT_EQ(reloaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_EQ((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_THAT(log.Text(), HasSubstr("ERROR: --auth_file="));
  EXPECT_THAT(log.Text(), HasSubstr("line 2: unknown principal \"bob\"; expected"));
  EXPECT_THAT(log.Text(), HasSubstr("keeping the previous grants"));
  // Not logged again until the file changes.
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());

  Replace(path, TokenLine("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
}

}  // namespace
}  // namespace lapse

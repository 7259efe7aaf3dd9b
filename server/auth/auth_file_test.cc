#include "server/auth/auth_file.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/log.h"
#include "testing/auth_grants.h"
#include "testing/captured_log.h"
#include "testing/temp_dir.h"

namespace lapse {
namespace {

using ::lapse::testing::CapturedLog;
using ::testing::HasSubstr;

TEST(AuthFileTest, OpenRefusesABadFileNamingItAndTheLine) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/auth";
  testing::WriteAuthFile(path, "alice read *\n");
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
  testing::WriteAuthFile(path, testing::TokenGrant("old", "read *"));
  absl::StatusOr<std::unique_ptr<AuthFile>> file = AuthFile::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();
  std::shared_ptr<const AuthPolicy> before = (*file)->policy();
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy(), before);

  testing::WriteAuthFile(path, testing::TokenGrant("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_NE(before->Identify("old", {}), nullptr);
}

TEST(AuthFileTest, ABadNewFileKeepsTheOldPolicyAndLogsAnError) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/auth";
  testing::WriteAuthFile(path, testing::TokenGrant("old", "read *"));
  absl::StatusOr<std::unique_ptr<AuthFile>> file = AuthFile::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();

  CapturedLog log;
  testing::WriteAuthFile(path, absl::StrCat(testing::TokenGrant("new", "read *"), "bob write *\n"));
  absl::Status reloaded = (*file)->ReloadIfChanged();
  EXPECT_EQ(reloaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_EQ((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_THAT(log.Text(), HasSubstr("ERROR: --auth_file="));
  EXPECT_THAT(log.Text(), HasSubstr("line 2: unknown principal \"bob\"; expected"));
  EXPECT_THAT(log.Text(), HasSubstr("keeping the previous grants"));
  // Not logged again until the file changes.
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());

  testing::WriteAuthFile(path, testing::TokenGrant("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
}

}  // namespace
}  // namespace lapse

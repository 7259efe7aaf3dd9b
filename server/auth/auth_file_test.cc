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

class AuthFileTest : public ::testing::Test {
 protected:
  // The auth file written with `text`, then opened (never reloaded by itself).
  absl::StatusOr<std::unique_ptr<AuthFile>> WriteAndOpen(const std::string& text) {
    testing::WriteAuthFile(path_, text);
    return AuthFile::Open(path_, absl::ZeroDuration());
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.path() + "/auth";
};

TEST_F(AuthFileTest, OpenRefusesABadFileNamingItAndTheLine) {
  absl::StatusOr<std::unique_ptr<AuthFile>> file = WriteAndOpen("alice read *\n");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr(absl::StrCat("--auth_file=", path_, ": line 1")));

  absl::StatusOr<std::unique_ptr<AuthFile>> missing =
      AuthFile::Open(dir_.path() + "/none", absl::ZeroDuration());
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot read it"));
}

TEST_F(AuthFileTest, ReloadsAChangedFile) {
  absl::StatusOr<std::unique_ptr<AuthFile>> file =
      WriteAndOpen(testing::TokenGrant("old", "read *"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::shared_ptr<const AuthPolicy> before = (*file)->policy();
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy(), before);

  testing::WriteAuthFile(path_, testing::TokenGrant("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_EQ((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_NE(before->Identify("old", {}), nullptr);
}

TEST_F(AuthFileTest, ABadNewFileKeepsTheOldPolicyAndLogsAnError) {
  absl::StatusOr<std::unique_ptr<AuthFile>> file =
      WriteAndOpen(testing::TokenGrant("old", "read *"));
  ASSERT_TRUE(file.ok()) << file.status();

  CapturedLog log;
  testing::WriteAuthFile(path_,
                         absl::StrCat(testing::TokenGrant("new", "read *"), "bob write *\n"));
  absl::Status reloaded = (*file)->ReloadIfChanged();
  EXPECT_EQ(reloaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE((*file)->policy()->Identify("old", {}), nullptr);
  EXPECT_EQ((*file)->policy()->Identify("new", {}), nullptr);
  EXPECT_THAT(log.Text(), HasSubstr("ERROR: --auth_file="));
  EXPECT_THAT(log.Text(), HasSubstr("line 2: unknown principal \"bob\"; expected"));
  EXPECT_THAT(log.Text(), HasSubstr("keeping the previous grants"));
  // Not logged again until the file changes.
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());

  testing::WriteAuthFile(path_, testing::TokenGrant("new", "read *"));
  EXPECT_TRUE((*file)->ReloadIfChanged().ok());
  EXPECT_NE((*file)->policy()->Identify("new", {}), nullptr);
}

}  // namespace
}  // namespace lapse

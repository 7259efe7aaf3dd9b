#include "server/storage/store_identity.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/files.h"
#include "server/storage/wal.h"
#include "testing/temp_dir.h"

namespace lapse {
namespace {

using ::testing::HasSubstr;

TEST(StoreIdentityTest, ANewDirectoryGetsAnIdAndTheFreshFirstSequenceAndKeepsThem) {
  testing::TempDir dir;
  absl::StatusOr<StoreIdentity> made = LoadOrCreateIdentity(dir.path(), 1795000000000000000);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->first_sequence, 1795000000000000000u);
  absl::StatusOr<StoreIdentity> again = LoadOrCreateIdentity(dir.path(), 42);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, made->id);
  EXPECT_EQ(again->first_sequence, 1795000000000000000u);
}

TEST(StoreIdentityTest, TwoDirectoriesHaveDifferentIds) {
  testing::TempDir a, b;
  EXPECT_NE(LoadOrCreateIdentity(a.path(), 1)->id, LoadOrCreateIdentity(b.path(), 1)->id);
}

TEST(StoreIdentityTest, ADirectoryWithHistoryButNoIdentityStartsItsHistoryAtOne) {
  testing::TempDir dir;
  ASSERT_TRUE(files::WriteAtomically(dir.path(), Wal::SegmentName(1), "").ok());
  absl::StatusOr<StoreIdentity> made = LoadOrCreateIdentity(dir.path(), 5000);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->first_sequence, 1u);
}

TEST(StoreIdentityTest, ADamagedIdentityIsDataLossNamingTheFile) {
  testing::TempDir dir;
  ASSERT_TRUE(LoadOrCreateIdentity(dir.path(), 1).ok());
  const std::string path = dir.path() + "/" + kIdentityFileName;
  std::string contents = *files::ReadAll(path);
  contents[6] ^= 1;
  ASSERT_TRUE(files::WriteAtomically(dir.path(), kIdentityFileName, contents).ok());
  absl::StatusOr<StoreIdentity> damaged = LoadOrCreateIdentity(dir.path(), 1);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(damaged.status().message(), HasSubstr(path + " is damaged"));
  ASSERT_TRUE(files::WriteAtomically(dir.path(), kIdentityFileName, "ab").ok());
  EXPECT_EQ(LoadOrCreateIdentity(dir.path(), 1).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace lapse

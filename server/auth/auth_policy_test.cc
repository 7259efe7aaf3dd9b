#include "server/auth/auth_policy.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/auth_grants.h"

namespace lapse {
namespace {

using ::testing::HasSubstr;

TEST(AuthPolicyTest, Sha256MatchesTheStandardTestVector) {
  EXPECT_EQ(absl::BytesToHexString(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthPolicyTest, IdentifiesATokenByItsHashAndGrantsItsPrefixes) {
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(absl::StrCat(
      "# orders service\n", testing::TokenGrant("s3cret", "read,write orders: carts:  # both")));
  ASSERT_TRUE(policy.ok()) << policy.status();
  const AuthPrincipal* caller = policy->Identify("s3cret", {});
  ASSERT_NE(caller, nullptr);
  EXPECT_EQ(caller->label,
            absl::StrCat("token sha256:", absl::BytesToHexString(Sha256("s3cret")).substr(0, 8)));
  EXPECT_TRUE(AuthPolicy::Allows(*caller, Permission::kWrite, "orders:42"));
  EXPECT_TRUE(AuthPolicy::Allows(*caller, Permission::kRead, "carts:7"));
  EXPECT_FALSE(AuthPolicy::Allows(*caller, Permission::kRead, "users:1"));
  EXPECT_FALSE(AuthPolicy::Allows(*caller, Permission::kWatch, "orders:42"));
  EXPECT_FALSE(AuthPolicy::Allows(*caller, Permission::kAdmin, "orders:42"));
}

TEST(AuthPolicyTest, UnknownOrEmptyTokensIdentifyNoOne) {
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(testing::TokenGrant("s3cret", "read *"));
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->Identify("s3cre", {}), nullptr);
  EXPECT_EQ(policy->Identify("", {}), nullptr);
  EXPECT_EQ(policy->Identify(absl::BytesToHexString(Sha256("s3cret")), {}), nullptr);
}

TEST(AuthPolicyTest, IdentifiesASpiffeIdAndAddsUpItsLines) {
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(
      "spiffe://shop.example/billing watch orders:\n"
      "spiffe://shop.example/billing read orders:paid:\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->principal_count(), 1u);
  const std::vector<std::string> ids = {"spiffe://other/x", "spiffe://shop.example/billing"};
  const AuthPrincipal* caller = policy->Identify("", ids);
  ASSERT_NE(caller, nullptr);
  EXPECT_EQ(caller->label, "spiffe://shop.example/billing");
  EXPECT_TRUE(AuthPolicy::Allows(*caller, Permission::kWatch, "orders:"));
  EXPECT_TRUE(AuthPolicy::Allows(*caller, Permission::kRead, "orders:paid:1"));
  EXPECT_FALSE(AuthPolicy::Allows(*caller, Permission::kRead, "orders:unpaid:1"));
  EXPECT_EQ(policy->Identify("", {"spiffe://shop.example/billing/more"}), nullptr);
}

TEST(AuthPolicyTest, APrefixIsAllowedOnlyWithinAGrant) {
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(testing::TokenGrant("t", "watch orders:"));
  ASSERT_TRUE(policy.ok()) << policy.status();
  const AuthPrincipal& caller = *policy->Identify("t", {});
  EXPECT_TRUE(AuthPolicy::Allows(caller, Permission::kWatch, "orders:eu:"));
  EXPECT_FALSE(AuthPolicy::Allows(caller, Permission::kWatch, "order"));
  EXPECT_FALSE(AuthPolicy::Allows(caller, Permission::kWatch, ""));
}

TEST(AuthPolicyTest, StarAndAllGrantEverything) {
  absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(testing::TokenGrant("root", "all *"));
  ASSERT_TRUE(policy.ok()) << policy.status();
  const AuthPrincipal& caller = *policy->Identify("root", {});
  for (Permission p : {Permission::kRead, Permission::kWrite, Permission::kWatch,
                       Permission::kConsume, Permission::kAdmin}) {
    EXPECT_TRUE(AuthPolicy::Allows(caller, p, "")) << PermissionName(p);
  }
}

TEST(AuthPolicyTest, RefusesMalformedLinesNamingTheLine) {
  const std::string good = testing::TokenGrant("t", "read *");
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {absl::StrCat(good, "token:sha256:abc read *\n"), "line 2: a token principal"},
      {absl::StrCat(good, "\n", testing::TokenGrant("u", "wirte orders:")),
       "line 3: unknown permission \"wirte\""},
      {absl::StrCat(good, testing::TokenGrant("u", "read")),
       "line 2: expected PRINCIPAL PERMISSIONS"},
      {"alice read orders:\n", "line 1: unknown principal \"alice\""},
      {"spiffe:// read orders:\n", "line 1: unknown principal"},
      {absl::StrCat("token:sha256:", std::string(64, 'A'), " read *\n"), "lowercase hex"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<AuthPolicy> policy = AuthPolicy::Parse(c.text);
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(policy.status().message(), HasSubstr(c.error)) << c.text;
  }
}

}  // namespace
}  // namespace lapse

#include "server/service/authorizer.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/grpc_security_constants.h"
#include "gtest/gtest.h"
#include "testing/auth_grants.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An AuthContext holding given properties, as gRPC's TLS handshake fills one.
class FakeAuthContext final : public grpc::AuthContext {
 public:
  void Add(std::string name, std::string value) {
    properties_.emplace_back(std::move(name), std::move(value));
  }

  bool IsPeerAuthenticated() const override { return !properties_.empty(); }
  std::vector<grpc::string_ref> GetPeerIdentity() const override { return {}; }
  std::string GetPeerIdentityPropertyName() const override { return ""; }
  std::vector<grpc::string_ref> FindPropertyValues(const std::string& name) const override {
    std::vector<grpc::string_ref> values;
    for (const auto& [key, value] : properties_) {
      if (key == name) values.emplace_back(value);
    }
    return values;
  }
  grpc::AuthPropertyIterator begin() const override { return NoProperties(); }
  grpc::AuthPropertyIterator end() const override { return NoProperties(); }
  void AddProperty(const std::string& key, const grpc::string_ref& value) override {
    Add(key, std::string(value.data(), value.size()));
  }
  bool SetPeerIdentityPropertyName(const std::string& name) override { return false; }

 private:
  struct NoProperties : grpc::AuthPropertyIterator {};
  std::vector<std::pair<std::string, std::string>> properties_;
};

TEST(SpiffeIdsTest, ReadsThePeerSpiffeIdGrpcFoundInTheCertificate) {
  FakeAuthContext context;
  context.Add(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME, "ssl");
  context.Add(GRPC_X509_SAN_PROPERTY_NAME, "spiffe://shop.test/billing");
  context.Add(GRPC_X509_SAN_PROPERTY_NAME, "billing.shop.test");
  context.Add(GRPC_PEER_URI_PROPERTY_NAME, "spiffe://shop.test/billing");
  context.Add(GRPC_PEER_SPIFFE_ID_PROPERTY_NAME, "spiffe://shop.test/billing");
  EXPECT_THAT(SpiffeIds(context), ElementsAre("spiffe://shop.test/billing"));
}

TEST(SpiffeIdsTest, ACertificateWithoutASpiffeIdHasNone) {
  FakeAuthContext context;
  // gRPC sets peer_spiffe_id only for exactly one URI SAN that is a SPIFFE ID.
  context.Add(GRPC_PEER_URI_PROPERTY_NAME, "spiffe://a/x");
  context.Add(GRPC_PEER_URI_PROPERTY_NAME, "spiffe://a/y");
  context.Add(GRPC_X509_CN_PROPERTY_NAME, "billing");
  EXPECT_THAT(SpiffeIds(context), IsEmpty());
}

TEST(AuthorizeTest, AnOpenServerAllowsEverything) {
  EXPECT_TRUE(Authorize(Caller(), {{Permission::kAdmin, "", Access::kPrefix}}).ok());
}

TEST(AuthorizeTest, ARefusalNamesThePermissionTheTargetAndThePrincipal) {
  absl::StatusOr<AuthPolicy> policy =
      AuthPolicy::Parse(testing::TokenGrant("t", "read,watch orders:"));
  ASSERT_TRUE(policy.ok()) << policy.status();
  Caller caller;
  caller.policy = std::make_shared<const AuthPolicy>(*std::move(policy));
  caller.principal = caller.policy->Identify("t", {});

  EXPECT_TRUE(Authorize(caller, {{Permission::kRead, "orders:1", Access::kCollection},
                                 {Permission::kWatch, "orders:", Access::kPrefix}})
                  .ok());
  const absl::Status write =
      Authorize(caller, {{Permission::kRead, "orders:1", Access::kCollection},
                         {Permission::kWrite, "orders:1", Access::kCollection}});
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(write.message(), HasSubstr("token sha256:"));
  EXPECT_THAT(write.message(), HasSubstr("lacks permission \"write\" on collection \"orders:1\""));
  EXPECT_THAT(Authorize(caller, {{Permission::kWatch, "users:", Access::kPrefix}}).message(),
              HasSubstr("\"watch\" on the collections starting with \"users:\""));
  EXPECT_THAT(Authorize(caller, {{Permission::kWatch, "", Access::kPrefix}}).message(),
              HasSubstr("\"watch\" on every collection"));
}

}  // namespace
}  // namespace lapse

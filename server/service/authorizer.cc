#include "server/service/authorizer.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"

namespace lapse {
namespace {

constexpr absl::string_view kBearer = "bearer ";

// The token of the call's "authorization: Bearer TOKEN" metadata; empty if
// there is none.
absl::string_view BearerToken(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  absl::string_view value(it->second.data(), it->second.size());
  if (value.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer)) {
    return {};
  }
  return absl::StripAsciiWhitespace(value.substr(kBearer.size()));
}

absl::Status Denied(const Caller& caller, const Access& access) {
  const std::string what =
      access.kind == Access::kCollection
          ? absl::StrCat("collection \"", absl::CHexEscape(access.name), "\"")
      : access.name.empty()
          ? std::string("every collection (set a collection prefix or names within the grants)")
          : absl::StrCat("the collections starting with \"", absl::CHexEscape(access.name), "\"");
  return absl::PermissionDeniedError(absl::StrCat(
      caller.principal->label, " lacks permission \"", PermissionName(access.permission), "\" on ",
      what, "; the server's --auth_file grants permissions per collection prefix"));
}

}  // namespace

absl::Status Authorize(const Caller& caller, absl::Span<const Access> needs) {
  if (caller.policy == nullptr) return absl::OkStatus();
  for (const Access& access : needs) {
    if (!AuthPolicy::Allows(*caller.principal, access.permission, access.name)) {
      return Denied(caller, access);
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> SpiffeIds(const grpc::AuthContext& context) {
  std::vector<std::string> ids;
  for (const grpc::string_ref& id : context.FindPropertyValues(GRPC_PEER_SPIFFE_ID_PROPERTY_NAME)) {
    ids.emplace_back(id.data(), id.size());
  }
  return ids;
}

absl::StatusOr<Caller> Authorizer::Authenticate(const grpc::ServerContextBase& context) const {
  Caller caller;
  if (file_ == nullptr) return caller;
  caller.policy = file_->policy();
  const absl::string_view token = BearerToken(context);
  std::vector<std::string> ids;
  if (std::shared_ptr<const grpc::AuthContext> auth = context.auth_context(); auth != nullptr) {
    ids = SpiffeIds(*auth);
  }
  caller.principal = caller.policy->Identify(token, ids);
  if (caller.principal != nullptr) return caller;
  if (token.empty() && ids.empty()) {
    return absl::UnauthenticatedError(
        "no credentials: this server requires a bearer token (metadata \"authorization: Bearer "
        "TOKEN\") or a client certificate with a SPIFFE ID that its --auth_file names");
  }
  return absl::UnauthenticatedError(
      "the credentials presented (bearer token or client certificate's SPIFFE ID) are not in the "
      "server's --auth_file; ask its operator for a token");
}

}  // namespace lapse

// Authorizer: enforces an auth file (server/auth/) at the service's edge.
//
// LapseServiceImpl asks it twice per call: Authenticate, before the request is
// parsed, finds who calls (a bearer token in the "authorization: Bearer ..."
// metadata, else the SPIFFE ID gRPC read from a verified client certificate,
// AuthContext property "peer_spiffe_id"); Authorize, once the request is
// parsed, checks each Access the RPC needs (lapse_service.cc lists them per
// RPC; README.md's Security section has the table).
//
//   lapse::Authorizer authorizer(auth_file);  // nullptr: open to anyone
//   absl::StatusOr<lapse::Caller> caller = authorizer.Authenticate(*context);
//   absl::Status allowed = lapse::Authorize(*caller, {{Permission::kWrite, name,
//                                                      lapse::Access::kCollection}});
//
// Errors: UNAUTHENTICATED without credentials or with ones the file does not
// name; PERMISSION_DENIED naming the permission and the collection or prefix
// missing (and the principal's label, never a token).
//
// Thread-safe; the AuthFile must outlive the Authorizer.
#ifndef LAPSE_SERVER_SERVICE_AUTHORIZER_H_
#define LAPSE_SERVER_SERVICE_AUTHORIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/server_context.h"
#include "server/auth/auth_file.h"
#include "server/auth/auth_policy.h"

namespace lapse {

// One thing an RPC needs: `permission` on a collection, or on every
// collection whose name starts with a prefix (the empty prefix: all).
struct Access {
  enum Kind { kCollection, kPrefix };
  Permission permission;
  absl::string_view name;
  Kind kind;
};

// Who calls; open (no policy) when the server has no auth file.
struct Caller {
  std::shared_ptr<const AuthPolicy> policy;
  const AuthPrincipal* principal = nullptr;
};

// OK when `caller` may do all of `needs`; PERMISSION_DENIED naming the first
// it may not.
absl::Status Authorize(const Caller& caller, absl::Span<const Access> needs);

// The SPIFFE IDs gRPC found in the peer's certificate.
std::vector<std::string> SpiffeIds(const grpc::AuthContext& context);

class Authorizer final {
 public:
  explicit Authorizer(const AuthFile* file) : file_(file) {}

  // The caller of `context`'s call, or UNAUTHENTICATED.
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context) const;

 private:
  // Constant after construction; null: open.
  const AuthFile* const file_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_AUTHORIZER_H_

// AuthPolicy: who may do what to which collections, as an auth file
// (lapsed --auth_file) says. Pure C++ + Abseil: the service layer finds the
// caller's credentials in gRPC's metadata and peer certificate and asks here.
//
// The file has one grant per line; '#' starts a comment, blank lines are
// ignored, and the grants of a principal add up:
//
//   # PRINCIPAL                      PERMISSIONS  COLLECTION PREFIXES
//   token:sha256:9f86d081884c7d65...  read,write   orders: carts:
//   spiffe://shop.example/ns/shop/sa/billing  watch,read  orders:
//   token:sha256:60303ae22b998861...  all          *
//
// - A principal is a bearer token, written as the SHA-256 of the token in
//   64 hex digits (printf %s "$TOKEN" | sha256sum), so the file holds no
//   secret a caller could present; or a SPIFFE ID (spiffe://...), the URI SAN
//   of a client certificate verified by mTLS.
// - Permissions, comma-separated: read, write, watch, consume, admin, or all.
// - A prefix grants the permissions on every collection whose name starts
//   with it; "*" stands for every collection (the empty prefix). Prefixes
//   cannot hold whitespace.
//
// Presented tokens are hashed and compared with every token principal in
// constant time, so neither the answer's timing nor the file tells a token.
//
//   absl::StatusOr<lapse::AuthPolicy> policy = lapse::AuthPolicy::Parse(text);
//   const lapse::AuthPrincipal* caller = policy->Identify(token, spiffe_ids);
//   if (caller == nullptr) ...  // UNAUTHENTICATED
//   if (!policy->Allows(*caller, lapse::Permission::kWrite, "orders:42")) ...
//
// Thread-compatible; a const AuthPolicy is safe to share between threads.
#ifndef LAPSE_SERVER_AUTH_AUTH_POLICY_H_
#define LAPSE_SERVER_AUTH_AUTH_POLICY_H_

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace lapse {

enum class Permission { kRead, kWrite, kWatch, kConsume, kAdmin };
inline constexpr size_t kPermissionCount = 5;

// "read", "write", "watch", "consume" or "admin".
absl::string_view PermissionName(Permission permission);

// One principal of the file and everything granted to it.
struct AuthPrincipal {
  // For logs: the SPIFFE ID, or "token sha256:" and the first 8 hex digits
  // of the token's hash (never the token).
  std::string label;
  // Granted prefixes, indexed by Permission.
  std::array<std::vector<std::string>, kPermissionCount> prefixes;
};

class AuthPolicy final {
 public:
  // The policy in an auth file's `text`; INVALID_ARGUMENT naming the line
  // and what is wrong with it ("line 3: unknown permission \"wirte\"...").
  static absl::StatusOr<AuthPolicy> Parse(absl::string_view text);

  // The principal of `bearer_token` if it is non-empty and known, else of the
  // first of `spiffe_ids` that the file names; nullptr when neither is.
  const AuthPrincipal* Identify(absl::string_view bearer_token,
                                absl::Span<const std::string> spiffe_ids) const;

  // Whether `principal` has `permission` on `name`: on a collection of that
  // name or, when `name` is a watch's or a listing's prefix, on every
  // collection whose name starts with it (both hold when a granted prefix
  // starts `name`).
  static bool Allows(const AuthPrincipal& principal, Permission permission, absl::string_view name);

  size_t principal_count() const { return tokens_.size() + spiffe_.size(); }

 private:
  struct TokenPrincipal {
    std::string sha256;  // 32 bytes
    AuthPrincipal principal;
  };
  std::vector<TokenPrincipal> tokens_;
  absl::flat_hash_map<std::string, AuthPrincipal> spiffe_;
};

// The SHA-256 of `data`, 32 bytes.
std::string Sha256(absl::string_view data);

}  // namespace lapse

#endif  // LAPSE_SERVER_AUTH_AUTH_POLICY_H_

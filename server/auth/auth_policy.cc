#include "server/auth/auth_policy.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/base/enum_names.h"

namespace lapse {
namespace {

constexpr absl::string_view kTokenPrefix = "token:sha256:";
constexpr absl::string_view kSpiffePrefix = "spiffe://";
constexpr EnumName<Permission> kPermissionNames[kPermissionCount] = {
    {Permission::kRead, "read"},       {Permission::kWrite, "write"}, {Permission::kWatch, "watch"},
    {Permission::kConsume, "consume"}, {Permission::kAdmin, "admin"},
};

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// The permissions of a comma-separated list.
absl::StatusOr<std::vector<Permission>> ParsePermissions(absl::string_view list, int line) {
  std::vector<Permission> permissions;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    if (name == "all") {
      for (const EnumName<Permission>& entry : kPermissionNames) {
        permissions.push_back(entry.value);
      }
      continue;
    }
    Permission permission{};
    if (!ParseName(kPermissionNames, name, &permission)) {
      return LineError(line, absl::StrCat("unknown permission \"", absl::CHexEscape(name),
                                          "\"; expected read, write, watch, consume, admin or "
                                          "all, separated by commas"));
    }
    permissions.push_back(permission);
  }
  return permissions;
}

bool IsLowerHex(absl::string_view text) {
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

absl::string_view PermissionName(Permission permission) {
  return NameOf(kPermissionNames, permission, "unknown");
}

std::string Sha256(absl::string_view data) {
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

absl::StatusOr<AuthPolicy> AuthPolicy::Parse(absl::string_view text) {
  AuthPolicy policy;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t comment = line.find('#'); comment != absl::string_view::npos) {
      line = line.substr(0, comment);
    }
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() < 3) {
      return LineError(line_number,
                       "expected PRINCIPAL PERMISSIONS PREFIX... (e.g. \"token:sha256:<64 hex "
                       "digits> read,write orders:\")");
    }

    AuthPrincipal* principal = nullptr;
    absl::string_view name = fields[0];
    if (absl::ConsumePrefix(&name, kTokenPrefix)) {
      if (name.size() != 2 * SHA256_DIGEST_LENGTH || !IsLowerHex(name)) {
        return LineError(line_number,
                         "a token principal is token:sha256: and the token's SHA-256 in 64 "
                         "lowercase hex digits (printf %s \"$TOKEN\" | sha256sum)");
      }
      const std::string digest = absl::HexStringToBytes(name);
      for (TokenPrincipal& known : policy.tokens_) {
        if (known.sha256 == digest) principal = &known.principal;
      }
      if (principal == nullptr) {
        TokenPrincipal& added = policy.tokens_.emplace_back();
        added.sha256 = digest;
        added.principal.label = absl::StrCat("token sha256:", name.substr(0, 8));
        principal = &added.principal;
      }
    } else if (absl::StartsWith(name, kSpiffePrefix) && name.size() > kSpiffePrefix.size()) {
      principal = &policy.spiffe_[name];
      principal->label = std::string(name);
    } else {
      return LineError(line_number, absl::StrCat("unknown principal \"", absl::CHexEscape(name),
                                                 "\"; expected token:sha256:<64 hex digits> or "
                                                 "spiffe://<trust domain>/<path>"));
    }
    absl::StatusOr<std::vector<Permission>> permissions = ParsePermissions(fields[1], line_number);
    if (!permissions.ok()) return permissions.status();
    for (size_t i = 2; i < fields.size(); ++i) {
      const absl::string_view prefix = fields[i] == "*" ? absl::string_view() : fields[i];
      for (Permission permission : *permissions) {
        principal->prefixes[static_cast<size_t>(permission)].emplace_back(prefix);
      }
    }
  }
  return policy;
}

const AuthPrincipal* AuthPolicy::Identify(absl::string_view bearer_token,
                                          absl::Span<const std::string> spiffe_ids) const {
  if (!bearer_token.empty()) {
    const std::string digest = Sha256(bearer_token);
    const AuthPrincipal* found = nullptr;
    // Every entry is compared, each in constant time.
    for (const TokenPrincipal& known : tokens_) {
      if (CRYPTO_memcmp(known.sha256.data(), digest.data(), digest.size()) == 0) {
        found = &known.principal;
      }
    }
    if (found != nullptr) return found;
  }
  for (const std::string& id : spiffe_ids) {
    if (auto it = spiffe_.find(id); it != spiffe_.end()) return &it->second;
  }
  return nullptr;
}

bool AuthPolicy::Allows(const AuthPrincipal& principal, Permission permission,
                        absl::string_view name) {
  for (const std::string& prefix : principal.prefixes[static_cast<size_t>(permission)]) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

}  // namespace lapse

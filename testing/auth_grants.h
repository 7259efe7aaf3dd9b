// Auth files for tests (server/auth/auth_policy.h has the format).
//
//   WriteAuthFile(path, absl::StrCat(TokenGrant("s3cret", "read,write orders:"),
//                                    "spiffe://test/client watch *\n"));
//
// Header-only: the tests that use it link lapse_auth already. Thread-compatible.
#ifndef LAPSE_TESTING_AUTH_GRANTS_H_
#define LAPSE_TESTING_AUTH_GRANTS_H_

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "server/auth/auth_policy.h"

namespace lapse::testing {

// One line of an auth file granting `grants` ("PERMISSIONS PREFIX...") to the
// bearer token `token`.
inline std::string TokenGrant(absl::string_view token, absl::string_view grants) {
  return absl::StrCat("token:sha256:", absl::BytesToHexString(Sha256(token)), " ", grants, "\n");
}

// Replaces `path` with `text`, readable by its owner only, the way editors and
// Kubernetes do: a new file renamed over the old one.
inline void WriteAuthFile(const std::string& path, const std::string& text) {
  const std::string next = path + ".next";
  std::ofstream(next, std::ios::binary | std::ios::trunc) << text;
  ASSERT_EQ(chmod(next.c_str(), 0600), 0);
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
}

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_AUTH_GRANTS_H_

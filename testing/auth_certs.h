// AuthCerts: certificates for mTLS tests, made by openssl(1) at test time: a
// CA, a server certificate for 127.0.0.1 and localhost, and a client
// certificate whose only URI SAN is a SPIFFE ID, as a mesh issues it. All
// valid for a day, ECDSA P-256.
//
//   lapse::testing::TempDir dir;
//   absl::StatusOr<AuthCerts> certs = MakeAuthCerts(dir.path(), "spiffe://test/billing");
//   grpc::SslServerCredentialsOptions server(...);  // certs->server_cert, ...
//
// Thread-compatible.
#ifndef LAPSE_TESTING_AUTH_CERTS_H_
#define LAPSE_TESTING_AUTH_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace lapse::testing {

// PEM texts.
struct AuthCerts {
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
};

// Makes the certificates in `dir` (which must exist); INTERNAL with
// openssl's output when it fails.
absl::StatusOr<AuthCerts> MakeAuthCerts(const std::string& dir, const std::string& spiffe_id);

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_AUTH_CERTS_H_

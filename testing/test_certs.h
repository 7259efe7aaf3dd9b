// TestCa: a certificate authority for tests, made by the openssl program in
// a directory (a TempDir), that issues server and client certificates with
// the subject alternative names a test asks for, valid when it says.
//
//   TempDir dir;
//   TestCa ca(dir.path(), "ca");
//   TestCa::Issued server = ca.Issue("server", TestCa::kLoopbackNames);
//   TestCa::Issued spiffe = ca.Issue("workload", {"URI:spiffe://cluster.local/ns/x/sa/y"});
//   TestCa::Issued expired = ca.Issue("old", {"DNS:old"}, absl::Now() - absl::Hours(48),
//                                     absl::Now() - absl::Hours(24));
//   ... server.cert_file, server.key_file, ca.cert_file() ...
//
// Keys are EC P-256; every certificate may serve and authenticate clients.
// A failure to run openssl fails the current test (ADD_FAILURE) and leaves
// the file names of what it could not make. Not thread-safe.
#ifndef LAPSE_TESTING_TEST_CERTS_H_
#define LAPSE_TESTING_TEST_CERTS_H_

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lapse::testing {

class TestCa final {
 public:
  // The names of a server on the loopback interface: "DNS:localhost",
  // "IP:127.0.0.1".
  static const std::vector<std::string> kLoopbackNames;

  struct Issued {
    // PEM: the certificate alone (no chain), its unencrypted private key.
    std::string cert_file;
    std::string key_file;
  };

  // A self-signed CA with common name `name`, its files NAME.crt and
  // NAME.key (and openssl's bookkeeping, NAME.*) in `dir`.
  TestCa(const std::string& dir, const std::string& name);
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& cert_file() const { return cert_file_; }

  // A certificate with common name `name` and the subject alternative names
  // `sans` as openssl writes them ("DNS:localhost", "IP:127.0.0.1",
  // "URI:spiffe://cluster.local/ns/x/sa/y"), valid from `not_before` to
  // `not_after` (whole seconds), in the CA's directory as NAME.crt, NAME.key.
  Issued Issue(const std::string& name, const std::vector<std::string>& sans,
               absl::Time not_before = absl::Now() - absl::Hours(1),
               absl::Time not_after = absl::Now() + absl::Hours(24));

 private:
  const std::string dir_;
  const std::string name_;
  const std::string cert_file_;
  const std::string key_file_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEST_CERTS_H_

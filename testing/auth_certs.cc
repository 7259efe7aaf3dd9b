#include "testing/auth_certs.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testing/child_process.h"

namespace lapse::testing {
namespace {

absl::Status OpenSsl(const std::vector<std::string>& args) {
  const ChildProcess::Result result = RunToCompletion("/usr/bin/openssl", args);
  if (result.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("openssl ", absl::StrJoin(args, " "), " failed: ", result.err));
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A key and a certificate signing request for `name` in `dir`.
absl::Status KeyAndRequest(const std::string& dir, const std::string& name) {
  return OpenSsl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", absl::StrCat(dir, "/", name, ".key"), "-out",
                  absl::StrCat(dir, "/", name, ".csr"), "-subj", absl::StrCat("/CN=", name)});
}

// Signs `name`'s request with the CA, with `extensions` (an openssl
// extension file's text).
absl::Status Sign(const std::string& dir, const std::string& name, const std::string& extensions) {
  const std::string ext = absl::StrCat(dir, "/", name, ".ext");
  std::ofstream(ext) << extensions;
  return OpenSsl({"x509", "-req", "-in", absl::StrCat(dir, "/", name, ".csr"), "-CA",
                  dir + "/ca.pem", "-CAkey", dir + "/ca.key", "-CAcreateserial", "-days", "1",
                  "-extfile", ext, "-out", absl::StrCat(dir, "/", name, ".pem")});
}

}  // namespace

absl::StatusOr<AuthCerts> MakeAuthCerts(const std::string& dir, const std::string& spiffe_id) {
  absl::Status made = OpenSsl(
      {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "1", "-subj", "/CN=lapse-test-ca"});
  if (made.ok()) made = KeyAndRequest(dir, "server");
  if (made.ok()) {
    made = Sign(dir, "server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  }
  if (made.ok()) made = KeyAndRequest(dir, "client");
  if (made.ok()) {
    made = Sign(dir, "client",
                absl::StrCat("subjectAltName=URI:", spiffe_id, "\nextendedKeyUsage=clientAuth\n"));
  }
  if (!made.ok()) return made;
  AuthCerts certs;
  certs.ca_cert = Slurp(dir + "/ca.pem");
  certs.server_cert = Slurp(dir + "/server.pem");
  certs.server_key = Slurp(dir + "/server.key");
  certs.client_cert = Slurp(dir + "/client.pem");
  certs.client_key = Slurp(dir + "/client.key");
  return certs;
}

}  // namespace lapse::testing

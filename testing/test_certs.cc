#include "testing/test_certs.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"

namespace lapse::testing {
namespace {

// Runs openssl with `args`; a failure fails the test with what it printed.
void OpenSsl(const std::vector<std::string>& args) {
  const ChildProcess::Result result = RunToCompletion(LAPSE_OPENSSL_PATH, args);
  if (result.exit_code != 0) {
    ADD_FAILURE() << "openssl " << absl::StrJoin(args, " ") << " exited " << result.exit_code
                  << ": " << result.err;
  }
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) ADD_FAILURE() << "cannot write " << path;
}

// openssl ca's time format.
std::string CaTime(absl::Time time) {
  return absl::FormatTime("%Y%m%d%H%M%SZ", time, absl::UTCTimeZone());
}

}  // namespace

const std::vector<std::string> TestCa::kLoopbackNames = {"DNS:localhost", "IP:127.0.0.1"};

TestCa::TestCa(const std::string& dir, const std::string& name)
    : dir_(dir),
      name_(name),
      cert_file_(absl::StrCat(dir, "/", name, ".crt")),
      key_file_(absl::StrCat(dir, "/", name, ".key")) {
  OpenSsl({"req",
           "-x509",
           "-new",
           "-newkey",
           "ec",
           "-pkeyopt",
           "ec_paramgen_curve:P-256",
           "-nodes",
           "-keyout",
           key_file_,
           "-out",
           cert_file_,
           "-subj",
           "/CN=" + name,
           "-days",
           "3",
           "-addext",
           "basicConstraints=critical,CA:TRUE",
           "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  // openssl ca, unlike openssl x509, takes any validity period, the past
  // included; it keeps a database of what it issued.
  const std::string base = absl::StrCat(dir, "/", name);
  WriteFile(base + ".index", "");
  WriteFile(base + ".serial", "01\n");
  WriteFile(base + ".cnf",
            absl::StrCat("[ca]\ndefault_ca = test_ca\n"
                         "[test_ca]\n"
                         "database = ",
                         base, ".index\nserial = ", base, ".serial\nnew_certs_dir = ", dir,
                         "\ndefault_md = sha256\npolicy = any\n"
                         "unique_subject = no\n"
                         "[any]\ncommonName = supplied\n"));
}

TestCa::Issued TestCa::Issue(const std::string& name, const std::vector<std::string>& sans,
                             absl::Time not_before, absl::Time not_after) {
  const std::string base = absl::StrCat(dir_, "/", name);
  Issued issued{base + ".crt", base + ".key"};
  OpenSsl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", issued.key_file, "-out", base + ".csr", "-subj", "/CN=" + name});
  WriteFile(base + ".ext", absl::StrCat("[leaf]\nbasicConstraints = critical,CA:FALSE\n"
                                        "keyUsage = critical,digitalSignature\n"
                                        "extendedKeyUsage = serverAuth,clientAuth\n"
                                        "subjectAltName = ",
                                        absl::StrJoin(sans, ","), "\n"));
  OpenSsl({"ca",
           "-batch",
           "-notext",
           "-config",
           absl::StrCat(dir_, "/", name_, ".cnf"),
           "-cert",
           cert_file_,
           "-keyfile",
           key_file_,
           "-in",
           base + ".csr",
           "-out",
           issued.cert_file,
           "-startdate",
           CaTime(not_before),
           "-enddate",
           CaTime(not_after),
           "-extfile",
           base + ".ext",
           "-extensions",
           "leaf"});
  return issued;
}

}  // namespace lapse::testing

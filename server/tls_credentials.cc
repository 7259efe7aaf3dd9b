#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace lapse {
namespace {

// The whole file, or INVALID_ARGUMENT "OPTION=PATH: cannot read ...".
absl::StatusOr<std::string> ReadFile(const char* option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, "=", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  return text.str();
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x509) const { X509_free(x509); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of the file, or INVALID_ARGUMENT naming the option.
absl::StatusOr<Certificate> ReadCertificate(const char* option, const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(option, path);
  if (!pem.ok()) return pem.status();
  Certificate certificate(PEM_read_bio_X509(MemoryBio(*pem).get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, "=", path, ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  return certificate;
}

}  // namespace

absl::Status CheckTlsOptions(const TlsOptions& tls) {
  if (!tls.enabled()) {
    if (!tls.key_file.empty()) {
      return absl::InvalidArgumentError("tls_key is set without tls_cert: give both, or neither");
    }
    if (!tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "tls_client_ca is set without tls_cert: mTLS needs the server's own certificate too");
    }
    return absl::OkStatus();
  }
  if (tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert is set without tls_key: give both, or neither");
  }
  if (tls.refresh_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_refresh_interval=", absl::FormatDuration(tls.refresh_interval),
                     " is shorter than 1s"));
  }
  return absl::OkStatus();
}

absl::Status CheckTlsFiles(const TlsOptions& tls) {
  if (absl::Status options = CheckTlsOptions(tls); !options.ok() || !tls.enabled()) {
    return options;
  }
  absl::StatusOr<Certificate> certificate = ReadCertificate("tls_cert", tls.cert_file);
  if (!certificate.ok()) return certificate.status();
  absl::StatusOr<std::string> key_pem = ReadFile("tls_key", tls.key_file);
  if (!key_pem.ok()) return key_pem.status();
  Key key(PEM_read_bio_PrivateKey(MemoryBio(*key_pem).get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_key=", tls.key_file,
                     ": holds no unencrypted PEM private key (-----BEGIN ... KEY-----)"));
  }
  if (X509_check_private_key(certificate->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "tls_key=", tls.key_file, " does not match the certificate in tls_cert=", tls.cert_file,
        "; give the key it was issued for"));
  }
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<Certificate> ca = ReadCertificate("tls_client_ca", tls.client_ca_file);
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  const auto seconds = static_cast<unsigned int>(
      std::clamp<int64_t>(absl::ToInt64Seconds(tls.refresh_interval), 1, INT32_MAX));
  auto files = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, seconds);
  grpc::experimental::TlsServerCredentialsOptions options(files);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca_file.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace lapse

// TLS for lapsed's gRPC port: the certificate files it serves with (and, for
// mTLS, the CA that client certificates must chain to), re-read when they
// change so that cert-manager can rotate them under a running server.
//
//   TlsOptions tls;
//   tls.cert_file = "/etc/lapse/tls/tls.crt";
//   tls.key_file = "/etc/lapse/tls/tls.key";
//   tls.client_ca_file = "/etc/lapse/tls/ca.crt";  // optional: mTLS
//   if (absl::Status ok = CheckTlsFiles(tls); !ok.ok()) ...  // at start-up
//   builder.AddListeningPort(address, ServerCredentialsFor(tls), &port);
//
// Rotation: gRPC's FileWatcherCertificateProvider reads the files again every
// refresh_interval; a new handshake gets what it read last, connections and
// streams already open keep theirs. Replace the files atomically (a Secret
// volume swaps a symlink to a new directory; by hand, rename a directory or
// symlink into place), so that no read sees a new certificate with an old
// key.
//
// Pure functions; thread-safe. The credentials returned may be used by any
// number of servers.
#ifndef LAPSE_SERVER_TLS_CREDENTIALS_H_
#define LAPSE_SERVER_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"

namespace lapse {

struct TlsOptions {
  // PEM certificate chain (the server's certificate first) and its private
  // key. An empty cert_file serves plaintext.
  std::string cert_file;
  std::string key_file;
  // PEM CA certificates. Non-empty: mTLS, every client must present a
  // certificate that chains to one of them.
  std::string client_ca_file;
  // How often the files are read again; whole seconds, at least one.
  absl::Duration refresh_interval = absl::Minutes(1);

  bool enabled() const { return !cert_file.empty(); }
};

// The options alone, no file read: INVALID_ARGUMENT naming the option
// (tls_cert, tls_key, tls_client_ca, tls_refresh_interval) when a key or
// client CA is given without a certificate, a certificate without a key, or
// the interval is under a second.
absl::Status CheckTlsOptions(const TlsOptions& tls);

// What the first handshake would otherwise find out: CheckTlsOptions, then
// INVALID_ARGUMENT naming the option when a file cannot be read or holds no
// PEM certificate (key), or the key does not match the certificate. OK when
// TLS is off.
absl::Status CheckTlsFiles(const TlsOptions& tls);

// Plaintext when TLS is off; otherwise TLS with the files re-read every
// refresh_interval, requiring and verifying client certificates when
// client_ca_file is set. Call CheckTlsFiles first: gRPC only logs what it
// cannot read, and then fails every handshake.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsOptions& tls);

}  // namespace lapse

#endif  // LAPSE_SERVER_TLS_CREDENTIALS_H_

#!/bin/bash
# test_certs.sh DIR: TLS material for the client tests of the other languages
# (the C++ tests use test_certs.h), made with the openssl program:
#   DIR/ca.crt                      a self-signed test CA
#   DIR/server.crt, DIR/server.key  localhost and 127.0.0.1, issued by it
#   DIR/client.crt, DIR/client.key  a client certificate for mTLS, issued by it
# Keys are EC P-256, unencrypted; certificates are valid for a day. Exits
# non-zero with openssl's message when openssl fails.
set -euo pipefail
dir=$1
openssl_quiet() {
  local out
  if ! out=$(openssl "$@" 2>&1); then
    echo "openssl $*: $out" >&2
    exit 1
  fi
}
openssl_quiet req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" -subj /CN=test-ca -days 2 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
for name in server client; do
  openssl_quiet req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name"
  printf '%s\n' 'basicConstraints = critical,CA:FALSE' 'keyUsage = critical,digitalSignature' \
    'extendedKeyUsage = serverAuth,clientAuth' 'subjectAltName = DNS:localhost,IP:127.0.0.1' \
    > "$dir/$name.ext"
  openssl_quiet x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 1 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.crt"
done

package lapse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TLSOptions is TLS for a Client's channel (Options.TLS), as the C++
// client's TlsOptions. The files are PEM, read by Dial.
type TLSOptions struct {
	// CA certificates that verify the server; "": the system's roots.
	CAFile string
	// mTLS: this client's certificate (chain) and its private key; both or
	// neither.
	CertFile string
	KeyFile  string
	// The name the server's certificate must carry, when it is not the
	// target's host (tests; a server reached by IP address).
	ServerName string
}

// credentials reads the files of o; INVALID_ARGUMENT naming the field of a
// file that cannot be read or holds no PEM certificate, or of a certificate
// without its key.
func (o *TLSOptions) credentials() (credentials.TransportCredentials, error) {
	config := &tls.Config{ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, invalidArgument("TLS.CAFile: " + err.Error())
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalidArgument("TLS.CAFile: no PEM certificate in " + o.CAFile)
		}
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, invalidArgument("TLS.CertFile, TLS.KeyFile: give both or neither")
	}
	if o.CertFile != "" {
		certificate, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, invalidArgument("TLS.CertFile, TLS.KeyFile: " + err.Error())
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	return credentials.NewTLS(config), nil
}

// bearerToken sends "authorization: Bearer TOKEN" with every call: the token,
// or what the file holds (surrounding whitespace ignored), read again
// whenever the file changes (device, inode, size, modification time), so a
// rotated token is used from the next call on. A call fails UNAUTHENTICATED,
// naming the file, when it cannot be read or is empty. Safe for concurrent
// use.
type bearerToken struct {
	file string

	mu       sync.Mutex
	token    string
	identity string
}

func fileIdentity(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	identity := fmt.Sprint(info.Size(), ":", info.ModTime().UnixNano())
	if stat, ok := info.Sys().(*syscall.Stat_t); ok {
		identity = fmt.Sprint(stat.Dev, ":", stat.Ino, ":", identity)
	}
	return identity
}

func (b *bearerToken) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file != "" {
		if identity := fileIdentity(b.file); identity == "" || identity != b.identity {
			text, err := os.ReadFile(b.file)
			if err != nil {
				return nil, status.Errorf(codes.Unauthenticated, "cannot read the bearer token file %s: %v", b.file, err)
			}
			b.token, b.identity = strings.TrimSpace(string(text)), identity
		}
		if b.token == "" {
			return nil, status.Errorf(codes.Unauthenticated, "the bearer token file %s is empty", b.file)
		}
	}
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false: lapse accepts tokens in plaintext too
// (they travel in the clear unless the connection is TLS or a mesh's mTLS).
func (b *bearerToken) RequireTransportSecurity() bool { return false }

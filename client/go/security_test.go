package lapse_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	lapse "lapse/client"
	lapsetest "lapse/testing"
)

// authorizing starts lapsed with an auth file: "s3cret" may read, write and
// watch orders:.
func authorizing(t *testing.T) *lapsetest.Lapsed {
	path := filepath.Join(t.TempDir(), "auth")
	lapsetest.WriteAuthFile(t, path, map[string]string{"s3cret": "read,write,watch orders:"})
	return lapsetest.Start(t, []string{"--auth_file=" + path}, 0)
}

func TestATokenTheAuthFileGrantsIsAcceptedByCallsAndWatches(t *testing.T) {
	client := dial(t, authorizing(t).Address, lapse.Options{BearerToken: "s3cret"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := client.Watch(ctx, lapse.WatchOptions{Prefix: "orders:", Start: lapse.StartOldest})
	must(t, err)
	expireNow(t, client, "orders:1", "a")
	events, err := lapsetest.Take(watch, 1)
	must(t, err)
	if events[0].Key != "a" {
		t.Errorf("event %+v", events[0])
	}
}

func TestAWrongTokenIsUnauthenticatedAndAGrantMissingPermissionDenied(t *testing.T) {
	lapsed, ctx := authorizing(t), context.Background()
	for _, options := range []lapse.Options{{BearerToken: "wrong"}, {}} {
		_, err := dial(t, lapsed.Address, options).Get(ctx, "orders:1", []string{"a"}, lapse.Expiration{})
		if codeOf(err) != codes.Unauthenticated {
			t.Errorf("token %q: %v", options.BearerToken, err)
		}
	}
	_, err := dial(t, lapsed.Address, lapse.Options{BearerToken: "s3cret"}).Delete(ctx, "orders:1")
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin") {
		t.Errorf("a delete without admin: %v", err)
	}
}

func TestATokenFileIsReadAgainWhenItChanges(t *testing.T) {
	lapsed, ctx := authorizing(t), context.Background()
	file := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(file, []byte("wrong\n"), 0o600))
	client := dial(t, lapsed.Address, lapse.Options{BearerTokenFile: file})
	if _, err := client.Get(ctx, "orders:1", []string{"a"}, lapse.Expiration{}); codeOf(err) != codes.Unauthenticated {
		t.Errorf("the wrong token: %v", err)
	}
	must(t, os.WriteFile(file+".next", []byte("  s3cret\n"), 0o600))
	must(t, os.Rename(file+".next", file))
	_, err := client.Get(ctx, "orders:1", []string{"a"}, lapse.Expiration{})
	must(t, err)
	must(t, os.Remove(file))
	_, err = client.Get(ctx, "orders:1", []string{"a"}, lapse.Expiration{})
	if codeOf(err) != codes.Unauthenticated || !strings.Contains(err.Error(), file) {
		t.Errorf("an unreadable token file: %v", err)
	}
}

func TestMTLSWithAClientCertificateWorksAndWithoutOneFails(t *testing.T) {
	certs := lapsetest.MakeCerts(t, t.TempDir())
	lapsed := lapsetest.Start(t, []string{"--tls_cert=" + certs.ServerCert, "--tls_key=" + certs.ServerKey,
		"--tls_client_ca=" + certs.CA}, 0)
	ctx := context.Background()
	mtls := &lapse.TLSOptions{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	_, err := dial(t, lapsed.Address, lapse.Options{TLS: mtls}).Put(ctx, "orders",
		[]lapse.MemberWrite{{Key: "a"}}, lapse.PutOptions{})
	must(t, err)
	byName := *mtls
	byName.ServerName = "localhost"
	got, err := dial(t, lapsed.Address, lapse.Options{TLS: &byName}).Get(ctx, "orders", []string{"a"}, lapse.Expiration{})
	must(t, err)
	if !got[0].Found {
		t.Error("a member written over mTLS is not found")
	}
	noCertificate := dial(t, lapsed.Address, lapse.Options{TLS: &lapse.TLSOptions{CAFile: certs.CA},
		MaxAttempts: 1, Timeout: 5 * time.Second})
	if _, err := noCertificate.Get(ctx, "orders", []string{"a"}, lapse.Expiration{}); codeOf(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v", err)
	}
}

func TestTLSFilesThatCannotBeReadAreInvalidArgumentNamingTheField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.crt")
	for field, tls := range map[string]*lapse.TLSOptions{
		"TLS.CAFile":                      {CAFile: missing},
		"TLS.CertFile, TLS.KeyFile: give": {CertFile: missing},
		"TLS.CertFile, TLS.KeyFile: open": {CertFile: missing, KeyFile: missing},
	} {
		if _, err := lapse.Dial("127.0.0.1:1", lapse.Options{TLS: tls}); codeOf(err) != codes.InvalidArgument ||
			!strings.Contains(err.Error(), field) {
			t.Errorf("%+v: %v", tls, err)
		}
	}
}

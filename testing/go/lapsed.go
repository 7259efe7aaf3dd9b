// Package lapsetest is test support for the Go client and example: a real
// lapsed as a child process (like testing/lapsed_process.h) and a patient
// read of a watch.
//
//	lapsed := lapsetest.Start(t, []string{"--data-dir=" + t.TempDir()}, 0)
//	client, _ := lapse.Dial(lapsed.Address, lapse.Options{})
//	events, err := lapsetest.Take(watch, 2)
//	lapsed.Stop() // SIGTERM, then its exit status
//
//	certs := lapsetest.MakeCerts(t, t.TempDir()) // testing/test_certs.sh
//	lapsetest.WriteAuthFile(t, path, map[string]string{"s3cret": "read,write orders:"})
//
// The lapsed binary is the one CMake passes in the LAPSED environment
// variable, the certificate script the one in LAPSE_TEST_CERTS.
package lapsetest

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	lapse "lapse/client"
)

// Patience is how long a test waits for something that should happen
// promptly before it calls it a failure (as testing::kPatience).
const Patience = 30 * time.Second

type Lapsed struct {
	Port    int
	Address string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Start runs lapsed on 127.0.0.1:port (0: a port the kernel picks) with
// errors-only logging and a short shutdown grace, then flags (which may
// override those), and returns once it printed its start line. The test's
// cleanup kills a lapsed still running.
func Start(t testing.TB, flags []string, port int) *Lapsed {
	t.Helper()
	args := append([]string{fmt.Sprintf("--listen=127.0.0.1:%d", port), "--log_level=error",
		"--shutdown_grace=200ms"}, flags...)
	cmd := exec.Command(os.Getenv("LAPSED"), args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting lapsed: %v", err)
	}
	l := &Lapsed{cmd: cmd, exited: make(chan struct{})}
	lines := make(chan string, 1)
	// Drains stdout for the life of the process, so lapsed never blocks on
	// a full pipe.
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "listening on") {
				lines <- scanner.Text()
			}
		}
		cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(l.Kill)
	select {
	case line := <-lines:
		at := strings.Index(line, "(port ")
		end := strings.Index(line[at+1:], ")") + at + 1
		if at < 0 || end <= at {
			t.Fatalf("lapsed start line without a port: %q", line)
		}
		l.Port, err = strconv.Atoi(line[at+len("(port ") : end])
		if err != nil {
			t.Fatalf("lapsed start line: %q: %v", line, err)
		}
		l.Address = fmt.Sprintf("127.0.0.1:%d", l.Port)
		return l
	case <-l.exited:
		t.Fatalf("lapsed %v exited before it listened", args)
	case <-time.After(Patience):
		t.Fatalf("lapsed printed no start line in %v", Patience)
	}
	return nil
}

// Stop sends SIGTERM and returns the exit status.
func (l *Lapsed) Stop() int {
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(Patience):
		l.Kill()
	}
	return l.cmd.ProcessState.ExitCode()
}

// Kill ends a lapsed still running.
func (l *Lapsed) Kill() {
	select {
	case <-l.exited:
	default:
		l.cmd.Process.Kill()
		<-l.exited
	}
}

// Take returns the next count events of w, or the error that ended it, or an
// error if they did not come within Patience.
func Take(w *lapse.Watch, count int) ([]lapse.ExpiryEvent, error) {
	var events []lapse.ExpiryEvent
	timeout := time.After(Patience)
	for len(events) < count {
		select {
		case event, open := <-w.Events():
			if !open {
				return events, fmt.Errorf("the watch ended after %d events: %w", len(events), w.Err())
			}
			events = append(events, event)
		case <-timeout:
			return events, fmt.Errorf("%d of %d events came within %v", len(events), count, Patience)
		}
	}
	return events, nil
}

// Certs are the files testing/test_certs.sh made: a test CA, a server
// certificate for localhost and 127.0.0.1, a client certificate.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// MakeCerts runs testing/test_certs.sh in dir.
func MakeCerts(t testing.TB, dir string) Certs {
	t.Helper()
	if out, err := exec.Command("bash", os.Getenv("LAPSE_TEST_CERTS"), dir).CombinedOutput(); err != nil {
		t.Fatalf("test_certs.sh: %v: %s", err, out)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	return Certs{path("ca.crt"), path("server.crt"), path("server.key"), path("client.crt"), path("client.key")}
}

// WriteAuthFile writes an --auth_file granting each token its
// "PERMISSIONS PREFIX...".
func WriteAuthFile(t testing.TB, path string, grants map[string]string) {
	t.Helper()
	var text strings.Builder
	for token, grant := range grants {
		fmt.Fprintf(&text, "token:sha256:%x %s\n", sha256.Sum256([]byte(token)), grant)
	}
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Descriptor hygiene for the server: a soft open-file limit raised to the
// hard one, and an accept4() that never lets gRPC's listener die.
//
// gRPC 1.51's listener (src/core/lib/iomgr/tcp_server_posix.cc, on_read)
// stops for good when accept4() fails with anything but EINTR or EAGAIN: one
// burst of connections that exhausts the descriptors (EMFILE) leaves the port
// open but never accepted on again, while established connections, health
// checks included, go on answering SERVING. gRPC offers no hook there (owning
// the accept loop with AddInsecureChannelFromFd would rule out TLS), so this
// module interposes accept4() for the whole process:
//
// - The executable defines accept4 (in accept_guard.cc, linked with
//   lapse_server, which exports the symbol with --export-dynamic-symbol); the
//   dynamic linker searches the executable first, so libgrpc's call lands
//   here. It makes the accept4 system call itself.
// - A connection whose descriptor leaves fewer than `reserved` descriptors
//   below the soft RLIMIT_NOFILE is reset at once (SO_LINGER 0, close):
//   Linux hands out the lowest free descriptor, so a high number means the
//   table is nearly full. The client fails fast instead of hanging, and the
//   reserve stays for the store (write-ahead log, snapshots) and gRPC itself.
//   This bounds the connections below the limit.
// - When accept4 fails with EMFILE or ENFILE all the same (something else
//   took the descriptors), a spare descriptor kept open for this is closed,
//   the pending connection accepted into its slot and reset, and the spare
//   reopened (libev's trick), until nothing is pending.
// - It then fails with EAGAIN, which makes gRPC re-arm the listener.
//
// Until InstallAcceptGuard() runs, accept4 passes straight to the kernel.
//
//   absl::StatusOr<FileLimit> limit = lapse::RaiseFileLimit();  // lapsed
//   absl::Status installed = lapse::InstallAcceptGuard(64);    // LapseServer::Start
//
// Thread-safe.
#ifndef LAPSE_SERVER_ACCEPT_GUARD_H_
#define LAPSE_SERVER_ACCEPT_GUARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lapse {

struct FileLimit {
  // The soft RLIMIT_NOFILE before and after; `hard` is the ceiling.
  uint64_t before = 0;
  uint64_t after = 0;
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE of this process to its hard limit.
absl::StatusOr<FileLimit> RaiseFileLimit();

// From now on, accept4 keeps `reserved` descriptors free below the current
// soft limit and never fails with EMFILE or ENFILE (see above). Calling it
// again changes `reserved`. FAILED_PRECONDITION if the limit leaves no
// descriptors for connections beyond `reserved`.
absl::Status InstallAcceptGuard(int reserved);

}  // namespace lapse

#endif  // LAPSE_SERVER_ACCEPT_GUARD_H_

// ListenAddress: what lapsed may be told to listen on, checked before gRPC
// sees it. gRPC resolves what it is given leniently: "127.0.0.1:99999" binds
// a random port (the port wraps modulo 65536), "127.0.0.1" binds 443 and
// "host:https" a service name. lapse accepts only
//
//   HOST:PORT      a name or an IPv4 address, e.g. 0.0.0.0:50051
//   [IPV6]:PORT    e.g. [::]:50051, [::1]:0
//   unix:/PATH     a Unix domain socket at an absolute path
//
// with PORT a decimal number in [0, 65535] (0: the kernel picks a free one).
//
//   absl::StatusOr<ListenAddress> address = ParseListenAddress("[::1]:0");
//   if (address.ok() && !address->is_unix()) ... address->host ...
//
// Pure functions; thread-safe.
#ifndef LAPSE_SERVER_LISTEN_ADDRESS_H_
#define LAPSE_SERVER_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lapse {

struct ListenAddress {
  // "unix:/PATH" for a Unix socket; otherwise the host as written (an IPv6
  // address with its brackets).
  std::string host;
  // Meaningless for a Unix socket.
  int port = 0;

  bool is_unix() const;
  // "HOST:PORT" with `bound_port`, or the Unix socket's address.
  std::string WithPort(int bound_port) const;
};

// INVALID_ARGUMENT saying what is wrong with `address` and what is expected.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view address);

}  // namespace lapse

#endif  // LAPSE_SERVER_LISTEN_ADDRESS_H_

#include "server/listen_address.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lapse {
namespace {

constexpr absl::string_view kUnixPrefix = "unix:";
constexpr absl::string_view kExpected = "; expected HOST:PORT, [IPV6]:PORT or unix:/PATH";

absl::Status Invalid(absl::string_view address, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("\"", address, "\": ", what, kExpected));
}

// A DNS name or an IPv4 address: letters, digits, '-' and '.'.
bool IsHostName(absl::string_view host) {
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

bool ListenAddress::is_unix() const { return absl::StartsWith(host, kUnixPrefix); }

std::string ListenAddress::WithPort(int bound_port) const {
  if (is_unix()) return host;
  return absl::StrCat(host, ":", bound_port);
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view address) {
  ListenAddress parsed;
  if (absl::StartsWith(address, kUnixPrefix)) {
    const absl::string_view path = address.substr(kUnixPrefix.size());
    if (!absl::StartsWith(path, "/"))
      return Invalid(address, "a Unix socket needs an absolute path");
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return Invalid(address, absl::StrCat("a Unix socket path is at most ",
                                           sizeof(sockaddr_un::sun_path) - 1, " bytes"));
    }
    parsed.host = std::string(address);
    return parsed;
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return Invalid(address, "no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return Invalid(address, "no host (0.0.0.0 or [::] listens everywhere)");
  if (absl::StartsWith(host, "[")) {
    if (!absl::EndsWith(host, "]")) return Invalid(address, "unbalanced brackets");
    const std::string inside(host.substr(1, host.size() - 2));
    in6_addr ignored;
    if (inet_pton(AF_INET6, inside.c_str(), &ignored) != 1) {
      return Invalid(address, absl::StrCat("\"", inside, "\" is not an IPv6 address"));
    }
  } else if (absl::StrContains(host, ':')) {
    return Invalid(address, "an IPv6 address goes in brackets, e.g. [::1]:50051");
  } else if (!IsHostName(host)) {
    return Invalid(address, absl::StrCat("\"", host, "\" is not a host name or IPv4 address"));
  }
  int number = -1;
  const bool digits =
      !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits || !absl::SimpleAtoi(port, &number) || number > 65535) {
    return Invalid(address, absl::StrCat("port \"", port, "\" is not a number in [0, 65535]"));
  }
  parsed.host = std::string(host);
  parsed.port = number;
  return parsed;
}

}  // namespace lapse

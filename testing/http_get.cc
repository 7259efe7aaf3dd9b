#include "testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// A socket closed when it goes out of scope.
class Socket {
 public:
  Socket() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  Socket s;
  if (s.fd() < 0) return Errno("socket");
  timeval patience{};
  patience.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(kPatience));
  setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
  setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof(patience));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Errno(absl::StrCat("connect to 127.0.0.1:", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(s.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return Errno("send");
    sent += static_cast<size_t>(n);
  }
  // HTTP/1.0: the server closes the connection after the response.
  std::string response;
  char buffer[16384];
  while (true) {
    const ssize_t n = recv(s.fd(), buffer, sizeof(buffer), 0);
    if (n < 0) return Errno("recv");
    if (n == 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  // "HTTP/1.x NNN reason\r\n...headers...\r\n\r\nbody"
  const size_t body = response.find("\r\n\r\n");
  HttpResponse parsed;
  if (!absl::StartsWith(response, "HTTP/1.") || response.size() < 12 || body == std::string::npos ||
      !absl::SimpleAtoi(response.substr(9, 3), &parsed.status)) {
    return absl::DataLossError(absl::StrCat("not an HTTP response: ", response.substr(0, 200)));
  }
  parsed.body = response.substr(body + 4);
  return parsed;
}

absl::StatusOr<MetricSamples> ScrapeMetrics(int port) {
  absl::StatusOr<HttpResponse> response = HttpGet(port, "/metrics");
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return absl::InternalError(absl::StrCat("GET /metrics answered ", response->status));
  }
  MetricSamples samples;
  for (absl::string_view line : absl::StrSplit(response->body, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      return absl::InternalError(absl::StrCat("not a sample: ", line));
    }
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

}  // namespace lapse::testing

// HttpGet: one plain HTTP/1.0 GET on loopback, for tests that scrape an HTTP
// endpoint of the server (Prometheus /metrics).
//
//   absl::StatusOr<lapse::testing::HttpResponse> r = HttpGet(port, "/metrics");
//   ASSERT_TRUE(r.ok()) << r.status();
//   EXPECT_EQ(r->status, 200);
//
// Blocking, bounded by kPatience; thread-compatible.
#ifndef LAPSE_TESTING_HTTP_GET_H_
#define LAPSE_TESTING_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace lapse::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GETs `path` from 127.0.0.1:`port`; an error when the connection or the
// response fails, or the response is not HTTP.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path);

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_HTTP_GET_H_

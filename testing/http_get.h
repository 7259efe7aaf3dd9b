// HttpGet: one plain HTTP/1.0 GET on loopback, for tests that scrape an HTTP
// endpoint of the server (Prometheus /metrics); ScrapeMetrics: that GET of
// /metrics, parsed.
//
//   absl::StatusOr<lapse::testing::HttpResponse> r = HttpGet(port, "/metrics");
//   ASSERT_TRUE(r.ok()) << r.status();
//   EXPECT_EQ(r->status, 200);
//
//   absl::StatusOr<MetricSamples> samples = ScrapeMetrics(port);
//   EXPECT_EQ(samples->at("lapse_wal_refusing_writes"), 0);
//
// Blocking, bounded by kPatience; thread-compatible.
#ifndef LAPSE_TESTING_HTTP_GET_H_
#define LAPSE_TESTING_HTTP_GET_H_

#include <map>
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

// Each sample's name with its labels as printed
// (`lapse_rpcs_in_flight{method="..."}`), mapped to its value.
using MetricSamples = std::map<std::string, double>;

// GETs /metrics from 127.0.0.1:`port` and parses the Prometheus text format;
// an error when the GET fails, the status is not 200 or a line does not
// parse.
absl::StatusOr<MetricSamples> ScrapeMetrics(int port);

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_HTTP_GET_H_

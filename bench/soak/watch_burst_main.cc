// lapse-watch-burst: what many watch streams cost lapsed, and whether it gives
// the memory back. Opens --streams streams (with values), expires --events
// members of --value_bytes each in one call so that every stream is sent them,
// waits until every stream has them, closes every stream, and prints lapsed's
// RSS at each stage and --settle later. Not a test: bench/soak/run.sh runs it.
//
//   lapse-watch-burst --addr=127.0.0.1:50051 --pid=$(pidof lapsed) --streams=3000
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load/lapse_load.h"
#include "bench/soak/burst_stream.h"
#include "bench/soak/rss.h"
#include "google/protobuf/util/time_util.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "lapsed's address");
ABSL_FLAG(int, pid, 0, "lapsed's process id, whose RSS is sampled");
ABSL_FLAG(int, streams, 3000, "Watch streams opened at once");
ABSL_FLAG(int, events, 1000, "Members expired in one call (at most --max_members_per_request)");
ABSL_FLAG(int, value_bytes, 256, "Bytes of each member's value");
ABSL_FLAG(int, channels, 8, "Client connections the streams are spread over");
ABSL_FLAG(absl::Duration, settle, absl::Seconds(5), "How long after closing RSS is read again");
ABSL_FLAG(absl::Duration, patience, absl::Minutes(5), "How long each stage may take");

namespace lapse {
namespace soak {
namespace {

constexpr char kCollection[] = "burst";

bool PutAndExpire(load::Stub& stub, int events, size_t value_bytes) {
  v1::PutMembersRequest put;
  put.set_collection(kCollection);
  v1::ExpireMembersRequest expire;
  expire.set_collection(kCollection);
  for (int i = 0; i < events; ++i) {
    v1::MemberWrite* write = put.add_members();
    write->set_key(absl::StrCat("k", i));
    write->set_value(std::string(value_bytes, 'v'));
    expire.add_keys(write->key());
  }
  *expire.mutable_expire_time() =
      google::protobuf::util::TimeUtil::SecondsToTimestamp(absl::ToUnixSeconds(absl::Now()) - 1);
  grpc::ClientContext put_context;
  v1::PutMembersResponse put_response;
  grpc::Status status = stub.PutMembers(&put_context, put, &put_response);
  if (status.ok()) {
    grpc::ClientContext expire_context;
    v1::ExpireMembersResponse expire_response;
    status = stub.ExpireMembers(&expire_context, expire, &expire_response);
  }
  if (!status.ok()) std::fprintf(stderr, "lapse-watch-burst: %s\n", status.error_message().c_str());
  return status.ok();
}

int Run() {
  const int pid = absl::GetFlag(FLAGS_pid);
  const auto rss = [pid] {
    const std::optional<int64_t> bytes = ResidentBytes(pid);
    return bytes.has_value() ? static_cast<double>(*bytes) / (1 << 20) : -1.0;
  };
  if (pid <= 0 || rss() < 0) {
    std::fprintf(stderr, "lapse-watch-burst: --pid=%d: no such process to sample\n", pid);
    return 2;
  }
  const size_t n = static_cast<size_t>(absl::GetFlag(FLAGS_streams));
  const int events = absl::GetFlag(FLAGS_events);
  const absl::Duration patience = absl::GetFlag(FLAGS_patience);
  std::vector<std::unique_ptr<load::Stub>> stubs =
      load::MakeStubs(absl::GetFlag(FLAGS_addr), absl::GetFlag(FLAGS_channels));
  const double before = rss();

  BurstTally tally;
  std::vector<std::unique_ptr<BurstStream>> streams;
  v1::WatchExpirationsRequest request;
  request.set_include_values(true);
  for (size_t i = 0; i < n; ++i) {
    streams.push_back(std::make_unique<BurstStream>(stubs[i % stubs.size()].get(), request,
                                                    static_cast<size_t>(events), &tally));
  }
  if (!tally.WaitFor(BurstTally::kReady, n, patience)) {
    std::fprintf(stderr, "lapse-watch-burst: only %zu of %zu streams opened (%zu ended)\n",
                 tally.count(BurstTally::kReady), n, tally.count(BurstTally::kDone));
    return 1;
  }
  const double open = rss();
  const absl::Time sent = absl::Now();
  if (!PutAndExpire(*stubs[0], events, static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes)))) {
    return 1;
  }
  if (!tally.WaitFor(BurstTally::kFilled, n, patience)) {
    std::fprintf(stderr, "lapse-watch-burst: only %zu of %zu streams got their events\n",
                 tally.count(BurstTally::kFilled), n);
    return 1;
  }
  const absl::Duration delivery = absl::Now() - sent;
  const double filled = rss();
  for (auto& stream : streams) stream->Close();
  if (!tally.WaitFor(BurstTally::kDone, n, patience)) {
    std::fprintf(stderr, "lapse-watch-burst: only %zu of %zu streams ended\n",
                 tally.count(BurstTally::kDone), n);
    return 1;
  }
  const double closed = rss();
  absl::SleepFor(absl::GetFlag(FLAGS_settle));
  const double settled = rss();
  std::printf(
      "lapse-watch-burst: %zu streams, %d events of %d-byte values each, delivered to all in %s\n",
      n, events, absl::GetFlag(FLAGS_value_bytes), absl::FormatDuration(delivery).c_str());
  std::printf(
      "RSS MiB: before %.1f, streams open %.1f, events delivered %.1f, closed %.1f, "
      "%s later %.1f\n",
      before, open, filled, closed, absl::FormatDuration(absl::GetFlag(FLAGS_settle)).c_str(),
      settled);
  std::printf(
      "RESULT watch_burst streams=%zu rss_before_mib=%.1f rss_open_mib=%.1f "
      "rss_delivered_mib=%.1f rss_closed_mib=%.1f rss_settled_mib=%.1f\n",
      n, before, open, filled, closed, settled);
  return 0;
}

}  // namespace
}  // namespace soak
}  // namespace lapse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "lapse-watch-burst: many watch streams, one big batch each, then closed; lapsed's RSS");
  absl::ParseCommandLine(argc, argv);
  return lapse::soak::Run();
}

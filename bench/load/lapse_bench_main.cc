// lapse-bench: load generator for a running lapsed.
//
//   lapse-bench put --addr=127.0.0.1:50051 --concurrency=16 --batch=1000 --members=1000000
//   lapse-bench expiry-latency --members=1000000 --spread=20s
//   lapse-bench expiry-latency --members=100000 --reconnect-at=3s --reconnect-pause=1s
//   lapse-bench drain --members=1000000
//   lapse-bench mixed --rate=5000 --duration=10s --watchers=4
//   lapse-bench group --members=20000 --spread=0s --consumers=3 --max-in-flight=100
//   lapse-bench group --members=5000 --spread=0s --consumers=3 --kill-consumer
//   lapse-bench put --addr=127.0.0.1:50051,127.0.0.1:50052 --batch=100   # two replicas
//   lapse-bench put --addr=lapse:50051 --tls_ca=ca.crt --tls_cert=me.crt --tls_key=me.key
//
// Flags may be spelled with dashes or underscores. Prints a table per
// scenario and one "RESULT ..." line (for bench/compare/run.sh). Exits 0 when
// the scenario saw no error and lost no event, 1 when it did, 2 on bad flags.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/common/args.h"
#include "bench/common/load_flags.h"
#include "bench/load/lapse_scenarios.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051",
          "lapsed's address, or several replicas' comma-separated: RPCs go round-robin over "
          "them (at least one channel each), watchers to the first");
ABSL_FLAG(std::string, tls_ca, "", "TLS: PEM CA certificates that verify lapsed");
ABSL_FLAG(std::string, tls_cert, "", "mTLS: this client's PEM certificate (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "mTLS: its PEM private key");
ABSL_FLAG(std::string, tls_server_name, "",
          "TLS: the name lapsed's certificate carries, if not --addr's host");
ABSL_FLAG(bool, tls, false, "TLS, verifying lapsed against the system's CAs (implied by --tls_*)");
ABSL_FLAG(std::string, peer, "lapse", "Name on the RESULT line (e.g. lapse-durable)");
ABSL_FLAG(int32_t, channels, 1, "gRPC channels (HTTP/2 connections) to spread RPCs over");
ABSL_FLAG(int32_t, concurrency, 16, "RPCs in flight");
ABSL_FLAG(int32_t, http2_lookahead_bytes, 0,
          "Per-stream HTTP/2 receive window the client grants; 0: gRPC's "
          "default (64 KiB, grown by BDP probing)");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "put: write for this long instead of --members; mixed: run length "
          "(default 10s)");
ABSL_FLAG(absl::Duration, ttl, absl::ZeroDuration(), "TTL of written members; 0: put 1h, mixed 2s");
ABSL_FLAG(bool, include_values, true, "Watchers ask for member values in events");
ABSL_FLAG(double, rate, 2000, "mixed: operations per second");
ABSL_FLAG(int32_t, watchers, 2, "mixed: watch streams");
ABSL_FLAG(std::string, mix, "put=40,get=30,expire=15,remove=15",
          "mixed: relative weights of the operations");
ABSL_FLAG(std::string, prefix, "",
          "Collection name prefix of this run (default lb<pid>.<scenario>.)");
ABSL_FLAG(absl::Duration, rpc_timeout, absl::Seconds(30), "Deadline of each RPC");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token for a lapsed with --auth_file (the run needs read, "
          "write and watch on --prefix)");
ABSL_FLAG(bool, keep_going, false,
          "put: go on writing after a failed RPC, counting the errors (the run still exits 1), "
          "to measure the stall while a fault is injected; without it the first error stops "
          "the load");
ABSL_FLAG(bool, client_library, false,
          "put: call PutMembersAsync of the C++ client library, --concurrency calls in "
          "flight on its write stream, each call's callback making the next, instead of "
          "the stubs");
ABSL_FLAG(bool, per_member_ttl, false,
          "put: send the TTL in every member and take a result per member (the API before "
          "PutMembersRequest.default_ttl and omit_created_results), to compare");

namespace {

constexpr char kUsage[] =
    "lapse-bench SCENARIO [flags]: load generator for lapsed.\n"
    "SCENARIO is put, expiry-latency, drain, mixed or group; see --helpfull.";

bool Fail(const std::string& message) {
  std::fprintf(stderr, "lapse-bench: %s\n", message.c_str());
  return false;
}

bool ValidOptions(const std::string& scenario, lapse::load::ScenarioOptions* o) {
  if (absl::Status s = lapse::load::CheckLoadFlags(); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (absl::GetFlag(FLAGS_concurrency) < 1) return Fail("--concurrency must be positive");
  if (absl::GetFlag(FLAGS_channels) < 1) return Fail("--channels must be positive");
  if (absl::GetFlag(FLAGS_members) < 0) return Fail("--members must not be negative");
  if (absl::GetFlag(FLAGS_rate) <= 0) return Fail("--rate must be positive");
  if (absl::GetFlag(FLAGS_watchers) < 0) return Fail("--watchers must not be negative");

  o->peer = absl::GetFlag(FLAGS_peer);
  o->addr = absl::GetFlag(FLAGS_addr);
  if (o->addr.find(',') != std::string::npos && absl::GetFlag(FLAGS_client_library)) {
    return Fail("--client_library takes one --addr");
  }
  o->channels = absl::GetFlag(FLAGS_channels);
  o->lookahead_bytes = absl::GetFlag(FLAGS_http2_lookahead_bytes);
  if (absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() ||
      !absl::GetFlag(FLAGS_tls_cert).empty() || !absl::GetFlag(FLAGS_tls_key).empty() ||
      !absl::GetFlag(FLAGS_tls_server_name).empty()) {
    absl::StatusOr<lapse::load::ChannelSecurity> security = lapse::load::ChannelSecurityFor(
        absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
        absl::GetFlag(FLAGS_tls_server_name));
    if (!security.ok()) return Fail(std::string(security.status().message()));
    o->security = *std::move(security);
  }
  if (const std::string path = absl::GetFlag(FLAGS_token_file); !path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Fail(absl::StrCat("--token_file=", path, ": cannot read it"));
    std::ostringstream token;
    token << in.rdbuf();
    o->security.bearer_token = std::string(absl::StripAsciiWhitespace(token.str()));
    if (o->security.bearer_token.empty())
      return Fail(absl::StrCat("--token_file=", path, ": empty"));
  }
  o->shape.prefix = absl::GetFlag(FLAGS_prefix);
  if (o->shape.prefix.empty()) o->shape.prefix = absl::StrCat("lb", getpid(), ".", scenario, ".");
  o->shape.collections = static_cast<uint64_t>(absl::GetFlag(FLAGS_collections));
  o->shape.batch = static_cast<size_t>(absl::GetFlag(FLAGS_batch));
  o->shape.key_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_key_bytes));
  o->shape.value_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes));
  o->shape.concurrency = absl::GetFlag(FLAGS_concurrency);
  o->shape.rpc_timeout = absl::GetFlag(FLAGS_rpc_timeout);
  o->shape.per_member_ttl = absl::GetFlag(FLAGS_per_member_ttl);
  o->duration = absl::GetFlag(FLAGS_duration);
  o->members = lapse::load::MembersFor(
      scenario, static_cast<uint64_t>(absl::GetFlag(FLAGS_members)), o->duration);
  o->ttl = absl::GetFlag(FLAGS_ttl);
  o->client_library = absl::GetFlag(FLAGS_client_library);
  o->keep_going = absl::GetFlag(FLAGS_keep_going);
  o->timing = lapse::load::ExpiryTimingFromFlags();
  o->include_values = absl::GetFlag(FLAGS_include_values);
  o->rate = absl::GetFlag(FLAGS_rate);
  o->watchers = absl::GetFlag(FLAGS_watchers);
  absl::StatusOr<lapse::load::OpMix> mix = lapse::load::ParseOpMix(absl::GetFlag(FLAGS_mix));
  if (!mix.ok()) return Fail(std::string(mix.status().message()));
  o->mix = *mix;
  absl::StatusOr<lapse::load::GroupShape> group = lapse::load::GroupShapeFromFlags();
  if (!group.ok()) return Fail(std::string(group.status().message()));
  o->group = *group;

  if (scenario == "put") {
    if (o->ttl == absl::ZeroDuration()) o->ttl = absl::Hours(1);
  } else if (scenario == "mixed") {
    if (o->duration == absl::ZeroDuration()) o->duration = absl::Seconds(10);
    if (o->ttl == absl::ZeroDuration()) o->ttl = absl::Seconds(2);
  } else if (scenario != "expiry-latency" && scenario != "drain" && scenario != "group") {
    return Fail(absl::StrCat("unknown scenario \"", scenario,
                             "\": expected put, expiry-latency, drain, mixed or group"));
  }
  if (o->ttl < absl::ZeroDuration()) return Fail("--ttl must be positive");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, so every absl::Mutex (gRPC's locks;
  // lapse's own are lapse::Mutex) would keep a lock-order graph for deadlock
  // detection, 2-3 % of the CPU (docs/benchmarks.md, perfsingle4).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Line-buffered even into a pipe, so tables and errors interleave in order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> storage;
  std::vector<char*> args = lapse::load::DashesToUnderscores(argc, argv, &storage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, args.data());
  if (positional.size() != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string scenario = positional[1];
  lapse::load::ScenarioOptions options;
  if (!ValidOptions(scenario, &options)) return 2;

  bool ok = false;
  if (scenario == "put") {
    ok = lapse::load::RunPut(options);
  } else if (scenario == "expiry-latency") {
    ok = lapse::load::RunExpiryLatency(options);
  } else if (scenario == "drain") {
    ok = lapse::load::RunDrain(options);
  } else if (scenario == "group") {
    ok = lapse::load::RunGroup(options);
  } else {
    ok = lapse::load::RunMixed(options);
  }
  if (!ok) std::fprintf(stderr, "lapse-bench: %s saw errors or lost events\n", scenario.c_str());
  return ok ? 0 : 1;
}

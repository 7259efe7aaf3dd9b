// lapse-redis-bench: lapse-bench's put, expiry-latency and drain scenarios
// against the Redis recipes users would pick instead of lapse, with the same
// members (bench/common/members.h), the same batch (one pipelined batch per
// lapse RPC), the same concurrency (batches in flight) and the same output
// (tables and a RESULT line that bench/compare/run.sh collects).
//
//   lapse-redis-bench put --port=6390 --mode=classic --batch=1000 --members=1000000
//   lapse-redis-bench expiry-latency --port=6390 --poll-interval=10ms --members=100000
//   lapse-redis-bench drain --port=6390 --mode=hfe --members=100000
//   lapse-redis-bench group --port=6390 --poll-interval=10ms --spread=0s --consumers=3
//
// --mode=classic is the recipe from the field: each collection's values in a
// hash (HSET), every deadline in one sorted set (ZADD, member
// "<collection>\t<key>"), and a poller that every --poll-interval runs a Lua
// script removing what is due (ZRANGEBYSCORE -inf now LIMIT, HMGET + HDEL per
// collection, ZREMRANGEBYRANK) and PUBLISHes it (collection, key, value and
// deadline) to a channel that the watcher SUBSCRIBEs to. The script takes at
// most --poll-limit members per call and the poller calls it again at once
// while a call comes back full, so a backlog drains without waiting a tick.
//
// --mode=hfe is native hash-field expiration (Redis >= 7.4, Valkey >= 9): HSET
// then HPEXPIREAT ... FIELDS, and the watcher SUBSCRIBEs to the `hexpired`
// keyspace event. That event names only the hash (the collection), not the
// field and not the value; the watcher credits each one with every member of
// that collection whose deadline has passed and that no earlier event
// covered, which is the most a client can infer without reading the hash
// again (so it flatters Redis's latency).
//
// The group scenario is lapse-bench's, on Redis Streams consumer groups: the
// classic poller XADDs each due member to a stream (--publish is ignored);
// --consumers consumers XREADGROUP (COUNT --max-in-flight) and XACK every
// entry, each running XAUTOCLAIM (min-idle --visibility-timeout) every
// --claim-interval; every member must be acknowledged exactly once.
//
// Exits 0 when the scenario saw no error and lost no notification, 1
// otherwise, 2 on bad flags.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/common/args.h"
#include "bench/common/load_flags.h"
#include "bench/compare/redis_options.h"
#include "bench/compare/redis_scenarios.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Redis host");
ABSL_FLAG(int32_t, port, 6379, "Redis port");
ABSL_FLAG(std::string, peer, "", "Name on the RESULT line (default redis-<mode>)");
ABSL_FLAG(std::string, mode, "classic",
          "classic (hash + sorted set + poller + PUBLISH) or hfe (native "
          "hash-field expiration + hexpired keyspace events)");
ABSL_FLAG(int32_t, connections, 1, "Connections the writes are spread over");
ABSL_FLAG(int32_t, concurrency, 16, "Pipelined batches in flight (over all connections)");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "put: write for this long instead of --members");
ABSL_FLAG(absl::Duration, ttl, absl::Hours(1), "put: TTL of written members");
ABSL_FLAG(absl::Duration, poll_interval, absl::Milliseconds(100),
          "classic: how often the poller looks for due members");
ABSL_FLAG(int32_t, poll_limit, 1000, "classic: members removed per script call");
ABSL_FLAG(std::string, publish, "batch",
          "classic: PUBLISH one message per script call (batch) or per member");
ABSL_FLAG(absl::Duration, claim_interval, absl::Milliseconds(100),
          "group: how often each consumer runs XAUTOCLAIM over the pending entries");
ABSL_FLAG(std::string, prefix, "", "Key prefix of this run (default rb<pid>.<scenario>.)");

namespace lapse {
namespace compare {
namespace {

bool Fail(const std::string& message) {
  std::fprintf(stderr, "lapse-redis-bench: %s\n", message.c_str());
  return false;
}

bool OptionsFromFlags(const std::string& scenario, Options* o) {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "classic") {
    o->mode = Mode::kClassic;
  } else if (mode == "hfe") {
    o->mode = Mode::kHfe;
  } else {
    return Fail("--mode must be classic or hfe");
  }
  const std::string publish = absl::GetFlag(FLAGS_publish);
  if (publish != "batch" && publish != "member") return Fail("--publish must be batch or member");
  if (absl::Status s = load::CheckLoadFlags(); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (absl::GetFlag(FLAGS_concurrency) < 1 || absl::GetFlag(FLAGS_connections) < 1) {
    return Fail("--concurrency and --connections must be positive");
  }
  if (absl::GetFlag(FLAGS_poll_limit) < 1) return Fail("--poll_limit must be positive");
  if (absl::GetFlag(FLAGS_poll_interval) <= absl::ZeroDuration()) {
    return Fail("--poll_interval must be positive");
  }
  o->host = absl::GetFlag(FLAGS_host);
  o->port = absl::GetFlag(FLAGS_port);
  o->peer = absl::GetFlag(FLAGS_peer);
  if (o->peer.empty()) o->peer = absl::StrCat("redis-", mode);
  o->connections = absl::GetFlag(FLAGS_connections);
  o->concurrency = absl::GetFlag(FLAGS_concurrency);
  o->batch = static_cast<size_t>(absl::GetFlag(FLAGS_batch));
  o->key_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_key_bytes));
  o->value_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes));
  o->collections = static_cast<uint64_t>(absl::GetFlag(FLAGS_collections));
  o->duration = absl::GetFlag(FLAGS_duration);
  o->members = load::MembersFor(
      scenario, static_cast<uint64_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_members))),
      o->duration);
  o->ttl = absl::GetFlag(FLAGS_ttl);
  o->timing = load::ExpiryTimingFromFlags();
  o->poll_interval = absl::GetFlag(FLAGS_poll_interval);
  o->poll_limit = absl::GetFlag(FLAGS_poll_limit);
  o->publish = publish == "member" ? Publish::kMember : Publish::kBatch;
  if (scenario == "group") o->publish = Publish::kStream;
  absl::StatusOr<load::GroupShape> group = load::GroupShapeFromFlags();
  if (!group.ok()) return Fail(std::string(group.status().message()));
  o->group = *group;
  o->claim_interval = absl::GetFlag(FLAGS_claim_interval);
  if (o->claim_interval <= absl::ZeroDuration()) return Fail("--claim_interval must be positive");
  o->prefix = absl::GetFlag(FLAGS_prefix);
  if (o->prefix.empty()) o->prefix = absl::StrCat("rb", getpid(), ".", scenario, ".");
  o->deadlines_key = o->prefix + "deadlines";
  o->channel = o->prefix + "expired";
  if (scenario != "put" && scenario != "expiry-latency" && scenario != "drain" &&
      scenario != "group") {
    return Fail(absl::StrCat("unknown scenario \"", scenario,
                             "\": expected put, expiry-latency, drain or group"));
  }
  if (scenario == "group" && o->mode != Mode::kClassic) {
    return Fail("group runs on the classic recipe's poller: --mode=classic");
  }
  return true;
}

}  // namespace
}  // namespace compare
}  // namespace lapse

int main(int argc, char** argv) {
  // Line-buffered even into a pipe, so tables and errors interleave in order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(
      "lapse-redis-bench SCENARIO [flags]: put, expiry-latency, drain or group against "
      "Redis (the classic recipe, native hash-field expiration, or Streams consumer groups)");
  std::vector<std::string> storage;
  std::vector<char*> args = lapse::load::DashesToUnderscores(argc, argv, &storage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, args.data());
  if (positional.size() != 2) {
    std::fprintf(stderr, "usage: lapse-redis-bench put|expiry-latency|drain|group [flags]\n");
    return 2;
  }
  const std::string scenario = positional[1];
  lapse::compare::Options options;
  if (!lapse::compare::OptionsFromFlags(scenario, &options)) return 2;
  if (options.mode == lapse::compare::Mode::kHfe) {
    if (absl::Status s = lapse::compare::CheckHfe(options); !s.ok()) {
      std::printf("== %s: not measured: %s\n", options.peer.c_str(),
                  std::string(s.message()).c_str());
      return 3;
    }
  }
  bool ok = false;
  if (scenario == "put") {
    ok = lapse::compare::RunPut(options);
  } else if (scenario == "expiry-latency") {
    ok = lapse::compare::RunExpiryLatency(options);
  } else if (scenario == "group") {
    ok = lapse::compare::RunGroup(options);
  } else {
    ok = lapse::compare::RunDrain(options);
  }
  if (!ok) {
    std::fprintf(stderr, "lapse-redis-bench: %s saw errors or lost notifications\n",
                 scenario.c_str());
  }
  return ok ? 0 : 1;
}

#include "bench/compare/redis_scenarios.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/group_ledger.h"
#include "bench/common/ledger.h"
#include "bench/common/load_plan.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/scenario.h"
#include "bench/common/stats.h"
#include "bench/compare/hfe_attribution.h"
#include "bench/compare/redis_conn.h"
#include "bench/compare/redis_poller.h"
#include "bench/compare/redis_stream_consumer.h"
#include "bench/compare/redis_subscriber.h"
#include "bench/compare/redis_writer.h"

namespace lapse {
namespace compare {
namespace {

using load::ExpiryLedger;
using load::ExpiryTally;
using load::FormatCount;
using load::FormatMs;
using load::FormatSeconds;
using load::LoadOutcome;
using load::LoadPlan;
using load::NowMillis;
using load::Table;

void PrintShape(const char* scenario, const Options& o) {
  std::printf(
      "== %s %s: concurrency %d over %d connection(s), batch %zu, key %zu B, "
      "value %zu B, %llu collections, %s:%d",
      o.peer.c_str(), scenario, o.concurrency, o.connections, o.batch, o.key_bytes, o.value_bytes,
      static_cast<unsigned long long>(o.collections), o.host.c_str(), o.port);
  if (o.mode == Mode::kClassic) {
    std::printf(", poll every %s (%d per call, %s)", absl::FormatDuration(o.poll_interval).c_str(),
                o.poll_limit,
                o.publish == Publish::kMember   ? "publish per member"
                : o.publish == Publish::kStream ? "XADD per member to a stream"
                                                : "publish per call");
  } else {
    std::printf(", native hash-field expiration");
  }
  std::printf("\n");
}

// Loads `n` members with `deadline_ms`, watches, waits; shared by
// expiry-latency (spread deadlines) and drain (one deadline).
struct WatchRun {
  LoadOutcome load;
  uint64_t poll_errors = 0;
  uint64_t poll_calls = 0;
  double poll_busy_ms = 0;
  uint64_t messages = 0;
  uint64_t watch_errors = 0;
  std::string first_error;
  bool loaded = false;
};

WatchRun LoadAndWatch(const Options& o, uint64_t n, int64_t first_deadline_ms,
                      int64_t last_deadline_ms, const std::function<int64_t(uint64_t)>& deadline_ms,
                      ExpiryLedger* ledger, const char* what) {
  WatchRun run;
  std::unique_ptr<HfeAttribution> attribution;
  if (o.mode == Mode::kHfe) attribution = std::make_unique<HfeAttribution>(o, n, deadline_ms);
  Subscriber subscriber(o, ledger, attribution.get());
  if (absl::Status s = subscriber.Start(); !s.ok()) {
    run.first_error = std::string(s.message());
    return run;
  }
  Poller poller(o);
  if (o.mode == Mode::kClassic) {
    if (absl::Status s = poller.Start(); !s.ok()) {
      run.first_error = std::string(s.message());
      return run;
    }
  }
  LoadPlan plan;
  plan.members = n;
  plan.deadline_ms = deadline_ms;
  plan.progress = false;
  run.load = WriteMembers(o, plan);
  if (run.load.errors > 0) {
    run.first_error = run.load.first_error;
    return run;
  }
  run.loaded = true;
  std::printf(
      "  loaded %llu members in %ss (%s/s); first deadline in %lld ms\n",
      static_cast<unsigned long long>(run.load.members), FormatSeconds(run.load.elapsed).c_str(),
      FormatCount(static_cast<double>(run.load.members) / absl::ToDoubleSeconds(run.load.elapsed))
          .c_str(),
      static_cast<long long>(first_deadline_ms - NowMillis()));
  load::AwaitExpiries(*ledger, n,
                      {what, "notifications", first_deadline_ms, last_deadline_ms,
                       o.timing.reconnect_at, o.timing.drain_timeout},
                      [&] {
                        std::printf(
                            "  subscriber disconnects after %llu members, reconnects in %ss\n",
                            static_cast<unsigned long long>(ledger->received()),
                            FormatSeconds(o.timing.reconnect_pause).c_str());
                        subscriber.Stop();
                        absl::SleepFor(o.timing.reconnect_pause);
                        if (absl::Status s = subscriber.Start(); !s.ok()) {
                          run.first_error = std::string(s.message());
                        }
                      });
  poller.Stop();
  subscriber.Stop();
  run.poll_errors = poller.errors();
  run.poll_calls = poller.calls();
  run.poll_busy_ms = poller.busy_ms();
  if (run.first_error.empty()) run.first_error = poller.first_error();
  run.messages = subscriber.messages();
  run.watch_errors = subscriber.errors();
  return run;
}

}  // namespace

bool RunPut(const Options& o) {
  PrintShape("put", o);
  LoadPlan plan;
  plan.members = o.members;
  plan.duration = o.duration;
  plan.ttl = o.ttl;
  return load::ReportPut(o.peer, {"batches/s", "batch latency"}, o.batch, o.concurrency,
                         WriteMembers(o, plan));
}

bool RunExpiryLatency(const Options& o) {
  PrintShape("expiry-latency", o);
  const uint64_t n = o.members;
  ExpiryLedger ledger(n);
  const int64_t start_ms = load::FirstDeadlineMs(o.timing.lead, n);
  const int64_t spread_ms = absl::ToInt64Milliseconds(o.timing.spread);
  const auto deadline = [start_ms, spread_ms](uint64_t i) {
    return load::SpreadDeadlineMs(start_ms, spread_ms, i);
  };
  const WatchRun run =
      LoadAndWatch(o, n, start_ms, start_ms + spread_ms, deadline, &ledger, "expiry-latency");
  if (!run.loaded) {
    std::printf("  failed: %s\n", run.first_error.c_str());
    return false;
  }
  const ExpiryTally tally = load::Tally(ledger, n);
  const uint64_t errors = run.poll_errors + run.watch_errors + ledger.unknown();
  Table table({"expiry-latency", "value"});
  load::AddExpiryLatencyRows(n, run.load, tally, "members", "notified", table);
  table.Add({"notification messages", absl::StrCat(run.messages)});
  if (o.mode == Mode::kClassic) {
    table.Add({"poller script calls", absl::StrCat(run.poll_calls)});
    table.Add({"poller busy (ms)", absl::StrFormat("%.0f", run.poll_busy_ms)});
  }
  table.Add({"errors", absl::StrCat(errors)});
  table.Print();
  if (!run.first_error.empty()) std::printf("  first error: %s\n", run.first_error.c_str());
  load::Result result = load::ExpiryLatencyResult(o.peer, n, o.timing, tally);
  result.Add("errors", errors);
  result.Print();
  return tally.Clean(errors);
}

bool RunDrain(const Options& o) {
  PrintShape("drain", o);
  const uint64_t n = o.members;
  ExpiryLedger ledger(n);
  const int64_t deadline_ms = load::FirstDeadlineMs(o.timing.lead, n);
  const WatchRun run = LoadAndWatch(
      o, n, deadline_ms, deadline_ms, [deadline_ms](uint64_t) { return deadline_ms; }, &ledger,
      "drain");
  if (!run.loaded) {
    std::printf("  failed: %s\n", run.first_error.c_str());
    return false;
  }
  const ExpiryTally tally = load::Tally(ledger, n);
  const load::DrainTimes times = load::DrainTimesFor(ledger, deadline_ms);
  const uint64_t errors = run.poll_errors + run.watch_errors + ledger.unknown();
  Table table({"drain", "value"});
  table.Add({"members sharing the deadline", absl::StrCat(n)});
  table.Add({"first notification after deadline (ms)", FormatMs(times.first_us)});
  table.Add(
      {tally.lost == 0 ? "all notified after deadline (ms)" : "last notified after deadline (ms)",
       FormatMs(times.all_us)});
  table.Add({"members/s notified", FormatCount(times.rate)});
  table.Add({"members notified", absl::StrCat(tally.received)});
  table.Add({"members lost", absl::StrCat(tally.lost)});
  table.Add({"notification messages", absl::StrCat(run.messages)});
  table.Add({"errors", absl::StrCat(errors)});
  table.Print();
  if (!run.first_error.empty()) std::printf("  first error: %s\n", run.first_error.c_str());
  load::Result result = load::DrainResult(o.peer, n, times);
  load::AddTally(tally, result);
  result.Add("errors", errors);
  result.Print();
  return tally.Clean(errors);
}

bool RunGroup(const Options& o) {
  PrintShape("group", o);
  const load::GroupShape& g = o.group;
  std::printf("  group: %d consumer(s), XREADGROUP COUNT %d, XAUTOCLAIM min-idle %s every %s%s\n",
              g.consumers, g.max_in_flight, absl::FormatDuration(g.visibility_timeout).c_str(),
              absl::FormatDuration(o.claim_interval).c_str(),
              g.kill_consumer ? ", consumer 0 dies once it holds max_in_flight entries" : "");
  const std::string group = o.prefix + "group";
  {
    absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o.host, o.port);
    if (!conn.ok()) {
      std::printf("  failed: %s\n", std::string(conn.status().message()).c_str());
      return false;
    }
    ReplyPtr created = (*conn)->Command({"XGROUP", "CREATE", o.channel, group, "$", "MKSTREAM"});
    if (created == nullptr || created->type == REDIS_REPLY_ERROR) {
      std::printf("  XGROUP CREATE failed: %s%s\n", ReplyError(created.get()).c_str(),
                  (*conn)->error().c_str());
      return false;
    }
  }
  load::GroupRun run;
  run.peer = o.peer;
  run.shape = g;
  run.members = o.members;
  run.spread = o.timing.spread;
  run.first_deadline_ms = load::FirstDeadlineMs(o.timing.lead, o.members);
  load::GroupLedger ledger(o.members, g.consumers);
  std::vector<std::unique_ptr<StreamConsumer>> consumers;
  for (int i = 0; i < g.consumers; ++i) {
    consumers.push_back(
        std::make_unique<StreamConsumer>(o, group, i, g.kill_consumer && i == 0, &ledger));
    if (absl::Status s = consumers.back()->Start(); !s.ok()) {
      std::printf("  failed: %s\n", std::string(s.message()).c_str());
      return false;
    }
  }
  Poller poller(o);
  if (absl::Status s = poller.Start(); !s.ok()) {
    std::printf("  failed: %s\n", std::string(s.message()).c_str());
    return false;
  }
  const int64_t first_ms = run.first_deadline_ms;
  const int64_t spread_ms = absl::ToInt64Milliseconds(run.spread);
  LoadPlan plan;
  plan.members = o.members;
  plan.deadline_ms = [first_ms, spread_ms](uint64_t i) {
    return load::SpreadDeadlineMs(first_ms, spread_ms, i);
  };
  plan.progress = false;
  run.load = WriteMembers(o, plan);
  if (run.load.errors > 0) {
    std::printf("  load failed: %s\n", run.load.first_error.c_str());
    return false;
  }
  std::printf("  loaded %llu members in %ss; first deadline in %lld ms\n",
              static_cast<unsigned long long>(run.load.members),
              FormatSeconds(run.load.elapsed).c_str(),
              static_cast<long long>(first_ms - NowMillis()));
  load::AwaitExpiries(ledger.acks(), o.members,
                      {"group", "acks", first_ms, load::GroupWaitUntilMs(run), absl::ZeroDuration(),
                       o.timing.drain_timeout},
                      nullptr);
  poller.Stop();
  for (const std::unique_ptr<StreamConsumer>& c : consumers) c->Stop();
  if (poller.errors() > 0) std::printf("  poller: %s\n", poller.first_error().c_str());
  return load::ReportGroup(run, ledger, poller.errors());
}

// Whether the server has native hash-field expiration.
absl::Status CheckHfe(const Options& o) {
  absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o.host, o.port);
  if (!conn.ok()) return conn.status();
  ReplyPtr info = (*conn)->Command({"COMMAND", "INFO", "HPEXPIREAT"});
  if (info == nullptr || info->type != REDIS_REPLY_ARRAY || info->elements != 1 ||
      info->element[0]->type != REDIS_REPLY_ARRAY) {
    return absl::FailedPreconditionError(
        "the server has no HPEXPIREAT: native hash-field expiration needs Redis >= 7.4 "
        "or Valkey >= 9");
  }
  ReplyPtr config = (*conn)->Command({"CONFIG", "SET", "notify-keyspace-events", "Eh"});
  if (config == nullptr || config->type == REDIS_REPLY_ERROR) {
    return absl::FailedPreconditionError(
        absl::StrCat("CONFIG SET notify-keyspace-events: ", ReplyError(config.get())));
  }
  return absl::OkStatus();
}

}  // namespace compare
}  // namespace lapse

// lapse-bench's group scenario (see lapse_scenarios.h): a consumer group of
// --consumers GroupConsumers over the run's collections, members expiring at
// once or spread, every event acknowledged; with --kill-consumer one of them
// dies holding events.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/group_ledger.h"
#include "bench/common/members.h"
#include "bench/common/scenario.h"
#include "bench/common/stats.h"
#include "bench/load/group_consumer.h"
#include "bench/load/lapse_scenario_parts.h"
#include "bench/load/lapse_scenarios.h"

namespace lapse {
namespace load {
namespace {

// Creates the run's group: the run's collections, new events only, the
// shape's visibility timeout and in-flight bound, and enough deliveries that
// nothing is dead-lettered.
bool CreateGroup(Stub* stub, const ScenarioOptions& o, const std::string& name) {
  v1::CreateConsumerGroupRequest request;
  request.set_name(name);
  request.set_collection_prefix(o.shape.prefix);
  request.set_include_values(o.include_values);
  request.set_start_position(v1::START_POSITION_NEW);
  SetDuration(o.group.visibility_timeout, request.mutable_visibility_timeout());
  request.set_max_deliveries(100);
  request.set_max_unacked_per_consumer(static_cast<uint32_t>(o.group.max_in_flight));
  v1::CreateConsumerGroupResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + o.shape.rpc_timeout));
  const grpc::Status status = stub->CreateConsumerGroup(&context, request, &response);
  if (!status.ok()) {
    std::printf("  cannot create group %s: code %d: %s\n", name.c_str(), status.error_code(),
                status.error_message().c_str());
    return false;
  }
  return true;
}

}  // namespace

bool RunGroup(const ScenarioOptions& o) {
  PrintShape("group", o);
  const GroupShape& g = o.group;
  std::printf("  group: %d consumer(s), max_in_flight %d, visibility timeout %s%s\n", g.consumers,
              g.max_in_flight, absl::FormatDuration(g.visibility_timeout).c_str(),
              g.kill_consumer ? ", consumer 0 dies once it holds max_in_flight events" : "");
  const std::vector<std::unique_ptr<Stub>> stubs =
      MakeStubs(o.addr, o.channels, o.lookahead_bytes, o.security);
  // One connection per consumer, as separate worker processes would have.
  const std::vector<std::unique_ptr<Stub>> consumer_stubs =
      MakeStubs(o.addr, g.consumers, o.lookahead_bytes, o.security);
  const std::string group = absl::StrCat(o.shape.prefix, "group");
  if (!CreateGroup(stubs[0].get(), o, group)) return false;

  GroupRun run;
  run.peer = o.peer;
  run.shape = g;
  run.members = o.members;
  run.spread = o.timing.spread;
  run.first_deadline_ms = FirstDeadlineMs(o.timing.lead, o.members);
  GroupLedger ledger(o.members, g.consumers);
  std::vector<std::unique_ptr<GroupConsumer>> consumers;
  for (int i = 0; i < g.consumers; ++i) {
    GroupConsumer::Options options;
    options.group = group;
    options.name = absl::StrCat("c", i);
    options.index = i;
    options.max_in_flight = static_cast<uint32_t>(g.max_in_flight);
    options.dies = g.kill_consumer && i == 0;
    options.include_values = o.include_values;
    options.value_bytes = o.shape.value_bytes;
    consumers.push_back(std::make_unique<GroupConsumer>(
        consumer_stubs[static_cast<size_t>(i)].get(), options, &ledger));
    consumers.back()->Start();
  }
  const int64_t first_ms = run.first_deadline_ms;
  const int64_t spread_ms = absl::ToInt64Milliseconds(run.spread);
  if (!LoadBeforeDeadline(
          stubs, o, [&](uint64_t i) { return SpreadDeadlineMs(first_ms, spread_ms, i); }, first_ms,
          &run.load)) {
    return false;
  }
  std::printf("  loaded %llu members in %ss; first deadline in %lld ms\n",
              static_cast<unsigned long long>(run.load.members),
              FormatSeconds(run.load.elapsed).c_str(),
              static_cast<long long>(first_ms - NowMillis()));
  AwaitExpiries(ledger.acks(), o.members,
                {"group", "acks", first_ms, GroupWaitUntilMs(run), absl::ZeroDuration(),
                 o.timing.drain_timeout},
                nullptr);
  uint64_t responses = 0;
  for (const std::unique_ptr<GroupConsumer>& c : consumers) {
    c->Stop();
    responses += c->responses();
  }
  std::printf("  %llu Consume responses\n", static_cast<unsigned long long>(responses));
  return ReportGroup(run, ledger, 0);
}

}  // namespace load
}  // namespace lapse

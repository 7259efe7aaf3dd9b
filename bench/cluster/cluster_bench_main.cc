// lapse-cluster-bench: what the masters of a Redis Cluster carry for the
// Redis Cluster store, measured under the store itself (its put script,
// argument building, router and WAIT) with no gRPC and no lapsed in between.
//
//   lapse-cluster-bench --seeds=127.0.0.1:7000 --partition=0 --batch=100 --members=200000
//   lapse-cluster-bench --seeds=127.0.0.1:7000 --batch=1 --in-flight=64 --duration=5s
//
// With --partition=P every batch goes to a collection of partition P, so to
// one master: the per-master throughput of the put script, and the master's
// own CPU time for it (INFO cpu before and after). Without it the
// collections spread over every partition, hence every master. Prints the
// put table, its RESULT line and a "RESULT <peer> cpu ..." line: this tool's
// CPU (the store client's share) and, with --partition, the master's, in
// microseconds per member and per call.
//
// Opens the store without a reaper (members get a TTL of an hour: nothing
// expires during a run). Flags may be spelled with dashes or underscores.
// Exits 0 when every call succeeded, 1 otherwise, 2 on bad flags.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "bench/cluster/store_puts.h"
#include "bench/common/args.h"
#include "bench/common/load_flags.h"
#include "bench/common/report.h"
#include "bench/common/scenario.h"
#include "server/storage/redis/cluster_router.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_cluster_store.h"

ABSL_FLAG(std::string, seeds, "", "Comma-separated host:port of some nodes of the cluster");
ABSL_FLAG(int32_t, partition, -1,
          "Write only collections of this partition (one master); -1: every partition");
ABSL_FLAG(int32_t, partitions, 64, "Partition count if the store is new in this cluster");
ABSL_FLAG(int32_t, wait_replicas, 1, "Replicas WAIT must count before a put is acknowledged");
ABSL_FLAG(int32_t, in_flight, 64, "Store calls in flight");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Write for this long instead of --members");
ABSL_FLAG(std::string, peer, "cluster-store", "Name on the RESULT lines");

namespace {

constexpr char kUsage[] =
    "lapse-cluster-bench --seeds=HOST:PORT[,...] [flags]: puts straight into the Redis "
    "Cluster store; see --helpfull.";

int Fail(const std::string& message) {
  std::fprintf(stderr, "lapse-cluster-bench: %s\n", message.c_str());
  return 2;
}

// This process's user + system CPU time.
absl::Duration OwnCpu() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

// used_cpu_sys + used_cpu_user of the master serving `key`'s slot.
absl::StatusOr<absl::Duration> MasterCpu(lapse::redis::ClusterRouter& router,
                                         const std::string& key) {
  absl::StatusOr<lapse::redis::RedisReply> reply;
  absl::Notification done;
  router.Send(lapse::redis::RedisCall::Command(key, {"INFO", "cpu"}),
              [&](absl::StatusOr<lapse::redis::RedisReply> r) {
                reply = std::move(r);
                done.Notify();
              });
  done.WaitForNotification();
  if (!reply.ok()) return reply.status();
  double seconds = 0;
  for (absl::string_view line : absl::StrSplit(reply->str, absl::ByAnyChar("\r\n"))) {
    for (absl::string_view field : {"used_cpu_sys:", "used_cpu_user:"}) {
      double v = 0;
      if (absl::ConsumePrefix(&line, field) && absl::SimpleAtod(line, &v)) seconds += v;
    }
  }
  return absl::Seconds(seconds);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> storage;
  std::vector<char*> args = lapse::load::DashesToUnderscores(argc, argv, &storage);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (absl::Status s = lapse::load::CheckLoadFlags(); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  const std::vector<std::string> seeds =
      absl::StrSplit(absl::GetFlag(FLAGS_seeds), ',', absl::SkipEmpty());
  if (seeds.empty()) return Fail("--seeds is required");
  const int partition = absl::GetFlag(FLAGS_partition);
  const int in_flight = absl::GetFlag(FLAGS_in_flight);
  if (in_flight < 1 || in_flight > 10000) return Fail("--in_flight must be in [1, 10000]");
  const int64_t members = absl::GetFlag(FLAGS_members);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if (members < 0) return Fail("--members must not be negative");

  lapse::redis::RedisClusterStoreOptions options;
  options.router.seeds = seeds;
  options.partitions = absl::GetFlag(FLAGS_partitions);
  options.wait_replicas = absl::GetFlag(FLAGS_wait_replicas);
  options.reap = false;
  absl::StatusOr<std::unique_ptr<lapse::redis::RedisClusterStore>> store =
      lapse::redis::RedisClusterStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "lapse-cluster-bench: %s\n", store.status().ToString().c_str());
    return 1;
  }
  if (partition < -1 || partition >= (*store)->partitions()) {
    return Fail(absl::StrCat("--partition must be -1 or in [0, ", (*store)->partitions(), ")"));
  }

  lapse::load::StorePutShape shape;
  shape.batch = static_cast<size_t>(absl::GetFlag(FLAGS_batch));
  shape.in_flight = in_flight;
  shape.key_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_key_bytes));
  shape.value_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes));
  const std::string prefix = absl::StrCat("cb", getpid(), ".");
  const auto wanted = static_cast<size_t>(absl::GetFlag(FLAGS_collections));
  for (uint64_t i = 0; shape.collections.size() < wanted; ++i) {
    std::string name = absl::StrCat(prefix, "c", i);
    if (partition < 0 || (*store)->PartitionOf(name) == partition) {
      shape.collections.push_back(std::move(name));
    }
  }
  lapse::load::LoadPlan plan;
  plan.members = members == 0 && duration == absl::ZeroDuration() ? 200'000 : members;
  plan.duration = duration;

  std::printf("== %s: store puts, batch %zu, %d in flight, %zu collections in %s, WAIT %d\n",
              absl::GetFlag(FLAGS_peer).c_str(), shape.batch, in_flight, shape.collections.size(),
              partition < 0 ? "every partition" : absl::StrCat("partition ", partition).c_str(),
              options.wait_replicas);
  lapse::redis::RouterOptions router_options;
  router_options.seeds = seeds;
  lapse::redis::ClusterRouter router(router_options);
  const std::string master_key =
      partition < 0 ? "" : lapse::redis::PartitionKeys((*store)->TagOf(partition)).due;
  absl::StatusOr<absl::Duration> master_before = absl::ZeroDuration();
  if (!master_key.empty()) master_before = MasterCpu(router, master_key);
  const absl::Duration own_before = OwnCpu();

  const lapse::load::LoadOutcome out = lapse::load::RunStorePuts(**store, shape, plan);

  const absl::Duration own = OwnCpu() - own_before;
  const bool clean = lapse::load::ReportPut(absl::GetFlag(FLAGS_peer), {"calls/s", "call latency"},
                                            shape.batch, in_flight, out);
  const double n = static_cast<double>(std::max<uint64_t>(out.members, 1));
  const double calls = static_cast<double>(std::max<uint64_t>(out.requests, 1));
  lapse::load::Result cpu(absl::GetFlag(FLAGS_peer), "cpu");
  cpu.Add("client_us_per_member", absl::ToDoubleMicroseconds(own) / n);
  cpu.Add("client_us_per_call", absl::ToDoubleMicroseconds(own) / calls);
  std::printf("  store client CPU: %.2f us per member, %.1f us per call\n",
              absl::ToDoubleMicroseconds(own) / n, absl::ToDoubleMicroseconds(own) / calls);
  if (!master_key.empty()) {
    const absl::StatusOr<absl::Duration> master_after = MasterCpu(router, master_key);
    if (master_before.ok() && master_after.ok()) {
      const double us = absl::ToDoubleMicroseconds(*master_after - *master_before);
      std::printf("  master CPU: %.2f us per member, %.1f us per call (%.0f%% of a core)\n", us / n,
                  us / calls, 100 * us / absl::ToDoubleMicroseconds(out.elapsed));
      cpu.Add("master_us_per_member", us / n);
      cpu.Add("master_us_per_call", us / calls);
    } else {
      std::printf("  master CPU: not read (%s)\n",
                  (master_before.ok() ? master_after : master_before).status().ToString().c_str());
    }
  }
  cpu.Print();
  return clean ? 0 : 1;
}

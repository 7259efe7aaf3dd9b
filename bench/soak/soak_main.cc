// lapse-soak: a long mixed load against a running lapsed, printing the
// server's resident set size as it goes and, at the end, whether it stayed
// flat. Not a test: bench/soak/run.sh starts lapsed and runs it.
//
//   lapse-soak --addr=127.0.0.1:50051 --pid=$(pidof lapsed) --duration=30m
//
// Writers put members with TTLs up to --max_ttl (a few persistent), get and
// remove them; watchers connect, read for a while and disconnect; stalling
// watchers never read. After --warmup, a least-squares line through the RSS
// samples must grow by less than 5% of their mean (at least 16 MiB) over the
// rest of the run: the verdict is "flat", otherwise "growing".
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load/lapse_load.h"
#include "bench/soak/churning_watcher.h"
#include "bench/soak/mixed_writer.h"
#include "bench/soak/rss.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "lapsed's address");
ABSL_FLAG(int, pid, 0, "lapsed's process id, whose RSS is sampled");
ABSL_FLAG(absl::Duration, duration, absl::Minutes(30), "How long the load runs");
ABSL_FLAG(absl::Duration, warmup, absl::Minutes(5),
          "Samples before this (at most a fifth of --duration) do not count for the verdict");
ABSL_FLAG(absl::Duration, report_every, absl::Seconds(10), "How often RSS is sampled and printed");
ABSL_FLAG(int, writers, 4, "Writer threads");
ABSL_FLAG(double, ops_per_second, 2000, "Operations per second, all writers together");
ABSL_FLAG(int, collections, 1000, "Collections written and watched");
ABSL_FLAG(int, value_bytes, 100, "Bytes of each member's value");
ABSL_FLAG(absl::Duration, max_ttl, absl::Seconds(10), "Longest TTL a put asks for");
ABSL_FLAG(int, watchers, 20, "Watchers that read, each reconnecting after a random while");
ABSL_FLAG(int, stalled_watchers, 4, "Watchers that never read what they are sent");
ABSL_FLAG(absl::Duration, watcher_life, absl::Seconds(30),
          "Longest a watcher keeps one stream (stalling watchers: twice this)");
ABSL_FLAG(int, channels, 4, "Client connections the load is spread over");

namespace lapse {
namespace soak {
namespace {

double Mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int Run() {
  const int pid = absl::GetFlag(FLAGS_pid);
  const std::optional<int64_t> first_rss = ResidentBytes(pid);
  if (pid <= 0 || !first_rss.has_value()) {
    std::fprintf(stderr, "lapse-soak: --pid=%d: no such process to sample\n", pid);
    return 2;
  }
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Duration warmup = std::min(absl::GetFlag(FLAGS_warmup), duration / 5);
  std::vector<std::unique_ptr<load::Stub>> stubs =
      load::MakeStubs(absl::GetFlag(FLAGS_addr), absl::GetFlag(FLAGS_channels));
  const auto stub = [&stubs](size_t i) { return stubs[i % stubs.size()].get(); };

  std::vector<std::unique_ptr<MixedWriter>> writers;
  for (int i = 0; i < absl::GetFlag(FLAGS_writers); ++i) {
    MixedWriter::Options o;
    o.collections = absl::GetFlag(FLAGS_collections);
    o.value_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes));
    o.max_ttl = absl::GetFlag(FLAGS_max_ttl);
    o.ops_per_second = absl::GetFlag(FLAGS_ops_per_second) / absl::GetFlag(FLAGS_writers);
    o.seed = static_cast<uint64_t>(i) + 1;
    writers.push_back(std::make_unique<MixedWriter>(stub(static_cast<size_t>(i)), o));
  }
  std::vector<std::unique_ptr<ChurningWatcher>> watchers;
  const int readers = absl::GetFlag(FLAGS_watchers);
  for (int i = 0; i < readers + absl::GetFlag(FLAGS_stalled_watchers); ++i) {
    ChurningWatcher::Options o;
    o.stall = i >= readers;
    o.max_life = absl::GetFlag(FLAGS_watcher_life) * (o.stall ? 2 : 1);
    o.collections = absl::GetFlag(FLAGS_collections);
    o.seed = static_cast<uint64_t>(i) + 1000;
    watchers.push_back(std::make_unique<ChurningWatcher>(stub(static_cast<size_t>(i)), o));
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (auto& w : writers) threads.emplace_back([&w, &stop] { w->Run(stop); });
  for (auto& w : watchers) threads.emplace_back([&w, &stop] { w->Run(stop); });

  std::printf("lapse-soak: %s for %s; RSS of pid %d every %s (at start %.1f MiB)\n",
              absl::GetFlag(FLAGS_addr).c_str(), absl::FormatDuration(duration).c_str(), pid,
              absl::FormatDuration(absl::GetFlag(FLAGS_report_every)).c_str(), Mib(*first_rss));
  std::printf("%9s %10s %10s %10s %12s %10s\n", "elapsed", "rss_MiB", "ops", "op_errors",
              "watch_events", "streams");
  const absl::Time start = absl::Now();
  std::vector<Sample> samples;
  bool server_gone = false;
  for (absl::Time next = start + absl::GetFlag(FLAGS_report_every); next <= start + duration;
       next += absl::GetFlag(FLAGS_report_every)) {
    absl::SleepFor(next - absl::Now());
    const std::optional<int64_t> rss = ResidentBytes(pid);
    if (!rss.has_value()) {
      server_gone = true;
      break;
    }
    uint64_t ops = 0, errors = 0, events = 0, streams = 0;
    for (const auto& w : writers) ops += w->ops(), errors += w->errors();
    for (const auto& w : watchers) events += w->events(), streams += w->streams();
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf("%8.0fs %10.1f %10llu %10llu %12llu %10llu\n", elapsed, Mib(*rss),
                static_cast<unsigned long long>(ops), static_cast<unsigned long long>(errors),
                static_cast<unsigned long long>(events), static_cast<unsigned long long>(streams));
    std::fflush(stdout);
    if (absl::Now() - start >= warmup) samples.push_back({elapsed, Mib(*rss)});
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  if (server_gone) {
    std::printf("RESULT soak verdict=server_gone\n");
    return 1;
  }
  if (samples.size() < 2) {
    std::printf("RESULT soak verdict=too_short (raise --duration or lower --report_every)\n");
    return 1;
  }
  uint64_t refused = 0;
  for (const auto& w : watchers) refused += w->refused();
  const Trend trend = FitTrend(samples);
  const double hours = (samples.back().seconds - samples.front().seconds) / 3600;
  const double growth = trend.mib_per_hour * hours;
  const double allowed = std::max(0.05 * trend.mean_mib, 16.0);
  const bool flat = growth < allowed;
  std::printf(
      "after %s of warm-up: RSS min %.1f MiB, max %.1f MiB, mean %.1f MiB; trend %+.1f MiB/h, "
      "%+.1f MiB over the run (allowed %.1f); watch streams refused: %llu\n",
      absl::FormatDuration(warmup).c_str(), trend.min_mib, trend.max_mib, trend.mean_mib,
      trend.mib_per_hour, growth, allowed, static_cast<unsigned long long>(refused));
  std::printf(
      "RESULT soak rss_min_mib=%.1f rss_max_mib=%.1f mib_per_hour=%.1f growth_mib=%.1f "
      "verdict=%s\n",
      trend.min_mib, trend.max_mib, trend.mib_per_hour, growth, flat ? "flat" : "growing");
  return flat ? 0 : 1;
}

}  // namespace
}  // namespace soak
}  // namespace lapse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "lapse-soak: a long mixed load against lapsed, sampling its RSS (see bench/soak/run.sh)");
  absl::ParseCommandLine(argc, argv);
  return lapse::soak::Run();
}

// durability_bench: what durability costs, in one run on one machine.
//
//   durability_bench                       # full size: 10M members to recover
//   durability_bench --members=200000 --seconds=0.5
//
// 1. Acknowledged puts/s with --writers threads, each putting one member and
//    waiting until its put is durable before the next (as an RPC would), for
//    a memory-only engine and for fsync never / everysec / always.
// 2. Recovery time for --members members (16-byte keys and values, deadlines
//    over an hour): from the write-ahead log alone, then from a snapshot.
// 3. The longest a put waited while that snapshot was taken, and the longest
//    shard lock hold of the snapshot's scan.
// 4. Disk bytes per member: log and snapshot.
// With everysec it also reports the longest time written data waited for its
// fsync: what a machine failure could have lost.
// The data directory is under --dir (default: a new directory in /tmp) and is
// removed at the end.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/common/workload.h"
#include "server/base/mutex.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"
#include "server/storage/durable_store.h"
#include "server/storage/files.h"

ABSL_FLAG(uint64_t, members, 10'000'000, "Members to recover.");
ABSL_FLAG(int, writers, 16, "Concurrent writers in the throughput test.");
ABSL_FLAG(double, seconds, 2.0, "Seconds per throughput measurement.");
ABSL_FLAG(std::string, dir, "", "Where to put data directories (default /tmp).");
ABSL_FLAG(absl::Duration, group_wait, absl::ZeroDuration(),
          "With fsync always: the log's group wait (lapsed's --wal_group_wait).");

namespace lapse {
namespace {

using bench::kNameBytes;

std::string NewDir(absl::string_view name) {
  std::string base = absl::GetFlag(FLAGS_dir).empty() ? "/tmp" : absl::GetFlag(FLAGS_dir);
  std::string dir = absl::StrCat(base, "/lapse-", name, "-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return dir;
}

void RemoveDir(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  if (names.ok()) {
    for (const std::string& n : *names) files::Remove(absl::StrCat(dir, "/", n)).IgnoreError();
  }
  ::rmdir(dir.c_str());
}

uint64_t DirBytes(const std::string& dir, absl::string_view prefix) {
  uint64_t total = 0;
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  if (!names.ok()) return 0;
  for (const std::string& n : *names) {
    if (!absl::StartsWith(n, prefix)) continue;
    absl::StatusOr<std::string> data = files::ReadAll(absl::StrCat(dir, "/", n));
    if (data.ok()) total += data->size();
  }
  return total;
}

// An engine over a data directory (or memory-only with an empty dir).
struct Store {
  Store(const std::string& dir, FsyncPolicy fsync, Clock* clock) {
    EventFeed::Options log_options;
    log_options.visible_on_append = dir.empty();
    log = std::make_unique<EventFeed>(log_options);
    if (!dir.empty()) {
      DurableStore::Options options;
      options.dir = dir;
      options.fsync = fsync;
      options.group_wait = absl::GetFlag(FLAGS_group_wait);
      options.snapshot_after_bytes = 0;
      options.on_durable = [l = log.get()](uint64_t sequence) { l->MakeVisibleThrough(sequence); };
      absl::StatusOr<std::unique_ptr<DurableStore>> opened = DurableStore::Open(options);
      if (!opened.ok()) {
        std::fprintf(stderr, "%s\n", std::string(opened.status().message()).c_str());
        std::exit(1);
      }
      store = *std::move(opened);
    }
    Engine::Options engine_options;
    engine_options.journal = store.get();
    engine = std::make_unique<Engine>(engine_options, clock, log.get());
    if (store != nullptr) {
      absl::StatusOr<RecoveryStats> r = store->Recover(engine.get(), log.get());
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        std::exit(1);
      }
      recovered = *r;
    }
  }
  ~Store() {
    engine.reset();
    store.reset();
  }
  std::unique_ptr<EventFeed> log;
  std::unique_ptr<DurableStore> store;
  std::unique_ptr<Engine> engine;
  RecoveryStats recovered;
};

// Puts member `i`; `committed` receives the ticket of its batch.
absl::Status PutOne(Engine& engine, uint64_t i, CommitTicket* committed) {
  char key[kNameBytes], value[kNameBytes], collection[kNameBytes];
  MemberWrite w{bench::FormatName('k', i, key), bench::FormatName('v', i, value),
                Expiration::Ttl(bench::TtlFor(i))};
  return engine.Put(bench::FormatName('c', i % 100'000, collection), {w}, {}, committed).status();
}

// Acknowledged (durable) puts per second with `writers` threads.
double Throughput(const char* name, FsyncPolicy fsync, bool durable) {
  FakeClock clock(bench::StartTime());
  const std::string dir = durable ? NewDir(name) : "";
  double rate;
  {
    Store s(dir, fsync, &clock);
    const int writers = absl::GetFlag(FLAGS_writers);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> acked{0};
    std::vector<std::thread> threads;
    const absl::Time start = absl::Now();
    for (int t = 0; t < writers; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t i = t; !stop.load(std::memory_order_relaxed); i += writers) {
          CommitTicket ticket = 0;
          if (!PutOne(*s.engine, i, &ticket).ok()) std::abort();
          if (s.store != nullptr && !s.store->AwaitDurable(ticket).ok()) std::abort();
          acked.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));  // The measured period.
    stop = true;
    for (auto& th : threads) th.join();
    rate = static_cast<double>(acked.load()) / absl::ToDoubleSeconds(absl::Now() - start);
    std::string fsyncs = "-";
    std::string unsynced = "-";
    if (s.store != nullptr) {
      const WalStats stats = s.store->wal_stats();
      fsyncs = absl::StrCat(stats.fsyncs);
      if (fsync == FsyncPolicy::kEverySecond) {
        unsynced = absl::FormatDuration(stats.longest_unsynced);
      }
    }
    std::printf("  %-12s %14.0f %10s %24s\n", name, rate, fsyncs.c_str(), unsynced.c_str());
  }
  if (durable) RemoveDir(dir);
  return rate;
}

void Recovery() {
  const uint64_t members = absl::GetFlag(FLAGS_members);
  FakeClock clock(bench::StartTime());
  const std::string dir = NewDir("recovery");
  {
    Store s(dir, FsyncPolicy::kNever, &clock);
    constexpr int kBatch = 100;
    std::vector<std::string> keys(kBatch), values(kBatch);
    std::vector<MemberWrite> writes(kBatch);
    char collection[kNameBytes];
    for (uint64_t i = 0; i < members; i += kBatch) {
      for (int b = 0; b < kBatch; ++b) {
        keys[b].resize(kNameBytes);
        values[b].resize(kNameBytes);
        bench::FormatName('k', i + b, keys[b].data());
        bench::FormatName('v', i + b, values[b].data());
        writes[b] = {keys[b], values[b], Expiration::Ttl(bench::TtlFor(i + b))};
      }
      const size_t n = std::min<uint64_t>(kBatch, members - i);
      if (!s.engine
               ->Put(bench::FormatName('c', (i / kBatch) % 1'000'000, collection),
                     absl::MakeConstSpan(writes.data(), n), {})
               .ok()) {
        std::abort();
      }
    }
    if (!s.store->AwaitDurable().ok()) std::abort();
  }
  const uint64_t log_bytes = DirBytes(dir, "wal-");
  absl::Duration from_log;
  SnapshotStats snap;
  absl::Duration longest_put;
  {
    Store s(dir, FsyncPolicy::kNever, &clock);
    from_log = s.recovered.took;
    // A writer puts (and waits for durability) while the snapshot is taken.
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      for (uint64_t i = members; !stop.load(); ++i) {
        const absl::Time start = absl::Now();
        CommitTicket ticket = 0;
        if (!PutOne(*s.engine, i, &ticket).ok() || !s.store->AwaitDurable(ticket).ok()) {
          std::abort();
        }
        longest_put = std::max(longest_put, absl::Now() - start);
      }
    });
    absl::StatusOr<SnapshotStats> taken = s.store->TakeSnapshot();
    stop = true;
    writer.join();
    if (!taken.ok()) std::abort();
    snap = *taken;
  }
  absl::Duration from_snapshot;
  uint64_t recovered_members;
  {
    Store s(dir, FsyncPolicy::kNever, &clock);
    from_snapshot = s.recovered.took;
    recovered_members = s.recovered.members;
  }
  const uint64_t snapshot_bytes = DirBytes(dir, "snapshot-");
  RemoveDir(dir);

  auto per = [&](uint64_t bytes) { return static_cast<double>(bytes) / members; };
  std::printf("\nRecovery of %llu members (16-byte keys and values)\n",
              static_cast<unsigned long long>(members));
  std::printf("  %-44s %12s\n", "from the write-ahead log alone",
              absl::FormatDuration(from_log).c_str());
  std::printf("  %-44s %12s  (%llu members)\n", "from a snapshot (+ the log after it)",
              absl::FormatDuration(from_snapshot).c_str(),
              static_cast<unsigned long long>(recovered_members));
  std::printf("\nSnapshot while a writer runs\n");
  std::printf("  %-44s %12s\n", "took", absl::FormatDuration(snap.took).c_str());
  std::printf("  %-44s %12s\n", "longest shard lock hold of the scan",
              absl::FormatDuration(snap.longest_lock_hold).c_str());
  std::printf("  %-44s %12s\n", "longest durable put meanwhile (fsync never)",
              absl::FormatDuration(longest_put).c_str());
  std::printf("\nDisk\n");
  std::printf("  %-44s %12.1f\n", "write-ahead log bytes per member put", per(log_bytes));
  std::printf("  %-44s %12.1f\n", "snapshot bytes per member", per(snapshot_bytes));
}

}  // namespace
}  // namespace lapse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("durability_bench: what lapse's durability costs");
  absl::ParseCommandLine(argc, argv);
  std::printf("Acknowledged puts/s, %d writers, each waiting for durability (engine, no gRPC)\n",
              absl::GetFlag(FLAGS_writers));
  std::printf("  %-12s %14s %10s %24s\n", "store", "puts/s", "fsyncs",
              "longest unsynced (loss window)");
  const double memory = lapse::Throughput("memory-only", lapse::FsyncPolicy::kNever, false);
  const double never = lapse::Throughput("never", lapse::FsyncPolicy::kNever, true);
  const double everysec = lapse::Throughput("everysec", lapse::FsyncPolicy::kEverySecond, true);
  const double always = lapse::Throughput("always", lapse::FsyncPolicy::kAlways, true);
  std::printf("  ratios to memory-only: never %.2f, everysec %.2f, always %.2f\n", never / memory,
              everysec / memory, always / memory);
  lapse::Recovery();
  return 0;
}

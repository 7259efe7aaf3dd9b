// engine_bench: single-threaded throughput of the engine's hot paths: puts
// with a TTL (one member per call and batched), gets, the expiry drain, and a
// watcher reading the event feed. Every figure is per core; every engine runs
// on a FakeClock, so no figure depends on the wall clock.
//
// Each benchmark has a full-size variant (what bench/run.sh runs and README.md
// cites) and a tiny one whose first argument is 1000, which the bench-smoke
// ctest selects so that CI notices when a benchmark breaks:
//
//   engine_bench --benchmark_filter='(members|events):1000/'
//
// Benchmarks that need a freshly filled engine per iteration time only the
// operation under test (UseManualTime), in this thread's CPU time; filling and
// tearing down are not timed.
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bench/common/workload.h"
#include "benchmark/benchmark.h"
#include "server/base/clock.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"
#include "server/engine/expiry_event.h"

namespace lapse {
namespace {

using bench::kNameBytes;

// The names, keys and values of a workload (see bench/workload.h), formatted
// up front and stored contiguously so that generating them is never timed.
class Members {
 public:
  Members(size_t members, size_t collections)
      : members_(members),
        collections_(collections),
        names_(collections * kNameBytes, '\0'),
        keys_(members * kNameBytes, '\0'),
        values_(members * kNameBytes, '\0') {
    for (size_t c = 0; c < collections; ++c) {
      bench::FormatName('c', c, &names_[c * kNameBytes]);
    }
    for (size_t i = 0; i < members; ++i) {
      bench::FormatName('k', i, &keys_[i * kNameBytes]);
      bench::FormatName('v', i, &values_[i * kNameBytes]);
    }
  }

  size_t size() const { return members_; }
  size_t collections() const { return collections_; }
  // Members in collection c.
  size_t CountIn(size_t c) const {
    return members_ / collections_ + (c < members_ % collections_ ? 1 : 0);
  }
  // The index of the j-th member of collection c.
  size_t IndexOf(size_t c, size_t j) const { return c + j * collections_; }

  absl::string_view collection_name(size_t c) const {
    return absl::string_view(&names_[c * kNameBytes], kNameBytes);
  }
  absl::string_view collection(size_t i) const { return collection_name(i % collections_); }
  absl::string_view key(size_t i) const {
    return absl::string_view(&keys_[i * kNameBytes], kNameBytes);
  }
  absl::string_view value(size_t i) const {
    return absl::string_view(&values_[i * kNameBytes], kNameBytes);
  }
  MemberWrite Write(size_t i) const {
    return MemberWrite{key(i), value(i), Expiration::Ttl(bench::TtlFor(i))};
  }

 private:
  const size_t members_;
  const size_t collections_;
  std::string names_;
  std::string keys_;
  std::string values_;
};

EventFeed::Options LogOptions(size_t max_events) {
  EventFeed::Options options;
  options.max_events = std::max<size_t>(max_events, 1);
  // Retention by bytes must never be what drops an event here.
  options.max_bytes = size_t{64} << 30;
  return options;
}

// An engine on a FakeClock, with an EventFeed that keeps `max_events` events.
struct Rig {
  explicit Rig(size_t max_events)
      : clock(bench::StartTime()),
        log(LogOptions(max_events)),
        engine(Engine::Options(), &clock, &log) {}

  FakeClock clock;
  EventFeed log;
  Engine engine;
};

// Puts every member of `members`, one per call, in index order.
absl::Status FillOneByOne(const Members& members, Engine& engine) {
  for (size_t i = 0; i < members.size(); ++i) {
    const MemberWrite write = members.Write(i);
    absl::StatusOr<std::vector<PutResult>> result =
        engine.Put(members.collection(i), absl::MakeConstSpan(&write, 1), {});
    if (!result.ok()) return result.status();
  }
  return absl::OkStatus();
}

// The CPU time this thread spends in a scope, for UseManualTime benchmarks:
// on a machine shared with other work, wall time also counts the time the
// thread waited for a core, CPU time does not.
class Stopwatch {
 public:
  double Seconds() const { return Now() - start_; }

 private:
  static double Now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }

  const double start_ = Now();
};

void Fail(benchmark::State& state, const absl::Status& status) {
  state.SkipWithError(std::string(status.ToString()).c_str());
}

// New members, one per Put call, each with its own TTL.
void BM_PutTtl(benchmark::State& state) {
  const Members members(state.range(0), state.range(1));
  for (auto _ : state) {
    auto rig = std::make_unique<Rig>(0);
    Stopwatch stopwatch;
    for (size_t i = 0; i < members.size(); ++i) {
      const MemberWrite write = members.Write(i);
      absl::StatusOr<std::vector<PutResult>> result =
          rig->engine.Put(members.collection(i), absl::MakeConstSpan(&write, 1), {});
      if (!result.ok()) {
        Fail(state, result.status());
        break;
      }
      benchmark::DoNotOptimize(result);
    }
    state.SetIterationTime(stopwatch.Seconds());
    rig.reset();  // Not timed: outside the stopwatch.
  }
  state.SetItemsProcessed(state.iterations() * members.size());
}
// The sizes BM_PutTtl and BM_ExpireDue run at, timed by their stopwatch.
void MembersInCollections(benchmark::internal::Benchmark* b) {
  b->ArgNames({"members", "collections"})
      ->Args({1'000'000, 100'000})
      ->Args({1'000'000, 1'000})
      ->Args({1000, 100})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_PutTtl)->Apply(MembersInCollections);

// New members, `batch` per Put call (all in one collection, as a client
// batching its writes would send them), each with its own TTL.
void BM_PutTtlBatched(benchmark::State& state) {
  const Members members(state.range(0), state.range(1));
  const size_t batch = state.range(2);
  std::vector<MemberWrite> writes;
  writes.reserve(batch);
  for (auto _ : state) {
    auto rig = std::make_unique<Rig>(0);
    Stopwatch stopwatch;
    for (size_t c = 0; c < members.collections() && !state.error_occurred(); ++c) {
      const size_t count = members.CountIn(c);
      for (size_t j = 0; j < count; j += batch) {
        writes.clear();
        for (size_t k = j; k < std::min(count, j + batch); ++k) {
          writes.push_back(members.Write(members.IndexOf(c, k)));
        }
        absl::StatusOr<std::vector<PutResult>> result =
            rig->engine.Put(members.collection_name(c), writes, {});
        if (!result.ok()) {
          Fail(state, result.status());
          break;
        }
        benchmark::DoNotOptimize(result);
      }
    }
    state.SetIterationTime(stopwatch.Seconds());
    rig.reset();
  }
  state.SetItemsProcessed(state.iterations() * members.size());
}
BENCHMARK(BM_PutTtlBatched)
    ->ArgNames({"members", "collections", "batch"})
    ->Args({1'000'000, 10'000, 100})
    ->Args({1000, 10, 100})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// One existing member per Get call, visited in a scattered order so that
// successive gets do not share cache lines in the engine. The keys are laid
// out in visiting order beforehand: a server's request bytes are in cache,
// and the benchmark's own key table must not add misses the engine would not
// see.
void BM_Get(benchmark::State& state) {
  const Members members(state.range(0), state.range(1));
  Rig rig(0);
  if (absl::Status s = FillOneByOne(members, rig.engine); !s.ok()) {
    Fail(state, s);
    return;
  }
  // A stride coprime with the member count visits every member once per lap.
  size_t stride = 7'919;  // prime
  while (members.size() % stride == 0) stride += 2;
  std::string keys(members.size() * kNameBytes, '\0');
  std::vector<uint32_t> collections(members.size());
  for (size_t n = 0, i = 0; n < members.size(); ++n) {
    members.key(i).copy(&keys[n * kNameBytes], kNameBytes);
    collections[n] = static_cast<uint32_t>(i % members.collections());
    i = (i + stride) % members.size();
  }
  size_t n = 0;
  for (auto _ : state) {
    const absl::string_view key(&keys[n * kNameBytes], kNameBytes);
    absl::StatusOr<std::vector<GetResult>> result =
        rig.engine.Get(members.collection_name(collections[n]), absl::MakeConstSpan(&key, 1));
    if (!result.ok() || !(*result)[0].found) {
      Fail(state, result.ok() ? absl::NotFoundError(key) : result.status());
      break;
    }
    benchmark::DoNotOptimize(result);
    if (++n == members.size()) n = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Get)
    ->ArgNames({"members", "collections"})
    ->Args({1'000'000, 100'000})
    ->Args({1000, 100});

// The expiry drain: every member is past its deadline, and one ExpireDue
// call expires them all and appends their events to the log.
void BM_ExpireDue(benchmark::State& state) {
  const Members members(state.range(0), state.range(1));
  for (auto _ : state) {
    auto rig = std::make_unique<Rig>(members.size());
    if (absl::Status s = FillOneByOne(members, rig->engine); !s.ok()) {
      Fail(state, s);
      break;
    }
    rig->clock.Advance(bench::kTtlSpread + absl::Seconds(1));
    Stopwatch stopwatch;
    const size_t expired = rig->engine.ExpireDue();
    state.SetIterationTime(stopwatch.Seconds());
    if (expired != members.size() || rig->engine.total_members() != 0) {
      Fail(state,
           absl::InternalError(absl::StrCat("ExpireDue expired ", expired, " of ", members.size(),
                                            "; ", rig->engine.total_members(), " left")));
      break;
    }
    rig.reset();
  }
  state.SetItemsProcessed(state.iterations() * members.size());
}
BENCHMARK(BM_ExpireDue)->Apply(MembersInCollections);

// The drain of one collection whose members share one deadline (what
// `lapse-bench drain` makes lapsed do): ExpireDue takes them a batch
// (Engine::Options::expire_batch) at a time, in key order.
void BM_ExpireDueOneDeadline(benchmark::State& state) {
  const Members members(state.range(0), 1);
  std::vector<MemberWrite> writes;
  for (auto _ : state) {
    auto rig = std::make_unique<Rig>(members.size());
    for (size_t i = 0; i < members.size() && !state.error_occurred(); i += 1000) {
      writes.clear();
      for (size_t j = i; j < std::min(members.size(), i + 1000); ++j) {
        writes.push_back({members.key(j), members.value(j), Expiration::Ttl(absl::Seconds(1))});
      }
      if (absl::StatusOr<std::vector<PutResult>> r =
              rig->engine.Put(members.collection(0), writes, {});
          !r.ok()) {
        Fail(state, r.status());
      }
    }
    rig->clock.Advance(absl::Seconds(1));
    Stopwatch stopwatch;
    const size_t expired = rig->engine.ExpireDue();
    state.SetIterationTime(stopwatch.Seconds());
    if (expired != members.size()) {
      Fail(state, absl::InternalError(
                      absl::StrCat("ExpireDue expired ", expired, " of ", members.size())));
      break;
    }
    rig.reset();
  }
  state.SetItemsProcessed(state.iterations() * members.size());
}
BENCHMARK(BM_ExpireDueOneDeadline)
    ->ArgNames({"members"})
    ->Arg(1'000'000)
    ->Arg(1000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

enum WatchFilter : int64_t {
  kMatchAll = 0,
  kMatchAllWithValues = 1,
  kTenCollections = 2,
  // Names starting "c0000000000000": 100 collections.
  kPrefix = 3,
};

EventFilter MakeFilter(WatchFilter kind, const Members& members, benchmark::State& state) {
  EventFilter filter;
  switch (kind) {
    case kMatchAll:
      state.SetLabel("match-all");
      break;
    case kMatchAllWithValues:
      state.SetLabel("match-all+values");
      filter.include_values = true;
      break;
    case kTenCollections:
      state.SetLabel("10-collections");
      for (size_t c = 0; c < std::min<size_t>(10, members.collections()); ++c) {
        filter.collections.emplace(members.collection_name(c));
      }
      break;
    case kPrefix:
      state.SetLabel("prefix-100-collections");
      filter.prefix = std::string(kNameBytes - 2, '0');
      filter.prefix[0] = 'c';
      break;
  }
  return filter;
}

// A watcher catching up on a full log: Read from the oldest event to the
// newest with the server's default ReadLimits. Items are events examined;
// "matched" is how many of them each pass returned.
void BM_WatcherRead(benchmark::State& state) {
  const Members members(state.range(0), state.range(1));
  const EventFilter filter = MakeFilter(static_cast<WatchFilter>(state.range(2)), members, state);
  EventFeed log(LogOptions(members.size()));
  constexpr size_t kAppendBatch = 1024;
  for (size_t begin = 0; begin < members.size(); begin += kAppendBatch) {
    std::vector<ExpiryEvent> events;
    for (size_t i = begin; i < std::min(members.size(), begin + kAppendBatch); ++i) {
      ExpiryEvent& event = events.emplace_back();
      event.collection = std::string(members.collection(i));
      event.key = std::string(members.key(i));
      event.value = std::string(members.value(i));
      event.expire_time = bench::StartTime() + bench::TtlFor(i);
      event.expired_at = event.expire_time;
    }
    log.Append(std::move(events));
  }
  const ReadLimits limits;
  size_t matched = 0;
  for (auto _ : state) {
    matched = 0;
    uint64_t cursor = log.oldest_retained_sequence() - 1;
    const uint64_t last = log.last_sequence();
    while (cursor < last) {
      absl::StatusOr<EventBatch> batch = log.Read(cursor, filter, limits);
      if (!batch.ok()) {
        Fail(state, batch.status());
        break;
      }
      if (batch->examined_sequence <= cursor) {
        Fail(state, absl::InternalError("Read made no progress"));
        break;
      }
      matched += batch->events.size();
      cursor = batch->examined_sequence;
      benchmark::DoNotOptimize(batch);
    }
  }
  state.SetItemsProcessed(state.iterations() * members.size());
  state.counters["matched"] = static_cast<double>(matched);
}
BENCHMARK(BM_WatcherRead)
    ->ArgNames({"events", "collections", "filter"})
    ->ArgsProduct({{1'000'000}, {100'000}, {0, 1, 2, 3}})
    ->ArgsProduct({{1000}, {100}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lapse

BENCHMARK_MAIN();

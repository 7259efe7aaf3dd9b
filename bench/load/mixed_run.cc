// lapse-bench's mixed scenario (RunMixed and ParseOpMix in lapse_scenarios.h).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/common/ledger.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/stats.h"
#include "bench/load/lapse_scenario_parts.h"
#include "bench/load/lapse_scenarios.h"

namespace lapse {
namespace load {

absl::StatusOr<OpMix> ParseOpMix(absl::string_view text) {
  OpMix mix{0, 0, 0, 0};
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    int weight;
    if (!absl::SimpleAtoi(kv.second, &weight) || weight < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--mix: bad weight in \"", part, "\""));
    }
    if (kv.first == "put") {
      mix.put = weight;
    } else if (kv.first == "get") {
      mix.get = weight;
    } else if (kv.first == "expire") {
      mix.expire = weight;
    } else if (kv.first == "remove") {
      mix.remove = weight;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: unknown op \"", kv.first, "\" (put, get, expire, remove)"));
    }
  }
  if (mix.put == 0) return absl::InvalidArgumentError("--mix: put must have a weight");
  return mix;
}

namespace {

// The mixed scenario: an open-loop pacer issues operations at a fixed rate,
// each measured from the instant it was meant to start.
class MixedRun {
 public:
  explicit MixedRun(const ScenarioOptions& o)
      : o_(o), stubs_(MakeStubs(o.addr, o.channels, o.lookahead_bytes, o.bearer_token)) {}

  bool Run() {
    std::vector<std::unique_ptr<ExpiryLedger>> ledgers;
    std::vector<std::unique_ptr<EventWatcher>> watchers;
    for (int w = 0; w < o_.watchers; ++w) {
      ledgers.push_back(std::make_unique<ExpiryLedger>());
      watchers.push_back(
          std::make_unique<EventWatcher>(stubs_[static_cast<size_t>(w) % stubs_.size()].get(),
                                         WatcherOptions(o_), ledgers.back().get()));
      if (!StartWatching(*watchers.back())) return false;
    }
    const absl::Time start = absl::Now();
    {
      Progress progress([this] {
        absl::MutexLock lock(&mu_);
        return absl::StrCat("mixed: ", issued_, " ops issued, ", in_flight_, " in flight");
      });
      Pace();
    }
    const absl::Duration elapsed = absl::Now() - start;
    uint64_t removed = 0;
    std::vector<uint8_t> removed_mask;
    uint64_t put_members;
    {
      absl::MutexLock lock(&mu_);
      removed_mask = removed_;
      for (uint8_t r : removed_) removed += r;
      put_members = put_members_;
    }
    const uint64_t expected = put_members - removed;
    // The last member written expires one TTL after the run (or sooner if an
    // expire op moved it).
    const absl::Time wait_until = absl::Now() + o_.ttl + o_.timing.drain_timeout;
    for (auto& ledger : ledgers) {
      ledger->set_expected(expected);
      ledger->WaitForAll(wait_until);
    }
    for (auto& watcher : watchers) watcher->Stop();

    std::printf(
        "  %llu ops in %ss (%s ops/s asked, %s done); %llu members put, %llu "
        "removed before expiring, %llu expiry events expected per watcher\n",
        static_cast<unsigned long long>(issued_total()), FormatSeconds(elapsed).c_str(),
        FormatCount(o_.rate).c_str(),
        FormatCount(static_cast<double>(issued_total()) / absl::ToDoubleSeconds(elapsed)).c_str(),
        static_cast<unsigned long long>(put_members), static_cast<unsigned long long>(removed),
        static_cast<unsigned long long>(expected));
    Table ops({"op", "count", "errors", "p50 (ms)", "p99 (ms)", "p99.9 (ms)", "max (ms)"});
    Result result(o_.peer, "mixed");
    result.Add("rate", o_.rate);
    uint64_t errors = 0;
    for (int op = 0; op < kOpCount; ++op) {
      const LatencySummary s = latency_[op].Summarize();
      const uint64_t e = op_errors_[op].load();
      errors += e;
      ops.Add({kOpNames[op], absl::StrCat(s.count), absl::StrCat(e), FormatMs(s.p50_us),
               FormatMs(s.p99_us), FormatMs(s.p999_us), FormatMs(s.max_us)});
      result.AddLatency(kOpNames[op], s);
      result.Add(absl::StrCat(kOpNames[op], "_errors"), e);
    }
    ops.Print();
    Table events({"watcher", "received", "lost", "spurious", "duplicates", "p50 (ms)", "p99 (ms)",
                  "max (ms)", "errors"});
    uint64_t worst_lost = 0;
    bool events_ok = true;
    for (size_t w = 0; w < ledgers.size(); ++w) {
      const ExpiryLedger& ledger = *ledgers[w];
      const uint64_t spurious = ledger.ReceivedAmong(removed_mask);
      const uint64_t valid = ledger.received() - spurious;
      const uint64_t lost = expected - std::min(expected, valid);
      worst_lost = std::max(worst_lost, lost);
      const LatencySummary s = ledger.Summarize();
      const uint64_t werr = watchers[w]->errors() + ledger.unknown();
      events_ok = events_ok && lost == 0 && spurious == 0 && ledger.duplicates() == 0 && werr == 0;
      events.Add({absl::StrCat(w), absl::StrCat(ledger.received()), absl::StrCat(lost),
                  absl::StrCat(spurious), absl::StrCat(ledger.duplicates()), FormatMs(s.p50_us),
                  FormatMs(s.p99_us), FormatMs(s.max_us), absl::StrCat(werr)});
      if (w == 0) result.AddLatency("event", s);
      if (watchers[w]->errors() > 0) {
        std::printf("  watcher %zu: %s\n", w, watchers[w]->first_error().c_str());
      }
    }
    events.Print();
    {
      absl::MutexLock lock(&mu_);
      if (!first_error_.empty()) std::printf("  first error: %s\n", first_error_.c_str());
    }
    result.Add("expected_events", expected);
    result.Add("lost", worst_lost);
    result.Add("errors", errors);
    result.Print();
    return errors == 0 && events_ok;
  }

 private:
  enum Op { kPut, kGet, kExpire, kRemove, kOpCount };
  // The stub's callback methods.
  using Async = class Stub::async;
  template <typename Request, typename Response>
  using AsyncMethod = void (Async::*)(grpc::ClientContext*, const Request*, Response*,
                                      std::function<void(grpc::Status)>);
  // One RPC in flight; deleted when it ends.
  template <typename Request, typename Response>
  struct Call {
    grpc::ClientContext context;
    Request request;
    Response response;
  };
  // The follow-up of ops whose success needs no bookkeeping.
  struct NoFollowUp {
    template <typename Request, typename Response>
    void operator()(const Request&, const Response&) const {}
  };
  static constexpr const char* kOpNames[kOpCount] = {"put", "get", "expire", "remove"};
  // Gets, expires and removes pick among this many most recent acknowledged
  // put batches, so most of them find live members.
  static constexpr size_t kRecentBatches = 1024;

  uint64_t issued_total() {
    absl::MutexLock lock(&mu_);
    return issued_;
  }

  void Pace() {
    const int total_weight = o_.mix.put + o_.mix.get + o_.mix.expire + o_.mix.remove;
    const double interval_us = 1e6 / o_.rate;
    const int64_t t0 = NowMicros() + 1000;
    const int64_t end = t0 + absl::ToInt64Microseconds(o_.duration);
    for (uint64_t i = 0;; ++i) {
      const int64_t intended = t0 + static_cast<int64_t>(static_cast<double>(i) * interval_us);
      if (intended >= end) break;
      const int64_t now = NowMicros();
      if (intended > now) absl::SleepFor(absl::Microseconds(intended - now));
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &MixedRun::HasRoomLocked));
        ++in_flight_;
        ++issued_;
      }
      const int pick = static_cast<int>(bench::Mix(i) % static_cast<uint64_t>(total_weight));
      Op op = kPut;
      if (pick >= o_.mix.put) op = kGet;
      if (pick >= o_.mix.put + o_.mix.get) op = kExpire;
      if (pick >= o_.mix.put + o_.mix.get + o_.mix.expire) op = kRemove;
      Issue(op, i, intended);
    }
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](uint64_t* n) { return *n == 0; }, &in_flight_));
  }

  bool HasRoomLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return in_flight_ < static_cast<uint64_t>(std::max(1, o_.shape.concurrency));
  }

  // A recently acknowledged put batch, or false when there is none yet.
  bool RecentBatch(uint64_t i, uint64_t* batch) {
    absl::MutexLock lock(&mu_);
    if (acked_.empty()) return false;
    const size_t window = std::min(acked_.size(), kRecentBatches);
    *batch = acked_[acked_.size() - 1 - bench::Mix(i ^ 0x5bd1e995) % window];
    return true;
  }

  template <typename Request>
  void SetKeys(uint64_t batch, Request* request) {
    request->set_collection(CollectionFor(o_.shape.prefix, batch, o_.shape.collections));
    for (uint64_t k = 0; k < o_.shape.batch; ++k) {
      *request->add_keys() = KeyFor(batch * o_.shape.batch + k, o_.shape.key_bytes);
    }
  }

  void Issue(Op op, uint64_t i, int64_t intended_us) {
    uint64_t batch = 0;
    if (op != kPut && !RecentBatch(i, &batch)) op = kPut;
    Stub* stub = stubs_[i % stubs_.size()].get();
    switch (op) {
      case kPut: {
        batch = next_put_batch_.fetch_add(1);
        auto call = std::make_unique<Call<v1::PutMembersRequest, v1::PutMembersResponse>>();
        call->request.set_collection(CollectionFor(o_.shape.prefix, batch, o_.shape.collections));
        for (uint64_t k = 0; k < o_.shape.batch; ++k) {
          const uint64_t index = batch * o_.shape.batch + k;
          v1::MemberWrite* write = call->request.add_members();
          write->set_key(KeyFor(index, o_.shape.key_bytes));
          write->set_value(ValueFor(index, o_.shape.value_bytes));
          SetDuration(o_.ttl, write->mutable_ttl());
        }
        Send(stub, &Async::PutMembers, kPut, intended_us, std::move(call),
             [this, batch](const v1::PutMembersRequest& request, const v1::PutMembersResponse&) {
               absl::MutexLock lock(&mu_);
               acked_.push_back(batch);
               put_members_ += static_cast<uint64_t>(request.members_size());
             });
        break;
      }
      case kGet: {
        auto call = std::make_unique<Call<v1::GetMembersRequest, v1::GetMembersResponse>>();
        SetKeys(batch, &call->request);
        Send(stub, &Async::GetMembers, kGet, intended_us, std::move(call), NoFollowUp());
        break;
      }
      case kExpire: {
        auto call = std::make_unique<Call<v1::ExpireMembersRequest, v1::ExpireMembersResponse>>();
        SetKeys(batch, &call->request);
        // Bring the deadline forward: the members expire (with their events)
        // sooner than their TTL said.
        call->request.mutable_ttl()->set_nanos(100'000'000);
        Send(stub, &Async::ExpireMembers, kExpire, intended_us, std::move(call), NoFollowUp());
        break;
      }
      case kRemove: {
        auto call = std::make_unique<Call<v1::RemoveMembersRequest, v1::RemoveMembersResponse>>();
        SetKeys(batch, &call->request);
        Send(stub, &Async::RemoveMembers, kRemove, intended_us, std::move(call),
             [this, batch](const v1::RemoveMembersRequest&,
                           const v1::RemoveMembersResponse& response) {
               absl::MutexLock lock(&mu_);
               for (int k = 0; k < response.results_size(); ++k) {
                 if (!response.results(k).existed()) continue;
                 // A member removed while live never produces an event.
                 const uint64_t index = batch * o_.shape.batch + static_cast<uint64_t>(k);
                 if (removed_.size() <= index) removed_.resize(index + 1, 0);
                 removed_[index] = 1;
               }
             });
        break;
      }
      case kOpCount:
        break;
    }
  }

  // Starts `call` with `method` (e.g. &Async::GetMembers); when it has
  // succeeded, `on_ok(request, response)` runs before the op is recorded.
  template <typename Request, typename Response, typename OnOk>
  void Send(Stub* stub, AsyncMethod<Request, Response> method, Op op, int64_t intended_us,
            std::unique_ptr<Call<Request, Response>> owned, OnOk on_ok) {
    Call<Request, Response>* call = owned.release();
    Prepare(&call->context);
    (stub->async()->*method)(&call->context, &call->request, &call->response,
                             [this, call, op, intended_us, on_ok](grpc::Status status) {
                               if (status.ok()) on_ok(call->request, call->response);
                               Done(op, status, intended_us);
                               delete call;
                             });
  }

  void Prepare(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + o_.shape.rpc_timeout));
  }

  void Done(Op op, const grpc::Status& status, int64_t intended_us) {
    latency_[op].Record(NowMicros() - intended_us);
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      op_errors_[op].fetch_add(1);
      if (first_error_.empty()) {
        first_error_ = absl::StrCat(kOpNames[op], ": code ", status.error_code(), ": ",
                                    status.error_message());
      }
    }
    --in_flight_;
  }

  // Constant after construction.
  const ScenarioOptions o_;
  const std::vector<std::unique_ptr<Stub>> stubs_;

  std::atomic<uint64_t> next_put_batch_{0};
  LatencyRecorder latency_[kOpCount];
  std::atomic<uint64_t> op_errors_[kOpCount] = {};

  absl::Mutex mu_;
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t put_members_ ABSL_GUARDED_BY(mu_) = 0;
  // Acknowledged put batches, oldest first.
  std::vector<uint64_t> acked_ ABSL_GUARDED_BY(mu_);
  // Per member index: removed while live (so no event is due).
  std::vector<uint8_t> removed_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

bool RunMixed(const ScenarioOptions& o) {
  PrintShape("mixed", o);
  std::printf(
      "  rate %s ops/s for %ss, mix put=%d get=%d expire=%d remove=%d, ttl %s, "
      "%d watcher(s)\n",
      FormatCount(o.rate).c_str(), FormatSeconds(o.duration).c_str(), o.mix.put, o.mix.get,
      o.mix.expire, o.mix.remove, absl::FormatDuration(o.ttl).c_str(), o.watchers);
  MixedRun run(o);
  return run.Run();
}

}  // namespace load
}  // namespace lapse

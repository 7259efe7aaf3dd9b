#include "bench/common/group_ledger.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "bench/common/report.h"
#include "bench/common/scenario.h"

namespace lapse {
namespace load {

GroupLedger::GroupLedger(uint64_t expected, int consumers)
    : acks_(expected),
      acked_us_(expected, 0),
      per_consumer_(static_cast<size_t>(std::max(consumers, 1)), 0) {}

void GroupLedger::Acked(int consumer, absl::Span<const GroupAck> acks) {
  if (acks.empty()) return;
  std::vector<Delivery> deliveries;
  deliveries.reserve(acks.size());
  for (const GroupAck& a : acks) deliveries.push_back({a.index, a.deadline_us, a.acked_us, 0});
  {
    absl::MutexLock lock(&mu_);
    per_consumer_[static_cast<size_t>(consumer)] += acks.size();
    for (const GroupAck& a : acks) {
      if (a.index < acked_us_.size() && acked_us_[a.index] == 0) acked_us_[a.index] = a.acked_us;
    }
  }
  // Last, so that a waiter woken by the final acknowledgement sees the rest.
  acks_.Deliver(deliveries);
}

void GroupLedger::Died(absl::Span<const uint64_t> held, int64_t died_us) {
  absl::MutexLock lock(&mu_);
  held_.assign(held.begin(), held.end());
  died_us_ = died_us;
}

void GroupLedger::Error(const std::string& what, uint64_t n) {
  absl::MutexLock lock(&mu_);
  errors_ += n;
  if (first_error_.empty()) first_error_ = what;
}

std::vector<uint64_t> GroupLedger::per_consumer() const {
  absl::MutexLock lock(&mu_);
  return per_consumer_;
}

uint64_t GroupLedger::errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

std::string GroupLedger::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

size_t GroupLedger::held() const {
  absl::MutexLock lock(&mu_);
  return held_.size();
}

int64_t GroupLedger::died_us() const {
  absl::MutexLock lock(&mu_);
  return died_us_;
}

LatencySummary GroupLedger::SummarizeRedelivery(absl::Duration minus) const {
  const int64_t minus_us = absl::ToInt64Microseconds(minus);
  std::vector<int64_t> samples;
  {
    absl::MutexLock lock(&mu_);
    for (const uint64_t index : held_) {
      if (index < acked_us_.size() && acked_us_[index] != 0) {
        samples.push_back(acked_us_[index] - died_us_ - minus_us);
      }
    }
  }
  LatencyRecorder recorder;
  recorder.RecordAll(samples);
  return recorder.Summarize();
}

int64_t GroupWaitUntilMs(const GroupRun& run) {
  int64_t until = run.first_deadline_ms + absl::ToInt64Milliseconds(run.spread);
  if (run.shape.kill_consumer) until += absl::ToInt64Milliseconds(run.shape.visibility_timeout);
  return until;
}

bool ReportGroup(const GroupRun& run, const GroupLedger& ledger, uint64_t other_errors) {
  const ExpiryLedger& acks = ledger.acks();
  const ExpiryTally tally = Tally(acks, run.members);
  const uint64_t errors = ledger.errors() + other_errors;
  const int64_t span_us = acks.last_received_us() - run.first_deadline_ms * 1000;
  const double rate =
      span_us > 0 ? static_cast<double>(tally.received) * 1e6 / static_cast<double>(span_us) : 0;
  const std::vector<uint64_t> per_consumer = ledger.per_consumer();
  const auto [least, most] = std::minmax_element(
      per_consumer.begin() + (run.shape.kill_consumer ? 1 : 0), per_consumer.end());

  Table table({"group", "value"});
  table.Add({"consumers", absl::StrCat(run.shape.consumers)});
  table.Add({"max in flight per consumer", absl::StrCat(run.shape.max_in_flight)});
  table.Add({"members", absl::StrCat(run.members)});
  table.Add({"deadlines", run.spread == absl::ZeroDuration()
                              ? std::string("one, shared")
                              : absl::StrCat("spread over ", FormatSeconds(run.spread), " s")});
  table.Add({"load members/s", FormatCount(static_cast<double>(run.load.members) /
                                           absl::ToDoubleSeconds(run.load.elapsed))});
  table.Add({"members acked", absl::StrCat(tally.received)});
  table.Add({"members never acked", absl::StrCat(tally.lost)});
  table.Add({"members acked twice or more", absl::StrCat(tally.duplicates)});
  table.Add({"events/s acked (first deadline to last ack)", FormatCount(rate)});
  table.AddLatency("ack - deadline", tally.latency);
  if (least != per_consumer.end()) {
    table.Add({"acks per live consumer, least / most", absl::StrCat(*least, " / ", *most)});
  }
  Result result(run.peer, run.shape.kill_consumer ? "group-redelivery" : "group");
  result.Add("consumers", static_cast<int64_t>(run.shape.consumers));
  result.Add("members", run.members);
  result.Add("spread_s", absl::ToDoubleSeconds(run.spread));
  AddTally(tally, result);
  result.Add("events_per_s", rate);
  result.AddLatency("ack", tally.latency);
  if (run.shape.kill_consumer) {
    const LatencySummary redelivery = ledger.SummarizeRedelivery(run.shape.visibility_timeout);
    table.Add({"visibility timeout (ms)",
               absl::StrCat(absl::ToInt64Milliseconds(run.shape.visibility_timeout))});
    table.Add({"events the dead consumer held", absl::StrCat(ledger.held())});
    table.Add({"of which acked by another", absl::StrCat(redelivery.count)});
    table.AddLatency("death to ack elsewhere - visibility timeout", redelivery);
    result.Add("visibility_timeout_ms", absl::ToDoubleMilliseconds(run.shape.visibility_timeout));
    result.Add("held", static_cast<uint64_t>(ledger.held()));
    result.AddLatency("redelivery", redelivery);
  }
  table.Add({"errors", absl::StrCat(errors)});
  table.Print();
  if (errors > 0) std::printf("  first error: %s\n", ledger.first_error().c_str());
  result.Add("errors", errors);
  result.Print();
  const bool redelivered = !run.shape.kill_consumer || ledger.held() > 0;
  if (!redelivered) std::printf("  the consumer meant to die never held an event\n");
  return tally.Clean(errors) && redelivered;
}

}  // namespace load
}  // namespace lapse

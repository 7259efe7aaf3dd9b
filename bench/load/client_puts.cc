#include "bench/load/client_puts.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/load_counters.h"
#include "bench/common/members.h"
#include "lapse/client.h"
#include "server/base/mutex.h"

namespace lapse {
namespace load {

LoadOutcome RunClientPuts(const std::string& addr, const Shape& shape, const LoadPlan& plan) {
  client::ClientOptions options;
  options.default_timeout = shape.rpc_timeout;
  options.max_receive_message_bytes = -1;
  options.max_send_message_bytes = -1;
  options.max_writes_in_flight = static_cast<size_t>(std::max(1, shape.concurrency));
  client::Client lapse(addr, options);
  // The request shape RunPuts sends: one TTL for the call and no echo of the
  // members created, unless the plan gives deadlines or asks per member.
  const bool shared_ttl = !plan.deadline_ms && !shape.per_member_ttl;
  client::PutOptions put_options;
  if (shared_ttl) {
    put_options.default_expiration = client::Expiration::Ttl(plan.ttl);
    put_options.omit_created_results = true;
  }
  LoadCounters counters(plan, shape.batch);
  // What a call's callback needs to know: when it started and how many
  // members it carried. The callback captures only its Slot and the run (two
  // pointers, which std::function keeps without allocating); a slot is taken
  // with the call and given back by its callback.
  struct Slot {
    int64_t started_us = 0;
    size_t members = 0;
  };
  Mutex mu;
  CondVar all_answered;
  uint64_t unanswered = 0;  // Guarded by mu.
  // Every slot ever made (at most concurrency + 1: a callback makes its next
  // call before it gives its slot back), and those free; guarded by mu.
  std::deque<Slot> slots;
  std::vector<Slot*> free_slots;
  // Makes the next call, if any is left; its callback makes the one after.
  std::function<void()> put_next;
  // Calls owed by the callbacks run on this thread while it makes calls (a
  // call that fails before it is queued is answered at once): the loop of
  // the make_calls already running makes them, rather than a recursion.
  thread_local size_t* owed = nullptr;
  const auto make_calls = [&](size_t calls) {
    if (owed != nullptr) {
      *owed += calls;
      return;
    }
    owed = &calls;
    for (; calls > 0; --calls) put_next();
    owed = nullptr;
  };
  // A call's answer: counted, the next call made, its slot given back.
  const auto answered = [&](Slot* slot, bool ok, const absl::Status& status) {
    counters.Finished(slot->started_us, slot->members, ok);
    if (!ok) counters.Failed(absl::StrCat("PutMembers: ", status.ToString()));
    make_calls(1);
    MutexLock lock(&mu);
    free_slots.push_back(slot);
    if (--unanswered == 0) all_answered.SignalAll();
  };
  using Answered = decltype(answered);
  put_next = [&] {
    const std::optional<uint64_t> batch = counters.NextBatch();
    if (!batch.has_value()) return;
    const auto [first, end] = plan.BatchMembers(shape.batch, *batch);
    // Reused call after call, as an efficient client would: once their
    // strings have grown to size, filling them allocates nothing.
    thread_local std::vector<client::MemberWrite> writes;
    writes.resize(end - first);
    for (uint64_t i = first; i < end; ++i) {
      client::MemberWrite& write = writes[i - first];
      write.key.resize(shape.key_bytes);
      WriteDigits('k', i, write.key.data(), shape.key_bytes);
      write.value.resize(shape.value_bytes);
      WriteDigits('v', i, write.value.data(), shape.value_bytes);
      if (plan.deadline_ms) {
        write.expiration = client::Expiration::At(absl::FromUnixMillis(plan.deadline_ms(i)));
      } else if (!shared_ttl) {
        write.expiration = client::Expiration::Ttl(plan.ttl);
      } else {
        write.expiration = client::Expiration();
      }
    }
    const std::string collection = CollectionFor(shape.prefix, *batch, shape.collections);
    Slot* slot;
    {
      MutexLock lock(&mu);
      ++unanswered;
      if (free_slots.empty()) free_slots.push_back(&slots.emplace_back());
      slot = free_slots.back();
      free_slots.pop_back();
    }
    slot->started_us = NowMicros();
    slot->members = writes.size();
    const Answered* run = &answered;
    lapse.PutMembersAsync(
        collection, writes,
        [run, slot](absl::StatusOr<std::vector<client::PutResult>> put) {
          (*run)(slot, put.ok(), put.status());
        },
        put_options);
  };
  {
    // Counted as one call until the first calls are made, so that none of
    // their answers sees the count at 0 before the last is made.
    MutexLock lock(&mu);
    ++unanswered;
  }
  make_calls(static_cast<size_t>(std::max(1, shape.concurrency)));
  MutexLock lock(&mu);
  --unanswered;
  while (unanswered > 0) all_answered.WaitWithTimeout(&mu, absl::InfiniteDuration());
  return counters.Outcome();
}

}  // namespace load
}  // namespace lapse

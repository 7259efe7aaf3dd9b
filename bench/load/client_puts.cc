#include "bench/load/client_puts.h"

#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/load_counters.h"
#include "bench/common/members.h"
#include "lapse/client.h"

namespace lapse {
namespace load {

LoadOutcome RunClientPuts(const std::string& addr, const Shape& shape, const LoadPlan& plan) {
  client::ClientOptions options;
  options.default_timeout = shape.rpc_timeout;
  options.max_receive_message_bytes = -1;
  options.max_send_message_bytes = -1;
  client::Client lapse(addr, options);
  LoadCounters counters(plan, shape.batch);
  const auto writer = [&] {
    std::vector<client::MemberWrite> writes;
    for (std::optional<uint64_t> batch = counters.NextBatch(); batch.has_value();
         batch = counters.NextBatch()) {
      const auto [first, end] = plan.BatchMembers(shape.batch, *batch);
      writes.resize(end - first);
      for (uint64_t i = first; i < end; ++i) {
        client::MemberWrite& write = writes[i - first];
        write.key = KeyFor(i, shape.key_bytes);
        write.value = ValueFor(i, shape.value_bytes);
        write.expiration = plan.deadline_ms
                               ? client::Expiration::At(absl::FromUnixMillis(plan.deadline_ms(i)))
                               : client::Expiration::Ttl(plan.ttl);
      }
      const int64_t started_us = NowMicros();
      absl::StatusOr<std::vector<client::PutResult>> put =
          lapse.PutMembers(CollectionFor(shape.prefix, *batch, shape.collections), writes);
      counters.Finished(started_us, writes.size(), put.ok());
      if (!put.ok()) counters.Failed(absl::StrCat("PutMembers: ", put.status().ToString()));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, shape.concurrency); ++t) threads.emplace_back(writer);
  for (std::thread& thread : threads) thread.join();
  return counters.Outcome();
}

}  // namespace load
}  // namespace lapse

// StorePuts: batched PutMembers straight into a Store, with no gRPC in
// between, keeping a fixed number of calls in flight — what one lapsed
// replica asks of its store, minus the RPC layer. lapse-cluster-bench runs it
// against the Redis Cluster store to measure what the masters carry.
//
//   lapse::load::LoadPlan plan{.members = 200000};
//   lapse::load::StorePutShape shape{.collections = names, .batch = 100, .in_flight = 64};
//   lapse::load::LoadOutcome out = lapse::load::RunStorePuts(*store, shape, plan);
//
// Batch j (members j*batch ...) goes to collections[j % collections.size()];
// members look like lapse-bench's (bench/common/members.h), each with
// plan.ttl as the request's default TTL. Blocking; the store's completions
// may run on any thread.
#ifndef LAPSE_BENCH_CLUSTER_STORE_PUTS_H_
#define LAPSE_BENCH_CLUSTER_STORE_PUTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "bench/common/load_plan.h"
#include "server/storage/store.h"

namespace lapse {
namespace load {

struct StorePutShape {
  // Where the batches go, round-robin; not empty.
  std::vector<std::string> collections;
  size_t batch = 100;
  // Store calls in flight.
  int in_flight = 64;
  size_t key_bytes = 16;
  size_t value_bytes = 16;
};

// Writes per `plan` (members, or for plan.duration) and returns when every
// call has completed; the outcome's requests are store calls, its latency
// per call.
LoadOutcome RunStorePuts(Store& store, const StorePutShape& shape, const LoadPlan& plan);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_CLUSTER_STORE_PUTS_H_

// WriteMembers: lapse-redis-bench's writer, the Redis counterpart of
// lapse-bench's RunPuts (bench/load/lapse_load.h).
//
// Each batch (see members.h) is one HSET of the collection's hash plus, in
// classic mode, one ZADD of the members' deadlines to the sorted set, or, in
// hfe mode, one HPEXPIREAT per distinct deadline. Batches are spread over
// o.connections connections, each keeping concurrency / connections batches
// pipelined, one thread per connection.
//
//   lapse::load::LoadPlan plan;
//   plan.members = 100000;
//   lapse::load::LoadOutcome out = lapse::compare::WriteMembers(options, plan);
//
// Blocks until every batch has been answered; the outcome's requests are
// batches.
#ifndef LAPSE_BENCH_COMPARE_REDIS_WRITER_H_
#define LAPSE_BENCH_COMPARE_REDIS_WRITER_H_

#include "bench/common/load_plan.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

load::LoadOutcome WriteMembers(const Options& o, const load::LoadPlan& plan);

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_WRITER_H_

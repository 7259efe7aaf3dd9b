// RunClientPuts: the put scenario through the C++ client library
// (lapse/client.h) instead of the generated stubs: shape.concurrency calls
// of Client::PutMembersAsync in flight on the library's write stream, each
// call's callback making the next (as an event-driven application, or Redis's
// pipelining benchmark, keeps its window full), with
// ClientOptions::max_writes_in_flight = shape.concurrency. Requests
// have the shape RunPuts sends (default_ttl and omit_created_results unless
// per_member_ttl or the plan gives deadlines).
//
//   LoadOutcome out = lapse::load::RunClientPuts("127.0.0.1:50051", shape, plan);
//
// Blocks until every call has been answered; the outcome's requests are calls.
#ifndef LAPSE_BENCH_LOAD_CLIENT_PUTS_H_
#define LAPSE_BENCH_LOAD_CLIENT_PUTS_H_

#include <string>

#include "bench/common/load_plan.h"
#include "bench/load/lapse_load.h"

namespace lapse {
namespace load {

LoadOutcome RunClientPuts(const std::string& addr, const Shape& shape, const LoadPlan& plan);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_CLIENT_PUTS_H_

// RunClientPuts: the put scenario through the C++ client library
// (lapse/client.h) instead of the generated stubs: shape.concurrency threads,
// each calling Client::PutMembers in a loop on one shared Client, as an
// application would. With more than one call in flight the library carries
// them on its write stream, so this measures what applications get.
//
//   LoadOutcome out = lapse::load::RunClientPuts("127.0.0.1:50051", shape, plan);
//
// Blocks until every call has returned; the outcome's requests are calls.
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

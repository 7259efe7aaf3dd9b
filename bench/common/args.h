// Args: command-line handling shared by lapse-bench and lapse-redis-bench.
//
//   std::vector<std::string> storage;
//   std::vector<char*> args = lapse::load::DashesToUnderscores(argc, argv, &storage);
//   absl::ParseCommandLine(argc, args.data());
//
// Pure functions; thread-compatible.
#ifndef LAPSE_BENCH_COMMON_ARGS_H_
#define LAPSE_BENCH_COMMON_ARGS_H_

#include <string>
#include <vector>

namespace lapse {
namespace load {

// Abseil flags are spelled with underscores; this lets users write
// --key-bytes=16 as well, like the rest of the benchmark tooling. Rewrites
// only flag names (the part before '='), never values or positional
// arguments. The returned pointers point into `storage`.
std::vector<char*> DashesToUnderscores(int argc, char** argv, std::vector<std::string>* storage);

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_ARGS_H_

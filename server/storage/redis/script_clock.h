// The time a lapse script runs at. Every Lua script of the Redis Cluster
// store takes it as ARGV[1]: "" (production) reads the master's TIME, the one
// clock of a partition (docs/redis-cluster.md, "Time"); Unix microseconds
// make the script run at that time instead, so tests drive expiry with a
// FakeClock as they do for the embedded store.
//
//   args.insert(args.begin(), ScriptTimeArg(options.script_clock));
//   new RedisScript(absl::StrCat(ScriptClockLua(), body));
//
// Thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_SCRIPT_CLOCK_H_
#define LAPSE_SERVER_STORAGE_REDIS_SCRIPT_CLOCK_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/base/clock.h"

namespace lapse::redis {

// ARGV[1] of a script: "" when `clock` is null, else its Now() in Unix
// microseconds.
std::string ScriptTimeArg(const Clock* clock);

// Lua that defines, from ARGV[1], `now_floor` (the time in Unix ms rounded
// down: a member is due when its deadline <= now_floor) and `now_ceil`
// (rounded up: a new deadline counts from it, so nothing expires before the
// time asked for).
absl::string_view ScriptClockLua();

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_SCRIPT_CLOCK_H_

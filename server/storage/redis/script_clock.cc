#include "server/storage/redis/script_clock.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace lapse::redis {

std::string ScriptTimeArg(const Clock* clock) {
  return clock == nullptr ? "" : absl::StrCat(absl::ToUnixMicros(clock->Now()));
}

absl::string_view ScriptClockLua() {
  return R"lua(
local micros
if ARGV[1] == '' then
  local time = redis.call('TIME')
  micros = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  micros = tonumber(ARGV[1])
end
local now_floor = math.floor(micros / 1000)
local now_ceil = math.floor((micros + 999) / 1000)
)lua";
}

}  // namespace lapse::redis

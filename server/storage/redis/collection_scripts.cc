#include "server/storage/redis/collection_scripts.h"

#include "absl/strings/str_cat.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

// The start of every script after the time (script_clock.h) and ReapLua():
// names, reap() and index().
constexpr absl::string_view kPrelude = R"lua(
local values, deadlines, due, events, sequence, collections =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local collection, retention = ARGV[2], ARGV[3]

local wake = string.sub(due, 1, -4) .. 'wake'

-- Events emitted: the reaper advances the partition's delivery watermark.
local function reap()
  if reap_members(values, deadlines, events, sequence, collection, retention, false) > 0 then
    redis.call('SPUBLISH', wake, 'due ' .. now_floor)
  end
end

-- The partition's earliest deadline moved earlier: the reaper re-arms.
local function index()
  local before = earliest_due(due)
  index_collection(values, deadlines, due, collections, collection)
  local after = earliest_due(due)
  if after and (not before or tonumber(after) < tonumber(before)) then
    redis.call('SPUBLISH', wake, 'due ' .. after)
  end
end

-- The deadline a kind and number ask for: a number, or false for none;
-- "keep" keeps `key`'s.
local function deadline_of(kind, number, key)
  if kind == 'ttl' then return now_ceil + tonumber(number) end
  if kind == 'at' then return tonumber(number) end
  if kind == 'keep' then
    local d = redis.call('ZSCORE', deadlines, key)
    return d and tonumber(d)
  end
  return false
end

local function set_deadline(key, deadline)
  if deadline then
    redis.call('ZADD', deadlines, deadline, key)
  else
    redis.call('ZREM', deadlines, key)
  end
end

reap()
)lua";

constexpr absl::string_view kPut = R"lua(
local max_members = tonumber(ARGV[4])
local out, apply, creates = {}, {}, 0
local first = 5
local n = (#ARGV - first + 1) / 5
for i = 1, n do
  local a = first + (i - 1) * 5
  local key, condition = ARGV[a], ARGV[a + 2]
  local exists = redis.call('HEXISTS', values, key) == 1
  if (condition == 'absent' and exists) or (condition == 'present' and not exists) then
    local d = redis.call('ZSCORE', deadlines, key)
    out[i] = {2, d and tonumber(d) or -1}
    apply[i] = false
  else
    out[i] = {exists and 1 or 0, -1}
    apply[i] = true
    if not exists then creates = creates + 1 end
  end
end
if max_members > 0 then
  local size = redis.call('HLEN', values) + creates
  if size > max_members then
    return redis.error_reply('FAILED_PRECONDITION collection "' .. collection ..
                             '" would hold ' .. size .. ' members; max_members is ' .. max_members)
  end
end
for i = 1, n do
  if apply[i] then
    local a = first + (i - 1) * 5
    local key = ARGV[a]
    local deadline = deadline_of(ARGV[a + 3], ARGV[a + 4], key)
    redis.call('HSET', values, key, ARGV[a + 1])
    set_deadline(key, deadline)
    if deadline then out[i][2] = deadline end
  end
end
index()
return out
)lua";

constexpr absl::string_view kGet = R"lua(
local refresh_kind, refresh_number = ARGV[4], ARGV[5]
local max_bytes, overhead = tonumber(ARGV[6]), tonumber(ARGV[7])
local out, bytes, found = {}, 0, 0
for i = 8, #ARGV do
  local key = ARGV[i]
  local value = redis.call('HGET', values, key)
  bytes = bytes + #key + overhead
  if value then
    local d = redis.call('ZSCORE', deadlines, key)
    out[#out + 1] = {1, value, d and tonumber(d) or -1}
    bytes = bytes + #value
    found = found + 1
  else
    out[#out + 1] = {0}
  end
end
if bytes > max_bytes then
  return redis.error_reply('RESOURCE_EXHAUSTED the answer to these ' .. (#ARGV - 7) ..
                           ' keys (' .. found .. ' found) would take ' .. bytes ..
                           ' bytes, more than the ' .. max_bytes ..
                           ' one response may hold; get fewer keys per request')
end
if refresh_kind ~= 'none' then
  local deadline = deadline_of(refresh_kind, refresh_number, nil)
  for i = 8, #ARGV do
    local entry = out[i - 7]
    if entry[1] == 1 then
      set_deadline(ARGV[i], deadline)
      entry[3] = deadline or -1
    end
  end
end
index()
return out
)lua";

constexpr absl::string_view kRemove = R"lua(
local out = {}
for i = 4, #ARGV do
  out[#out + 1] = redis.call('HDEL', values, ARGV[i])
  redis.call('ZREM', deadlines, ARGV[i])
end
index()
return out
)lua";

}  // namespace

CollectionKeys::CollectionKeys(absl::string_view tag, absl::string_view collection)
    : values(absl::StrCat("lapse:{", tag, "}:v:", collection)),
      deadlines(absl::StrCat("lapse:{", tag, "}:d:", collection)),
      due(absl::StrCat("lapse:{", tag, "}:due")),
      events(absl::StrCat("lapse:{", tag, "}:events")),
      sequence(absl::StrCat("lapse:{", tag, "}:sequence")),
      collections(absl::StrCat("lapse:{", tag, "}:collections")) {}

std::vector<std::string> CollectionKeys::All() const {
  return {values, deadlines, due, events, sequence, collections};
}

const RedisScript& PutScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), ReapLua(), kPrelude, kPut));
  return *script;
}

const RedisScript& GetScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), ReapLua(), kPrelude, kGet));
  return *script;
}

const RedisScript& RemoveScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), ReapLua(), kPrelude, kRemove));
  return *script;
}

}  // namespace lapse::redis

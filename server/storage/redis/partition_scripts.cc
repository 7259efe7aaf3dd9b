#include "server/storage/redis/partition_scripts.h"

#include "absl/strings/str_cat.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

constexpr absl::string_view kReap = R"lua(
local function reap_members(values, deadlines, key_index, events, sequence, members, collection,
                            retention, limit)
  local due_members
  if limit then
    due_members = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now_floor, 'WITHSCORES',
                             'LIMIT', 0, limit)
  else
    due_members = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now_floor, 'WITHSCORES')
  end
  for i = 1, #due_members, 2 do
    local key = due_members[i]
    local value = redis.call('HGET', values, key) or ''
    local s = redis.call('INCR', sequence)
    redis.call('XADD', events, 'MAXLEN', '~', retention, s .. '-0', 'c', collection, 'k', key,
               'v', value, 'd', due_members[i + 1], 'x', now_floor)
    redis.call('HDEL', values, key)
    redis.call('ZREM', deadlines, key)
    redis.call('ZREM', key_index, key)
  end
  if #due_members > 0 then redis.call('DECRBY', members, #due_members / 2) end
  return #due_members / 2
end

local function index_collection(values, deadlines, due, collections, collection)
  local first = redis.call('ZRANGE', deadlines, 0, 0, 'WITHSCORES')
  if #first > 0 then
    redis.call('ZADD', due, first[2], collection)
  else
    redis.call('ZREM', due, collection)
  end
  if redis.call('EXISTS', values) == 1 then
    redis.call('ZADD', collections, 0, collection)
  else
    redis.call('ZREM', collections, collection)
  end
end

local function earliest_due(due)
  local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  return first[2] or false
end
)lua";

constexpr absl::string_view kReapPartition = R"lua(
local due, events, sequence, collections, delivered, wait, members =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local retention, budget, width = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
-- Candidate i (ARGV[first_candidate + i]) has its three keys from
-- KEYS[first_key + 3i].
local first_candidate, first_key = 5, 8
local reaped = 0
for i = first_candidate, #ARGV do
  if reaped >= budget then break end
  local collection = ARGV[i]
  local due_at = redis.call('ZSCORE', due, collection)
  if due_at and tonumber(due_at) <= now_floor then
    local k = first_key + (i - first_candidate) * 3
    local values, deadlines, key_index = KEYS[k], KEYS[k + 1], KEYS[k + 2]
    reaped = reaped + reap_members(values, deadlines, key_index, events, sequence, members,
                                   collection, retention, budget - reaped)
    index_collection(values, deadlines, due, collections, collection)
  end
end
local earliest = earliest_due(due)
local more = (earliest and tonumber(earliest) <= now_floor) and 1 or 0
local s = tonumber(redis.call('GET', sequence) or '0')
local d = tonumber(redis.call('GET', delivered) or '0')
if s > d then redis.call('SET', wait, s) end
return {reaped, more, earliest or '-1', s, d, redis.call('ZRANGE', due, 0, width - 1)}
)lua";

constexpr absl::string_view kAdvance = R"lua(
local d = tonumber(redis.call('GET', KEYS[1]) or '0')
local s = tonumber(ARGV[2])
if s > d then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('SPUBLISH', ARGV[3], 'delivered ' .. ARGV[2])
  return s
end
return d
)lua";

}  // namespace

PartitionKeys::PartitionKeys(absl::string_view tag)
    : prefix(absl::StrCat("lapse:{", tag, "}:")),
      due(absl::StrCat(prefix, "due")),
      events(absl::StrCat(prefix, "events")),
      sequence(absl::StrCat(prefix, "sequence")),
      collections(absl::StrCat(prefix, "collections")),
      delivered(absl::StrCat(prefix, "delivered")),
      wait(absl::StrCat(prefix, "wait")),
      members(absl::StrCat(prefix, "members")),
      wake(absl::StrCat(prefix, "wake")) {}

std::string PartitionKeys::ValuesOf(absl::string_view collection) const {
  return absl::StrCat(prefix, "v:", collection);
}

std::string PartitionKeys::DeadlinesOf(absl::string_view collection) const {
  return absl::StrCat(prefix, "d:", collection);
}

std::string PartitionKeys::KeyIndexOf(absl::string_view collection) const {
  return absl::StrCat(prefix, "k:", collection);
}

void PartitionKeys::AppendCollectionKeys(absl::Span<const std::string> collections_of_call,
                                         std::vector<std::string>& keys) const {
  keys.reserve(keys.size() + 3 * collections_of_call.size());
  for (const std::string& collection : collections_of_call) {
    keys.push_back(ValuesOf(collection));
    keys.push_back(DeadlinesOf(collection));
    keys.push_back(KeyIndexOf(collection));
  }
}

std::vector<std::string> PartitionKeys::ReapKeys(absl::Span<const std::string> candidates) const {
  std::vector<std::string> keys = {due, events, sequence, collections, delivered, wait, members};
  AppendCollectionKeys(candidates, keys);
  return keys;
}

absl::string_view ReapLua() { return kReap; }

const RedisScript& ReapPartitionScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), kReap, kReapPartition));
  return *script;
}

const RedisScript& AdvanceWatermarkScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), kAdvance));
  return *script;
}

}  // namespace lapse::redis

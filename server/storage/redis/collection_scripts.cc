#include "server/storage/redis/collection_scripts.h"

#include "absl/strings/str_cat.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

// The start of every script after the time (script_clock.h) and ReapLua():
// names, reap() and index().
constexpr absl::string_view kPrelude = R"lua(
local values, deadlines, due, events, sequence, collections, key_index, members =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local collection, retention = ARGV[2], ARGV[3]

local wake = string.sub(due, 1, -4) .. 'wake'

-- Events emitted: the reaper advances the partition's delivery watermark.
local function reap()
  if reap_members(values, deadlines, key_index, events, sequence, members, collection, retention,
                  false) > 0 then
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

local sequence_at_start = tonumber(redis.call('GET', sequence) or '0')
reap()
)lua";

// The end of every script on one collection: its answer, and the last
// sequence of the events it appended (0: none).
constexpr absl::string_view kEpilogue = R"lua(
local answer = body()
if type(answer) == 'table' and answer.err then return answer end
local last = tonumber(redis.call('GET', sequence) or '0')
return {answer, last > sequence_at_start and last or 0}
)lua";

constexpr absl::string_view kPut = R"lua(
local max_members, share = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, apply, creates = {}, {}, 0
local first = 6
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
if creates > 0 then
  local held = tonumber(redis.call('GET', members) or '0')
  if held + creates > share then
    return redis.error_reply('RESOURCE_EXHAUSTED the partition of collection "' .. collection ..
                             '" holds ' .. held .. ' members and may hold ' .. share ..
                             ', its share of max_total_members')
  end
  redis.call('INCRBY', members, creates)
end
for i = 1, n do
  if apply[i] then
    local a = first + (i - 1) * 5
    local key = ARGV[a]
    local deadline = deadline_of(ARGV[a + 3], ARGV[a + 4], key)
    redis.call('HSET', values, key, ARGV[a + 1])
    if out[i][1] == 0 then redis.call('ZADD', key_index, 0, key) end
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
local out, removed = {}, 0
for i = 4, #ARGV do
  out[#out + 1] = redis.call('HDEL', values, ARGV[i])
  removed = removed + out[#out]
  redis.call('ZREM', deadlines, ARGV[i])
  redis.call('ZREM', key_index, ARGV[i])
end
if removed > 0 then redis.call('DECRBY', members, removed) end
index()
return out
)lua";

constexpr absl::string_view kExpire = R"lua(
local condition = ARGV[4]
local d = deadline_of(ARGV[5], ARGV[6], nil)
local out, expired = {}, false
for i = 7, #ARGV do
  local key = ARGV[i]
  if redis.call('HEXISTS', values, key) == 0 then
    out[#out + 1] = {2, -1}
  else
    -- A persistent member (false) expires infinitely late.
    local current = redis.call('ZSCORE', deadlines, key)
    current = current and tonumber(current)
    local met = condition == 'always' or (condition == 'none' and not current) or
                (condition == 'some' and current) or (condition == 'later' and current and d > current) or
                (condition == 'earlier' and (not current or d < current))
    if not met then
      out[#out + 1] = {1, current or -1}
    elseif d <= now_floor then
      -- Expired below by reap(), with its event, at the deadline asked for.
      redis.call('ZADD', deadlines, d, key)
      out[#out + 1] = {3, -1}
      expired = true
    else
      redis.call('ZADD', deadlines, d, key)
      out[#out + 1] = {0, d}
    end
  end
end
if expired then reap() end
index()
return out
)lua";

constexpr absl::string_view kPersist = R"lua(
local out = {}
for i = 4, #ARGV do
  if redis.call('HEXISTS', values, ARGV[i]) == 0 then
    out[#out + 1] = 2
  else
    out[#out + 1] = redis.call('ZREM', deadlines, ARGV[i]) == 1 and 0 or 1
  end
end
index()
return out
)lua";

// Whether `a` sorts before `b` byte by byte, as Redis orders members of equal
// score (Lua's `<` follows the server's locale).
constexpr absl::string_view kBytesLess = R"lua(
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
)lua";

constexpr absl::string_view kListMembers = R"lua(
local by_key, limit, keys_only = ARGV[4] == 'key', tonumber(ARGV[5]), ARGV[6] == '1'
local max_bytes, overhead = tonumber(ARGV[7]), tonumber(ARGV[8])
local has_after, after_key = ARGV[9] == '1', ARGV[11]
local after_deadline = ARGV[10] ~= 'none' and tonumber(ARGV[10])
local want = limit + 1

-- How many members with a deadline come at or before (ARGV[10], key) in
-- the deadline order, which is Redis's (score, then bytes) order. The
-- bounds are the argument's text: Lua writes numbers with 14 digits.
local function rank_after(key)
  local score = redis.call('ZSCORE', deadlines, key)
  if score and tonumber(score) == after_deadline then
    return redis.call('ZRANK', deadlines, key) + 1
  end
  local before = redis.call('ZCOUNT', deadlines, '-inf', '(' .. ARGV[10])
  local ties = redis.call('ZRANGEBYSCORE', deadlines, ARGV[10], ARGV[10])
  local lo, hi = 1, #ties + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_less(key, ties[mid]) then hi = mid else lo = mid + 1 end
  end
  return before + lo - 1
end

-- Up to `want` members in order, each {key, deadline or -1}.
local candidates = {}
local function by_key_from(from, persistent_only)
  while #candidates < want do
    local keys = redis.call('ZRANGEBYLEX', key_index, from, '+', 'LIMIT', 0, want)
    for _, key in ipairs(keys) do
      local d = redis.call('ZSCORE', deadlines, key)
      if #candidates < want and not (persistent_only and d) then
        candidates[#candidates + 1] = {key, d and tonumber(d) or -1}
      end
    end
    if #keys < want then break end
    from = '(' .. keys[#keys]
  end
end
local from_key = has_after and ('(' .. after_key) or '-'
if by_key then
  by_key_from(from_key, false)
else
  if not has_after or after_deadline then
    local start = has_after and rank_after(after_key) or 0
    local entries = redis.call('ZRANGE', deadlines, start, start + want - 1, 'WITHSCORES')
    for i = 1, #entries, 2 do
      candidates[#candidates + 1] = {entries[i], tonumber(entries[i + 1])}
    end
    from_key = '-'
  end
  -- Then the persistent members, by key.
  by_key_from(from_key, true)
end

-- [more, then key, value, deadline per member]: the page ends before the
-- member that would pass max_bytes, and always holds one.
local out, used = {0}, 0
for i, member in ipairs(candidates) do
  if i > limit then
    out[1] = 1
    break
  end
  local value = keys_only and '' or (redis.call('HGET', values, member[1]) or '')
  local entry = #member[1] + #value + overhead
  if used > 0 and used + entry > max_bytes then
    out[1] = 1
    break
  end
  used = used + entry
  out[#out + 1] = member[1]
  out[#out + 1] = value
  out[#out + 1] = member[2]
end
index()
return out
)lua";

// collection_info(values, deadlines): {members, members with a deadline,
// the earliest deadline or -1}.
constexpr absl::string_view kCollectionInfo = R"lua(
local function collection_info(values, deadlines)
  local first = redis.call('ZRANGE', deadlines, 0, 0, 'WITHSCORES')
  return {redis.call('HLEN', values), redis.call('ZCARD', deadlines),
          first[2] and tonumber(first[2]) or -1}
end
)lua";

constexpr absl::string_view kGetCollection = R"lua(
local info = collection_info(values, deadlines)
index()
if info[1] == 0 then
  return redis.error_reply('NOT_FOUND collection "' .. collection .. '" not found')
end
return info
)lua";

constexpr absl::string_view kDeleteCollection = R"lua(
local removed = redis.call('HLEN', values)
redis.call('DEL', values, deadlines, key_index)
if removed > 0 then redis.call('DECRBY', members, removed) end
index()
return removed
)lua";

constexpr absl::string_view kListCollections = R"lua(
local collections, due, events, sequence, members = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local retention, wake, name_prefix = ARGV[2], ARGV[3], ARGV[4]
local from, want = ARGV[5], tonumber(ARGV[6])
-- Candidate i (ARGV[first_candidate + i]) has its three keys from
-- KEYS[first_key + 3i].
local first_candidate, first_key = 7, 6
local declared = {}
for i = first_candidate, #ARGV do
  declared[ARGV[i]] = first_key + (i - first_candidate) * 3
end
local out, need, reaped, past_prefix = {}, {}, 0, false
while #out < want and #need == 0 and not past_prefix do
  local names = redis.call('ZRANGEBYLEX', collections, from, '+', 'LIMIT', 0, want - #out)
  if #names == 0 then break end
  for i, name in ipairs(names) do
    if string.sub(name, 1, #name_prefix) ~= name_prefix then
      past_prefix = true
      break
    end
    local k = declared[name]
    if not k then
      -- Its keys are not declared: the next call declares them, and the
      -- rest of these names with the prefix.
      for j = i, #names do
        if string.sub(names[j], 1, #name_prefix) ~= name_prefix then break end
        need[#need + 1] = names[j]
      end
      break
    end
    local values, deadlines, key_index = KEYS[k], KEYS[k + 1], KEYS[k + 2]
    local earliest = redis.call('ZSCORE', due, name)
    if earliest and tonumber(earliest) <= now_floor then
      reaped = reaped + reap_members(values, deadlines, key_index, events, sequence, members, name,
                                     retention, false)
      index_collection(values, deadlines, due, collections, name)
    end
    local info = collection_info(values, deadlines)
    if info[1] > 0 then out[#out + 1] = {name, info[1], info[2], info[3]} end
    from = '(' .. name
  end
end
-- Events emitted: the reaper advances the partition's delivery watermark.
if reaped > 0 then redis.call('SPUBLISH', wake, 'due ' .. now_floor) end
return {out, from, need}
)lua";

// A script on one collection: the time, the shared reap, the prelude, then
// `body` as a function, whose answer the epilogue returns with the last
// sequence it appended.
std::string CollectionScript(absl::string_view body) {
  return absl::StrCat(ScriptClockLua(), ReapLua(), kPrelude, "local function body()\n", body,
                      "\nend\n", kEpilogue);
}

}  // namespace

CollectionKeys::CollectionKeys(absl::string_view tag, absl::string_view collection)
    : CollectionKeys(PartitionKeys(tag), collection) {}

CollectionKeys::CollectionKeys(const PartitionKeys& partition, absl::string_view collection)
    : values(partition.ValuesOf(collection)),
      deadlines(partition.DeadlinesOf(collection)),
      due(partition.due),
      events(partition.events),
      sequence(partition.sequence),
      collections(partition.collections),
      key_index(partition.KeyIndexOf(collection)),
      members(partition.members) {}

std::vector<std::string> CollectionKeys::All() const {
  return {values, deadlines, due, events, sequence, collections, key_index, members};
}

const RedisScript& PutScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kPut));
  return *script;
}

const RedisScript& GetScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kGet));
  return *script;
}

const RedisScript& RemoveScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kRemove));
  return *script;
}

const RedisScript& ExpireScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kExpire));
  return *script;
}

const RedisScript& PersistScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kPersist));
  return *script;
}

const RedisScript& ListMembersScript() {
  static const RedisScript* const script =
      new RedisScript(CollectionScript(absl::StrCat(kBytesLess, kListMembers)));
  return *script;
}

const RedisScript& GetCollectionScript() {
  static const RedisScript* const script =
      new RedisScript(CollectionScript(absl::StrCat(kCollectionInfo, kGetCollection)));
  return *script;
}

const RedisScript& DeleteCollectionScript() {
  static const RedisScript* const script = new RedisScript(CollectionScript(kDeleteCollection));
  return *script;
}

const RedisScript& ListCollectionsScript() {
  static const RedisScript* const script =
      new RedisScript(absl::StrCat(ScriptClockLua(), ReapLua(), kCollectionInfo, kListCollections));
  return *script;
}

std::vector<std::string> ListCollectionsKeys(const PartitionKeys& partition,
                                             absl::Span<const std::string> candidates) {
  std::vector<std::string> keys = {partition.collections, partition.due, partition.events,
                                   partition.sequence, partition.members};
  partition.AppendCollectionKeys(candidates, keys);
  return keys;
}

}  // namespace lapse::redis

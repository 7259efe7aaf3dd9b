#include "server/storage/redis/group_scripts.h"

#include "absl/strings/str_cat.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

// After ScriptClockLua(): the group's keys, lease expiry, and the state
// every script may answer with (info).
constexpr absl::string_view kGroupPrelude = R"lua(
local ALL = KEYS
local G, POS, EV, PEND, READY, LEASES, HOLDER, COUNT = unpack(KEYS, 1, 8)
local DEAD, DEAD_BY, DEAD_AT, UNACKED, SEEN = unpack(KEYS, 9, 13)
local WAKE = string.sub(G, 1, -6) .. 'wake'
local name, max_dead = ARGV[2], tonumber(ARGV[3])

if redis.call('EXISTS', G) == 0 and not creating then
  return redis.error_reply('NOT_FOUND consumer group "' .. name .. '" does not exist')
end

local function field(f) return redis.call('HGET', G, f) end

-- Replicas waiting on the group poll it (something other than new events).
local function wake() redis.call('SPUBLISH', WAKE, 'readable') end

-- The lease on `id` ends: redelivery, or the dead letters after
-- max_deliveries while they have room.
local function release(id)
  local holder = redis.call('HGET', HOLDER, id)
  redis.call('ZREM', LEASES, id)
  redis.call('HDEL', HOLDER, id)
  redis.call('HINCRBY', UNACKED, holder, -1)
  local count = tonumber(redis.call('HGET', COUNT, id))
  if count >= tonumber(field('max_deliveries')) and redis.call('ZCARD', DEAD) < max_dead then
    redis.call('ZREM', PEND, id)
    redis.call('ZADD', DEAD, id, id)
    redis.call('HSET', DEAD_BY, id, holder)
    redis.call('HSET', DEAD_AT, id, now_floor)
  else
    redis.call('ZADD', READY, id, id)
  end
end

if not creating then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now_floor)) do release(id) end
end

-- `reads`: the last sequence of each partition the asking replica's event
-- source has read, space-separated, in partition order (for the lag).
local function info(max_leases, reads)
  local fields = redis.call('HMGET', G, 'collections', 'prefix', 'include_values',
                            'visibility_ms', 'max_deliveries', 'max_unacked', 'bytes',
                            'delivered_total', 'acked_total', 'lost_total')
  local counts = {redis.call('ZCARD', PEND), redis.call('ZCARD', READY), redis.call('ZCARD', DEAD)}
  local consumers = {}
  local seen = redis.call('HGETALL', SEEN)
  for i = 1, #seen, 2 do
    consumers[#consumers + 1] = seen[i]
    consumers[#consumers + 1] = redis.call('HGET', UNACKED, seen[i]) or '0'
    consumers[#consumers + 1] = seen[i + 1]
  end
  local leases, listed, start = {}, 0, 0
  while listed < max_leases do
    local ids = redis.call('ZRANGE', PEND, start, start + 999)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local holder = redis.call('HGET', HOLDER, id)
      if holder then
        leases[#leases + 1] = id
        leases[#leases + 1] = holder
        leases[#leases + 1] = redis.call('HGET', COUNT, id)
        leases[#leases + 1] = redis.call('ZSCORE', LEASES, id)
        listed = listed + 1
        if listed == max_leases then break end
      end
    end
    start = start + 1000
  end
  local positions, position, lag, p = {}, 0, 0, 0
  local flat = redis.call('HGETALL', POS)
  for i = 1, #flat, 2 do
    positions[flat[i]] = tonumber(flat[i + 1])
    position = position + tonumber(flat[i + 1])
  end
  for read in string.gmatch(reads, '%d+') do
    local at = positions[tostring(p)] or 0
    if tonumber(read) > at then lag = lag + tonumber(read) - at end
    p = p + 1
  end
  return {fields, {position, lag}, counts, consumers, leases}
end

-- The earliest lease deadline (ms), -1 for none.
local function earliest_lease()
  local first = redis.call('ZRANGE', LEASES, 0, 0, 'WITHSCORES')
  return first[2] and tonumber(first[2]) or -1
end

local function set_positions(first)
  for i = first, #ARGV, 2 do
    if ARGV[i + 1] ~= '0' then redis.call('HSET', POS, ARGV[i], ARGV[i + 1]) end
  end
end
)lua";

constexpr absl::string_view kCreate = R"lua(
if redis.call('EXISTS', G) == 1 then
  return redis.error_reply('ALREADY_EXISTS consumer group "' .. name ..
                           '" already exists; delete it first or pick another name')
end
for _, key in ipairs(ALL) do redis.call('DEL', key) end
redis.call('HSET', G, 'incarnation', ARGV[4], 'collections', ARGV[5], 'prefix', ARGV[6],
           'include_values', ARGV[7], 'visibility_ms', ARGV[8], 'max_deliveries', ARGV[9],
           'max_unacked', ARGV[10], 'bytes', 0, 'delivered_total', 0, 'acked_total', 0,
           'lost_total', 0)
set_positions(12)
return info(0, ARGV[11])
)lua";

constexpr absl::string_view kInfo = R"lua(
return info(tonumber(ARGV[4]), ARGV[5])
)lua";

constexpr absl::string_view kDelete = R"lua(
local incarnation, before = field('incarnation'), info(0, ARGV[4])
for _, key in ipairs(ALL) do redis.call('DEL', key) end
wake()
return {incarnation, before}
)lua";

constexpr absl::string_view kReset = R"lua(
local bytes = tonumber(field('bytes'))
for _, id in ipairs(redis.call('ZRANGE', PEND, 0, -1)) do
  bytes = bytes - #redis.call('HGET', EV, id)
  redis.call('HDEL', EV, id)
  redis.call('HDEL', COUNT, id)
end
redis.call('DEL', PEND, READY, LEASES, HOLDER, UNACKED, POS)
redis.call('HSET', G, 'bytes', bytes)
set_positions(5)
wake()
return info(0, ARGV[4])
)lua";

constexpr absl::string_view kPollBegin = R"lua(
local unacked = tonumber(redis.call('HGET', UNACKED, ARGV[4]) or '0')
local allowed = tonumber(field('max_unacked'))
local want = unacked >= allowed and 0 or math.min(tonumber(ARGV[5]), allowed - unacked)
local room = tonumber(ARGV[6]) - redis.call('ZCARD', PEND)
local new = math.max(0, math.min(want - redis.call('ZCARD', READY), room))
return {field('incarnation'), field('collections'), field('prefix'), field('include_values'), new,
        redis.call('HGETALL', POS), earliest_lease()}
)lua";

constexpr absl::string_view kNextLease = R"lua(
return earliest_lease()
)lua";

constexpr absl::string_view kPollCommit = R"lua(
local consumer = ARGV[4]
if redis.call('HEXISTS', SEEN, consumer) == 0 and redis.call('HLEN', SEEN) >= tonumber(ARGV[6]) then
  -- Room for a new consumer: forget the one idle the longest, if one holds no lease.
  local seen = redis.call('HGETALL', SEEN)
  local idlest, idlest_at = false, 0
  for i = 1, #seen, 2 do
    local unacked = tonumber(redis.call('HGET', UNACKED, seen[i]) or '0')
    if unacked == 0 and (not idlest or tonumber(seen[i + 1]) < idlest_at) then
      idlest, idlest_at = seen[i], tonumber(seen[i + 1])
    end
  end
  if not idlest then
    return redis.error_reply(string.format(
      'RESOURCE_EXHAUSTED consumer group "%s" has %d consumers holding leases, the limit ' ..
      '(max_consumers_per_group); reuse a consumer name or wait for leases to end',
      name, #seen / 2))
  end
  redis.call('HDEL', SEEN, idlest)
  redis.call('HDEL', UNACKED, idlest)
end
redis.call('HSET', SEEN, consumer, now_floor)
local unacked = tonumber(redis.call('HGET', UNACKED, consumer) or '0')
local allowed = tonumber(field('max_unacked'))
local want = unacked >= allowed and 0 or math.min(tonumber(ARGV[5]), allowed - unacked)
local deadline = now_ceil + tonumber(field('visibility_ms'))
local max_pending, max_bytes = tonumber(ARGV[7]), tonumber(ARGV[8])
local max_response, overhead, largest = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local out, bytes, taken = {}, 0, 0

local function lease(id, count, blob)
  redis.call('HSET', HOLDER, id, consumer)
  redis.call('ZADD', LEASES, deadline, id)
  out[#out + 1] = id
  out[#out + 1] = count
  out[#out + 1] = blob
  taken = taken + 1
end

-- Redeliveries first, in id order; the answer holds at least one event.
if want > 0 then
  for _, id in ipairs(redis.call('ZRANGE', READY, 0, want - 1)) do
    local blob = redis.call('HGET', EV, id)
    local size = #blob + overhead
    if taken > 0 and bytes + size > max_response then break end
    bytes = bytes + size
    redis.call('ZREM', READY, id)
    lease(id, redis.call('HINCRBY', COUNT, id, 1), blob)
  end
end
-- New events only with room for the largest one.
local room = taken == 0 or (taken < want and redis.call('ZCARD', READY) == 0 and
                            bytes + largest <= max_response)
local same = field('incarnation') == ARGV[12]
local pending = redis.call('ZCARD', PEND)
local group_bytes = tonumber(field('bytes'))
local lost, stale, moved = {}, 0, 0
local a = 14
for _ = 1, tonumber(ARGV[13]) do
  local p, from, examined = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local lost_first, lost_last, n = tonumber(ARGV[a + 3]), ARGV[a + 4], tonumber(ARGV[a + 5])
  local first_event = a + 6
  a = a + 6 + 2 * n
  if room and same then
    if (redis.call('HGET', POS, p) or '0') ~= from then
      stale = stale + 1
    elseif lost_first == 0 or #lost == 0 then
      -- One loss per answer: a partition's later one is told by the next Poll.
      local position = from
      if lost_first > 0 then
        lost = {tonumber(p), lost_first, tonumber(lost_last)}
        redis.call('HINCRBY', G, 'lost_total', tonumber(lost_last) - lost_first + 1)
        position = lost_last
      end
      local all = true
      for i = first_event, first_event + 2 * n - 1, 2 do
        local id, blob = ARGV[i], ARGV[i + 1]
        local size = #blob + overhead
        if taken >= want or pending >= max_pending or group_bytes >= max_bytes or
           (taken > 0 and bytes + size > max_response) then
          all = false
          break
        end
        if redis.call('ZSCORE', DEAD, id) then
          group_bytes = group_bytes - #redis.call('HGET', EV, id)
          redis.call('ZREM', DEAD, id)
          redis.call('HDEL', DEAD_BY, id)
          redis.call('HDEL', DEAD_AT, id)
        end
        pending = pending + 1
        group_bytes = group_bytes + #blob
        bytes = bytes + size
        redis.call('HSET', EV, id, blob)
        redis.call('ZADD', PEND, id, id)
        redis.call('HSET', COUNT, id, 1)
        lease(id, 1, blob)
        position = string.format('%d', math.floor(tonumber(id) / 16384))
      end
      if all then position = examined end
      if position ~= from then
        redis.call('HSET', POS, p, position)
        moved = moved + 1
      end
    end
  end
end
redis.call('HSET', UNACKED, consumer, unacked + taken)
redis.call('HSET', G, 'bytes', group_bytes)
redis.call('HINCRBY', G, 'delivered_total', taken)
table.insert(out, 1, deadline)
table.insert(out, 2, lost)
table.insert(out, 3, stale)
table.insert(out, 4, moved)
return out
)lua";

constexpr absl::string_view kSettle = R"lua(
local consumer, op = ARGV[4], ARGV[5]
if redis.call('HEXISTS', SEEN, consumer) == 1 then redis.call('HSET', SEEN, consumer, now_floor) end
local deadline = now_ceil + tonumber(ARGV[6])
local out, freed = {}, false
for i = 7, #ARGV, 2 do
  local id, count = ARGV[i], ARGV[i + 1]
  local holder = redis.call('HGET', HOLDER, id)
  if not redis.call('ZSCORE', PEND, id) then
    local n = tonumber(id)
    local p = n % 16384
    local position = tonumber(redis.call('HGET', POS, string.format('%d', p)) or '0')
    out[#out + 1] = {(n - p) / 16384 > position and 1 or 2}
  elseif not holder then
    out[#out + 1] = {3}
  else
    local held = redis.call('HGET', COUNT, id)
    if holder ~= consumer or held ~= count then
      out[#out + 1] = {4, tonumber(held), holder}
    else
      if op == 'ack' then
        redis.call('ZREM', LEASES, id)
        redis.call('HDEL', HOLDER, id)
        redis.call('HINCRBY', UNACKED, consumer, -1)
        redis.call('HINCRBY', G, 'bytes', -#redis.call('HGET', EV, id))
        redis.call('HDEL', EV, id)
        redis.call('HDEL', COUNT, id)
        redis.call('ZREM', PEND, id)
        redis.call('HINCRBY', G, 'acked_total', 1)
      elseif op == 'nack' then
        release(id)
      else
        redis.call('ZADD', LEASES, deadline, id)
      end
      out[#out + 1] = {0}
      freed = freed or op ~= 'extend'
    end
  end
end
-- A consumer that acked or released leases may take more.
if freed then wake() end
return out
)lua";

constexpr absl::string_view kListDead = R"lua(
local size, max_response, overhead = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local ids = redis.call('ZRANGEBYSCORE', DEAD, '(' .. ARGV[4], '+inf', 'LIMIT', 0, size + 1)
local out, bytes, last = {''}, 0, false
for _, id in ipairs(ids) do
  local blob, by = redis.call('HGET', EV, id), redis.call('HGET', DEAD_BY, id)
  local entry = #blob + #by + overhead
  if (#out - 1) / 5 == size or (#out > 1 and bytes + entry > max_response) then
    out[1] = last
    break
  end
  bytes = bytes + entry
  out[#out + 1] = id
  out[#out + 1] = blob
  out[#out + 1] = redis.call('HGET', COUNT, id)
  out[#out + 1] = by
  out[#out + 1] = redis.call('HGET', DEAD_AT, id)
  last = id
end
return out
)lua";

constexpr absl::string_view kRedrive = R"lua(
local max_pending, redriven = tonumber(ARGV[4]), 0
local function redrive(id)
  redis.call('ZREM', DEAD, id)
  redis.call('HDEL', DEAD_BY, id)
  redis.call('HDEL', DEAD_AT, id)
  redis.call('HSET', COUNT, id, 0)
  redis.call('ZADD', PEND, id, id)
  redis.call('ZADD', READY, id, id)
  redriven = redriven + 1
end
if #ARGV < 5 then
  while redis.call('ZCARD', PEND) < max_pending do
    local first = redis.call('ZRANGE', DEAD, 0, 0)
    if #first == 0 then break end
    redrive(first[1])
  end
else
  for i = 5, #ARGV do
    if redis.call('ZCARD', PEND) >= max_pending then break end
    if redis.call('ZSCORE', DEAD, ARGV[i]) then redrive(ARGV[i]) end
  end
end
if redriven > 0 then wake() end
return redriven
)lua";

constexpr absl::string_view kIndex = R"lua(
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
)lua";

constexpr absl::string_view kReserve = R"lua(
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then
  return redis.error_reply('RESOURCE_EXHAUSTED ' .. count .. ' consumer groups exist, the limit ' ..
                           '(max_consumer_groups); delete one first')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
)lua";

constexpr absl::string_view kUnindex = R"lua(
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
)lua";

constexpr absl::string_view kReadPartition = R"lua(
local events, delivered = KEYS[1], KEYS[2]
local after = tonumber(ARGV[1])
local examine, want, max_bytes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local include_values, prefix = ARGV[5] == '1', ARGV[6]
local only = false
if #ARGV > 6 then
  only = {}
  for i = 7, #ARGV do only[ARGV[i]] = true end
end
local d = tonumber(redis.call('GET', delivered) or '0')
local out = {after, 0, 0}
if after >= d then return out end
local entries = redis.call('XRANGE', events, (after + 1) .. '-0', d .. '-0', 'COUNT', examine)
if #entries == 0 then
  -- Everything up to the watermark was trimmed (MAXLEN) before the group read it.
  return {d, after + 1, d}
end
local first = tonumber(string.match(entries[1][1], '^(%d+)'))
if first > after + 1 then
  out[2], out[3] = after + 1, first - 1
end
local matched, bytes, examined, cut = 0, 0, after, false
for _, e in ipairs(entries) do
  local f = e[2]
  local c = f[2]
  if (not only or only[c]) and string.sub(c, 1, #prefix) == prefix then
    local v = include_values and f[6] or ''
    local size = #c + #f[4] + #v
    if matched == want or (matched > 0 and bytes + size > max_bytes) then
      cut = true
      break
    end
    matched = matched + 1
    bytes = bytes + size
    out[#out + 1] = string.match(e[1], '^(%d+)')
    out[#out + 1] = c
    out[#out + 1] = f[4]
    out[#out + 1] = v
    out[#out + 1] = f[8]
    out[#out + 1] = f[10]
  end
  examined = tonumber(string.match(e[1], '^(%d+)'))
end
if not cut and #entries < examine then examined = d end
out[1] = examined
return out
)lua";

constexpr absl::string_view kPartitionStart = R"lua(
local d = tonumber(redis.call('GET', KEYS[2]) or '0')
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then return {d, 0} end
return {d, tonumber(string.match(first[1][1], '^(%d+)'))}
)lua";

const RedisScript* GroupScript(absl::string_view body, bool creating = false) {
  return new RedisScript(absl::StrCat(ScriptClockLua(), "local creating = ",
                                      creating ? "true" : "false", "\n", kGroupPrelude, body));
}

}  // namespace

GroupKeys::GroupKeys(absl::string_view name)
    : prefix(absl::StrCat("lapse:{g:", name, "}:")),
      group(absl::StrCat(prefix, "group")),
      wake(absl::StrCat(prefix, "wake")) {}

std::vector<std::string> GroupKeys::All() const {
  std::vector<std::string> keys = {group};
  for (absl::string_view suffix : {"pos", "ev", "pending", "ready", "leases", "holder", "count",
                                   "dead", "dead_by", "dead_at", "unacked", "seen"}) {
    keys.push_back(absl::StrCat(prefix, suffix));
  }
  return keys;
}

const RedisScript& CreateGroupScript() {
  static const RedisScript* const script = GroupScript(kCreate, /*creating=*/true);
  return *script;
}

const RedisScript& GroupInfoScript() {
  static const RedisScript* const script = GroupScript(kInfo);
  return *script;
}

const RedisScript& DeleteGroupScript() {
  static const RedisScript* const script = GroupScript(kDelete);
  return *script;
}

const RedisScript& ResetGroupScript() {
  static const RedisScript* const script = GroupScript(kReset);
  return *script;
}

const RedisScript& PollBeginScript() {
  static const RedisScript* const script = GroupScript(kPollBegin);
  return *script;
}

const RedisScript& PollCommitScript() {
  static const RedisScript* const script = GroupScript(kPollCommit);
  return *script;
}

const RedisScript& NextLeaseScript() {
  static const RedisScript* const script = GroupScript(kNextLease);
  return *script;
}

const RedisScript& SettleLeasesScript() {
  static const RedisScript* const script = GroupScript(kSettle);
  return *script;
}

const RedisScript& ListDeadLettersScript() {
  static const RedisScript* const script = GroupScript(kListDead);
  return *script;
}

const RedisScript& RedriveScript() {
  static const RedisScript* const script = GroupScript(kRedrive);
  return *script;
}

const RedisScript& IndexGroupScript() {
  static const RedisScript* const script = new RedisScript(std::string(kIndex));
  return *script;
}

const RedisScript& ReserveGroupScript() {
  static const RedisScript* const script = new RedisScript(std::string(kReserve));
  return *script;
}

const RedisScript& UnindexGroupScript() {
  static const RedisScript* const script = new RedisScript(std::string(kUnindex));
  return *script;
}

const RedisScript& ReadPartitionScript() {
  static const RedisScript* const script = new RedisScript(std::string(kReadPartition));
  return *script;
}

const RedisScript& PartitionStartScript() {
  static const RedisScript* const script = new RedisScript(std::string(kPartitionStart));
  return *script;
}

}  // namespace lapse::redis

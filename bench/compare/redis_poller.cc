#include "bench/compare/redis_poller.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/members.h"
#include "bench/common/stats.h"

namespace lapse {
namespace compare {
namespace {

using load::NowMicros;
using load::NowMillis;

// The poller's script. KEYS[1]: the deadline sorted set. ARGV: now (ms),
// limit, channel (or stream), "member", "batch" or "stream" (one XADD per
// member, field "e"). Returns how many members it removed.
// Members whose hash field is already gone (removed by a client) are dropped
// without a notification.
constexpr char kPollScript[] = R"lua(
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES',
                       'LIMIT', 0, tonumber(ARGV[2]))
local n = #due / 2
if n == 0 then return 0 end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
local groups, order = {}, {}
for i = 1, #due, 2 do
  local m = due[i]
  local tab = string.find(m, '\t', 1, true)
  local coll = string.sub(m, 1, tab - 1)
  local g = groups[coll]
  if g == nil then
    g = {keys = {}, deadlines = {}}
    groups[coll] = g
    order[#order + 1] = coll
  end
  g.keys[#g.keys + 1] = string.sub(m, tab + 1)
  g.deadlines[#g.deadlines + 1] = due[i + 1]
end
local out = {}
for _, coll in ipairs(order) do
  local g = groups[coll]
  local values = redis.call('HMGET', coll, unpack(g.keys))
  redis.call('HDEL', coll, unpack(g.keys))
  for j = 1, #g.keys do
    if values[j] then
      out[#out + 1] = coll .. '\t' .. g.keys[j] .. '\t' .. values[j] .. '\t' .. g.deadlines[j]
    end
  end
end
if ARGV[4] == 'member' then
  for _, line in ipairs(out) do redis.call('PUBLISH', ARGV[3], line) end
elseif ARGV[4] == 'stream' then
  for _, line in ipairs(out) do redis.call('XADD', ARGV[3], '*', 'e', line) end
elseif #out > 0 then
  redis.call('PUBLISH', ARGV[3], table.concat(out, '\n'))
end
return n
)lua";

}  // namespace

bool ParsePolledLine(absl::string_view line, size_t value_bytes, PolledMember* out) {
  std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
  if (f.size() != 4 || !load::IndexOfKey(f[1], &out->index) ||
      !absl::SimpleAtoi(f[3], &out->deadline_ms)) {
    return false;
  }
  out->value_ok = f[2] == load::ValueFor(out->index, value_bytes);
  return true;
}

absl::Status Poller::Start() {
  absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
  if (!conn.ok()) return conn.status();
  conn_ = std::move(*conn);
  ReplyPtr sha = conn_->Command({"SCRIPT", "LOAD", kPollScript});
  if (sha == nullptr || sha->type != REDIS_REPLY_STRING) {
    return absl::UnavailableError(
        absl::StrCat("SCRIPT LOAD: ", ReplyError(sha.get()), conn_->error()));
  }
  sha_.assign(sha->str, sha->len);
  thread_.Start([this] { Run(); });
  return absl::OkStatus();
}

void Poller::Stop() { thread_.Stop(); }

void Poller::Run() {
  const std::string limit = absl::StrCat(o_.poll_limit);
  const std::string key = o_.deadlines_key;
  const std::string channel = o_.channel;
  const char* publish = o_.publish == Publish::kMember   ? "member"
                        : o_.publish == Publish::kStream ? "stream"
                                                         : "batch";
  absl::Time next = absl::Now();
  while (true) {
    while (true) {
      const std::string now = absl::StrCat(NowMillis());
      const int64_t t0 = NowMicros();
      ReplyPtr reply = conn_->Command({"EVALSHA", sha_, "1", key, now, limit, channel, publish});
      busy_us_.fetch_add(NowMicros() - t0);
      calls_.fetch_add(1);
      if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
        errors_.fetch_add(1);
        absl::MutexLock lock(&mu_);
        if (first_error_.empty()) {
          first_error_ = absl::StrCat("poll: ", ReplyError(reply.get()), conn_->error());
        }
        if (reply == nullptr) return;
        break;
      }
      removed_.fetch_add(static_cast<uint64_t>(reply->integer));
      if (reply->integer < o_.poll_limit) break;
    }
    next += o_.poll_interval;
    const absl::Time now = absl::Now();
    if (next < now) next = now;  // Overran a tick: do not try to catch up.
    if (thread_.WaitForStop(next)) return;
  }
}

}  // namespace compare
}  // namespace lapse

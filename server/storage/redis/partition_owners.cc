#include "server/storage/redis/partition_owners.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/storage/crc32c.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {

std::vector<std::string> LiveReplicas(absl::Span<const ReplicaLease> leases, absl::Time now) {
  std::vector<std::string> live;
  for (const ReplicaLease& lease : leases) {
    if (lease.expires > now) live.push_back(lease.id);
  }
  std::sort(live.begin(), live.end());
  return live;
}

std::string OwnerOf(int partition, absl::Span<const std::string> live) {
  const std::string* best = nullptr;
  uint32_t best_weight = 0;
  for (const std::string& id : live) {
    const uint32_t weight = crc32c::Value(absl::StrCat(id, "/", partition));
    if (best == nullptr || weight > best_weight || (weight == best_weight && id < *best)) {
      best = &id;
      best_weight = weight;
    }
  }
  return best == nullptr ? "" : *best;
}

const RedisScript& HeartbeatScript() {
  static const RedisScript* const script = new RedisScript(absl::StrCat(ScriptClockLua(), R"lua(
if ARGV[4] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[2])
else
  redis.call('ZADD', KEYS[1], now_floor + tonumber(ARGV[3]), ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_floor)
local out = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
table.insert(out, 1, now_floor)
return out
)lua"));
  return *script;
}

}  // namespace lapse::redis

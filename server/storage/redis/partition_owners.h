// Which lapsed replica reaps which partition of the Redis Cluster store
// (docs/redis-cluster.md, "Expiry"). Every replica registers in the sorted
// set `lapse:{meta}:replicas` (replica id → when its registration expires,
// Unix ms) and renews it every heartbeat interval H for 3H; a replica whose
// registration expired is not live. Each partition is owned by one live
// replica, chosen by rendezvous hashing, so every replica that sees the same
// live set computes the same owners, and a replica's death moves only its
// own partitions.
//
//   std::vector<std::string> live = LiveReplicas(leases, now);
//   if (OwnerOf(partition, live) == my_id) ...reap it...
//
// Ownership only avoids redundant work: reaping a partition one does not
// own is safe (the reap script is atomic and idempotent).
//
// Pure functions; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_PARTITION_OWNERS_H_
#define LAPSE_SERVER_STORAGE_REDIS_PARTITION_OWNERS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/storage/redis/redis_script.h"

namespace lapse::redis {

// The set of registered replicas.
inline constexpr char kReplicasKey[] = "lapse:{meta}:replicas";

// A replica's registration, as the heartbeat script answers it.
struct ReplicaLease {
  std::string id;
  absl::Time expires;
};

// The ids of the leases not expired at `now`, sorted.
std::vector<std::string> LiveReplicas(absl::Span<const ReplicaLease> leases, absl::Time now);

// The owner of `partition` among `live`: the id with the highest CRC32C of
// "<id>/<partition>" (ties: the smaller id); "" when `live` is empty.
std::string OwnerOf(int partition, absl::Span<const std::string> live);

// KEYS = kReplicasKey; ARGV[2] = the replica id, ARGV[3] = the lease in ms,
// ARGV[4] = "renew" (registers or renews until now + lease) or "leave"
// (deregisters). Removes the registrations expired at the script's time and
// answers [that time in ms, id, expiry ms, id, expiry ms, ...].
const RedisScript& HeartbeatScript();

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_PARTITION_OWNERS_H_

// PartitionWakeups: subscribes to every partition's wake channel
// (`lapse:{T}:wake`, sharded pub/sub through ClusterRouter::Subscribe) and
// dispatches its messages (docs/redis-cluster.md, "Expiry"):
// - "due <unix ms>": a write moved the partition's earliest deadline earlier,
//   or emitted events → handlers.due(partition, time);
// - "delivered <sequence>": the partition's delivery watermark advanced →
//   handlers.delivered(partition, sequence);
// - the subscription was (re)established, after which messages published
//   while it was not are lost → handlers.subscribed(partition).
//
//   PartitionWakeups wakeups(router, tags, {.due = ..., .delivered = ...,
//                                           .subscribed = ...});
//
// Handlers run on the router's I/O thread, one at a time, and must not block.
// Once the destructor returned, none runs. Malformed messages are counted
// and dropped. Thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_PARTITION_WAKEUPS_H_
#define LAPSE_SERVER_STORAGE_REDIS_PARTITION_WAKEUPS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/storage/redis/cluster_router.h"

namespace lapse::redis {

class PartitionWakeups final {
 public:
  struct Handlers {
    std::function<void(int partition, absl::Time due)> due;
    std::function<void(int partition, uint64_t delivered)> delivered;
    std::function<void(int partition)> subscribed;
  };

  // `tags[p]` is partition p's hash tag. `router` must outlive the
  // subscriptions, which last as long as it.
  PartitionWakeups(ClusterRouter& router, absl::Span<const std::string> tags, Handlers handlers);
  ~PartitionWakeups();
  PartitionWakeups(const PartitionWakeups&) = delete;
  PartitionWakeups& operator=(const PartitionWakeups&) = delete;

  // Messages received, and those of them malformed.
  uint64_t messages() const;
  uint64_t malformed() const;

 private:
  struct State;
  const std::shared_ptr<State> state_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_PARTITION_WAKEUPS_H_

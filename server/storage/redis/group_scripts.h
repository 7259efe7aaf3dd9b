// The Lua scripts of the Redis Cluster store's consumer groups, and the keys
// they work on (docs/redis-cluster.md, "Consumer groups").
//
// A group's whole state lives under its own hash tag, `g:<name>`, so one
// script sees it atomically on one master: its options and counters, its
// position in every partition, its pending events (leased or awaiting
// redelivery) with their delivery counts and leases, its dead letters and its
// consumers. Events are copied into the group when a Poll leases them, and
// dropped when acknowledged. A group's event id is partition_sequence * 16384
// + partition (GroupEventId).
//
// The group scripts take KEYS = GroupKeys::All() and start with ARGV[1] =
// the time (script_clock.h), ARGV[2] = the group's name, ARGV[3] =
// Limits::max_group_dead_letters; each first releases the leases due at that
// time (to redelivery, or to the dead letters after max_deliveries while
// they have room), then does its work. An unknown group is NOT_FOUND.
// ReadPartitionScript runs on a partition's master and only reads.
//
//   router.Send(RedisCall::Eval(GroupInfoScript(), keys.All(), {time, name, limit, "10"}), done);
//
// Constant scripts; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_GROUP_SCRIPTS_H_
#define LAPSE_SERVER_STORAGE_REDIS_GROUP_SCRIPTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/storage/redis/redis_script.h"

namespace lapse::redis {

// A group's event id: one uint64 per event of the store, whatever its
// partition (at most 16384 partitions).
inline constexpr uint64_t kGroupIdPartitions = 16384;
inline uint64_t GroupEventId(uint64_t partition_sequence, int partition) {
  return partition_sequence * kGroupIdPartitions + static_cast<uint64_t>(partition);
}

struct GroupKeys {
  explicit GroupKeys(absl::string_view group);

  // "lapse:{g:<name>}:", the start of every key of the group.
  std::string prefix;
  // The group's hash: incarnation, filter, options, counters.
  std::string group;
  // Every key of the group, the hash first: what a group script declares
  // (partition_scripts.h says why it declares every key it touches).
  std::vector<std::string> All() const;
  // The group's sharded pub/sub channel: "readable" after an ack or nack of a
  // lease held, a re-drive, a reset or a delete.
  std::string wake;
};

// The index of groups by name, under {meta}: the sorted set
// lapse:{meta}:groups (every name, score 0) and the hash
// lapse:{meta}:group_ids (name -> incarnation).
struct GroupIndexKeys {
  std::string names = "lapse:{meta}:groups";
  std::string incarnations = "lapse:{meta}:group_ids";
};

// The state the scripts below answer with (GroupInfo): [fields (collections,
// prefix, include_values, visibility_ms, max_deliveries, max_unacked, bytes,
// delivered_total, acked_total, lost_total), [the sum of the partition
// positions, the lag], [pending, awaiting redelivery, dead-lettered],
// consumers (name, unacked, last seen ms triples), leases (id, consumer,
// delivery count, deadline ms quadruples)]. They take `reads`: the last
// sequence of each partition this replica's event source has read,
// space-separated in partition order; the lag is the sum over partitions of
// what it read beyond the group's position.
//
// ARGV[4...] = incarnation, collections (space-separated), prefix,
// include_values (0/1), visibility_ms, max_deliveries, max_unacked, reads,
// then (partition, position) pairs. ALREADY_EXISTS when the group exists.
// Answers the state.
const RedisScript& CreateGroupScript();
// ARGV[4] = leases to list at most, ARGV[5] = reads. Answers the state.
const RedisScript& GroupInfoScript();
// ARGV[4] = reads. Answers [incarnation, the state as it was], and deletes
// the group.
const RedisScript& DeleteGroupScript();
// ARGV[4] = reads, then (partition, position) pairs. Drops the pending
// events (not the dead letters) and sets the positions. Answers the state.
const RedisScript& ResetGroupScript();
// ARGV[4] = consumer, ARGV[5] = max_events, ARGV[6] = Limits::max_group_pending.
// Answers [incarnation, collections, prefix, include_values, how many new
// events the Poll may lease, positions (partition, position pairs), the
// earliest lease deadline (ms, -1 for none)].
const RedisScript& PollBeginScript();
// Answers the earliest lease deadline (ms, -1 for none).
const RedisScript& NextLeaseScript();
// ARGV[4] = consumer, [5] = max_events, [6] = max_consumers_per_group,
// [7] = max_group_pending, [8] = max_group_bytes, [9] = max_response_bytes,
// [10] = kResponseEntryOverhead, [11] = the answer bytes of the largest event,
// [12] = the incarnation PollBegin answered, [13] = number of blocks, then per
// partition read: partition, position read from, examined, lost first, lost
// last (0 0: none), n, then n (id, encoded event) pairs. Leases redeliveries
// first, then new events of the blocks whose partition position is still
// the one read from. Answers [lease deadline ms, lost ([] or [partition,
// first, last]), blocks refused because another Poll moved their position,
// blocks whose position this Poll moved, then (id, delivery count, encoded
// event) triples].
const RedisScript& PollCommitScript();
// ARGV[4] = consumer, [5] = "ack", "nack" or "extend", [6] = the extension
// (ms), then (id, delivery count) pairs. Answers per lease [0] done, [1] not
// delivered yet, [2] not pending, [3] awaiting redelivery, or [4, delivery
// count, consumer] held by another delivery.
const RedisScript& SettleLeasesScript();
// ARGV[4] = after (an id), [5] = page size, [6] = max_response_bytes,
// [7] = kResponseEntryOverhead. Answers [next after ("" for none), then
// (id, encoded event, delivery count, consumer, dead-lettered at ms)
// quintuples].
const RedisScript& ListDeadLettersScript();
// ARGV[4] = Limits::max_group_pending, then ids (none: every dead letter).
// Answers how many were made pending again.
const RedisScript& RedriveScript();

// KEYS = GroupIndexKeys {names, incarnations}; ARGV = name, incarnation.
// Add records the name; Remove forgets it only if its incarnation is still
// the one given (a group created again meanwhile stays listed).
const RedisScript& IndexGroupScript();
const RedisScript& UnindexGroupScript();
// ARGV = name, incarnation, Limits::max_consumer_groups: the room for a new
// group, taken atomically before the group is created, so that creates on
// many replicas at once never pass the limit. Answers 0 when the name is
// listed already (it holds its room: the create may find the group exists),
// else records it (as Add) and answers 1; RESOURCE_EXHAUSTED when the index
// holds the limit.
const RedisScript& ReserveGroupScript();

// KEYS = a partition's events and delivered (partition_scripts.h); ARGV =
// position, entries to examine at most, matching events at most, their
// bytes at most, include_values (0/1), prefix, then collections (none: any).
// Answers [examined, lost first, lost last (0 0: none), then (sequence,
// collection, key, value, deadline ms, expired at ms) per matching event]
// after the position, up to the partition's delivery watermark.
const RedisScript& ReadPartitionScript();

// KEYS = a partition's events and delivered. Answers [delivered, the
// stream's first sequence (0 when empty)]: where a group starts.
const RedisScript& PartitionStartScript();

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_GROUP_SCRIPTS_H_

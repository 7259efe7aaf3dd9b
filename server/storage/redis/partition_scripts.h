// The Lua scripts of the Redis Cluster store that work on a whole partition
// (docs/redis-cluster.md, "Expiry"), and the Lua that expires a collection's
// due members, shared with the collection scripts (collection_scripts.h) so
// a member expires the same way whoever finds it due.
//
//   const PartitionKeys keys(tag);
//   router.Send(RedisCall::Eval(ReapPartitionScript(), keys.ReapKeys(),
//                               {ScriptTimeArg(clock), retention, "1000", keys.prefix}),
//               done);
//
// Every script starts with ARGV[1] = the time (script_clock.h). Constant
// scripts; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_
#define LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/storage/redis/redis_script.h"

namespace lapse::redis {

// The keys of a partition; all carry its hash tag.
struct PartitionKeys {
  // `tag` is the partition's hash tag, without braces.
  explicit PartitionKeys(absl::string_view tag);

  // "lapse:{T}:": a collection C's keys are prefix + "v:" + C, prefix +
  // "d:" + C and prefix + "k:" + C (collection_scripts.h).
  std::string prefix;
  // The due index, the event stream, its sequence counter, the collection
  // list (collection_scripts.h).
  std::string due;
  std::string events;
  std::string sequence;
  std::string collections;
  // The delivery watermark: the highest sequence known to be replicated.
  std::string delivered;
  // The sequence the last watermark WAIT was asked to cover: written so that
  // WAIT, on the connection that wrote it, covers every write before it.
  std::string wait;
  // The sharded pub/sub channel of the partition: "due <unix ms>" and
  // "delivered <sequence>".
  std::string wake;

  // The keys of ReapPartitionScript, in its order.
  std::vector<std::string> ReapKeys() const;
};

// Lua defining, after ScriptClockLua():
// - reap_members(values, deadlines, key_index, events, sequence, collection,
//   retention, limit): expires up to `limit` (false: all) of the collection's members
//   due at now_floor, earliest first, each with one event in the partition's
//   stream (sequence = INCR, ID "<sequence>-0", fields c k v d x); returns
//   how many.
// - index_collection(values, deadlines, due, collections, collection): brings
//   the collection's entries in the due index and the collection list up to
//   date.
// - earliest_due(due): the partition's earliest deadline as a string, or
//   false when nothing in it has one.
absl::string_view ReapLua();

// Expires the partition's due members, at most ARGV[3] of them, collection
// by collection from the due index (ARGV[2] = the stream's retention,
// ARGV[4] = PartitionKeys::prefix). Answers [reaped, more (1 when members are
// still due), the earliest deadline left (ms, -1 for none), sequence,
// delivered]. When sequence > delivered it writes `wait`, so that a WAIT
// after it covers every event up to sequence. Atomic and idempotent: a
// second run at the same time finds nothing to expire.
const RedisScript& ReapPartitionScript();

// KEYS = delivered, ARGV[2] = a sequence WAIT confirmed replicated, ARGV[3] =
// the wake channel: delivered = max(delivered, ARGV[2]); when it moved,
// SPUBLISHes "delivered <sequence>". Answers the watermark.
const RedisScript& AdvanceWatermarkScript();

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_

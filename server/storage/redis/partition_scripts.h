// The Lua scripts of the Redis Cluster store that work on a whole partition
// (docs/redis-cluster.md, "Expiry"), and the Lua that expires a collection's
// due members, shared with the collection scripts (collection_scripts.h) so
// a member expires the same way whoever finds it due.
//
//   const PartitionKeys keys(tag);
//   std::vector<std::string> args = {ScriptTimeArg(clock), retention, "1000", "64"};
//   args.insert(args.end(), candidates.begin(), candidates.end());
//   router.Send(RedisCall::Eval(ReapPartitionScript(), keys.ReapKeys(candidates), args), done);
//
// Every script starts with ARGV[1] = the time (script_clock.h), and declares
// in KEYS every key it reads or writes: Redis Cluster routes a script, and
// answers TRYAGAIN while a resharding has split its keys between two nodes,
// by its declared keys alone, so a script touching an undeclared key could
// run on a node that lacks it and read it as empty or create it there.
// Constant scripts; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_
#define LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/storage/redis/redis_script.h"

namespace lapse::redis {

// The keys of a partition; all carry its hash tag.
struct PartitionKeys {
  // `tag` is the partition's hash tag, without braces.
  explicit PartitionKeys(absl::string_view tag);

  // "lapse:{T}:", the start of every key below.
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
  // The partition's live members (a counter; collection_scripts.h).
  std::string members;
  // The sharded pub/sub channel of the partition: "due <unix ms>" and
  // "delivered <sequence>".
  std::string wake;

  // A collection's keys (collection_scripts.h): its values, deadlines and
  // key index.
  std::string ValuesOf(absl::string_view collection) const;
  std::string DeadlinesOf(absl::string_view collection) const;
  std::string KeyIndexOf(absl::string_view collection) const;
  // Appends those three keys of each of `collections_of_call`, in its order.
  void AppendCollectionKeys(absl::Span<const std::string> collections_of_call,
                            std::vector<std::string>& keys) const;

  // The keys of ReapPartitionScript, in its order: due, events, sequence,
  // collections, delivered, wait, members, then each candidate's three.
  std::vector<std::string> ReapKeys(absl::Span<const std::string> candidates) const;
};

// Lua defining, after ScriptClockLua():
// - reap_members(values, deadlines, key_index, events, sequence, members,
//   collection, retention, limit): expires up to `limit` (false: all) of the collection's members
//   due at now_floor, earliest first, each with one event in the partition's
//   stream (sequence = INCR, ID "<sequence>-0", fields c k v d x), and
//   takes them off the partition's member count; returns how many.
// - index_collection(values, deadlines, due, collections, collection): brings
//   the collection's entries in the due index and the collection list up to
//   date.
// - earliest_due(due): the partition's earliest deadline as a string, or
//   false when nothing in it has one.
absl::string_view ReapLua();

// Expires the partition's due members, at most ARGV[3] of them, in the
// candidate collections (ARGV[5...], their keys declared by ReapKeys) that
// are due, in the candidates' order (ARGV[2] = the stream's retention).
// Answers [reaped, more (1 when members are still due), the earliest
// deadline left (ms, -1 for none), sequence, delivered, the next candidates:
// the first ARGV[4] collections of the due index, the due ones first]. A
// due collection that was no candidate is reaped by the next call, with the
// candidates this one answered. When sequence > delivered it writes `wait`,
// so that a WAIT after it covers every event up to sequence. Atomic and
// idempotent: a second run at the same time finds nothing to expire.
const RedisScript& ReapPartitionScript();

// KEYS = delivered, ARGV[2] = a sequence WAIT confirmed replicated, ARGV[3] =
// the wake channel: delivered = max(delivered, ARGV[2]); when it moved,
// SPUBLISHes "delivered <sequence>". Answers the watermark.
const RedisScript& AdvanceWatermarkScript();

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_PARTITION_SCRIPTS_H_

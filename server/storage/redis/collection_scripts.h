// The Lua scripts of the Redis Cluster store that work on one collection,
// and the keys they work on (docs/redis-cluster.md, "Data model").
//
// Every script but ListCollectionsScript (which works on a partition's
// list of collections, below) takes the keys of CollectionKeys, in that
// order, and starts with ARGV[1] = the time (script_clock.h: "" reads the
// master's TIME, the one clock of a partition), ARGV[2] = the collection's
// name, ARGV[3] = the partition stream's retention (MAXLEN ~). It first
// expires the collection's due members, each with its event in the
// partition's stream (sequence = INCR of the partition's counter, stream ID
// "<sequence>-0"; partition_scripts.h's ReapLua(), shared with the reaper),
// then does its own work and brings the partition's due index and
// collection list up to date. On the partition's wake channel
// (`lapse:{T}:wake`) it SPUBLISHes "due <ms>" when the partition's earliest
// deadline moved earlier, and "due <now>" when it expired members, so the
// reaper delivers their events. A script
// checks everything before it writes (a failing request writes nothing but
// the expiries it found due), and fails with an error reply whose first
// word is the canonical status code ("FAILED_PRECONDITION collection ...").
// Its reply is [answer, last]: the answer each script below describes, and
// the last sequence of the events it appended (0 when it appended none), so
// the store can deliver them before acknowledging a write.
// (ListCollectionsScript answers its answer alone.)
//
//   router.Send(RedisCall::Eval(PutScript(), keys.All(), {...}), done);
//
// Constant scripts; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_COLLECTION_SCRIPTS_H_
#define LAPSE_SERVER_STORAGE_REDIS_COLLECTION_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/redis_script.h"

namespace lapse::redis {

// The keys of one collection and of its partition; all share the partition's
// hash tag, so one script sees them atomically on one master.
struct CollectionKeys {
  // `tag` is the partition's hash tag, without braces.
  CollectionKeys(absl::string_view tag, absl::string_view collection);
  CollectionKeys(const PartitionKeys& partition, absl::string_view collection);

  // Member key → value (a hash).
  std::string values;
  // Member key → deadline in Unix ms (a sorted set; persistent members are
  // not in it).
  std::string deadlines;
  // The partition's due index: collection → its earliest deadline.
  std::string due;
  // The partition's expiry events (a stream) and its sequence counter.
  std::string events;
  std::string sequence;
  // The partition's collections with members (a sorted set, score 0).
  std::string collections;
  // The member keys (a sorted set, score 0): the key order of ListMembers,
  // which is Redis's byte order of equal scores.
  std::string key_index;
  // The partition's live members (a counter): every script that adds or
  // removes members keeps it exact, reaping included (ReapLua()).
  std::string members;

  std::vector<std::string> All() const;
};

// ARGV[4] = max_members (0: none), ARGV[5] = the partition's share of
// Limits::max_total_members (RESOURCE_EXHAUSTED, writing nothing, when its
// members would pass it), then per member five arguments: key,
// value, condition ("always", "absent", "present"), deadline kind ("none",
// "ttl" with milliseconds, "at" with Unix milliseconds, "keep") and its
// number ("0" when it has none). Answers one [outcome, deadline] per member:
// outcome 0 created, 1 replaced, 2 skipped; deadline in Unix ms, -1 for none.
const RedisScript& PutScript();

// ARGV[4], ARGV[5] = the refresh deadline's kind and number (as in
// PutScript; "none" reads only), ARGV[6] = Limits::max_response_bytes,
// ARGV[7] = kResponseEntryOverhead, then the keys. Answers per key [0] when
// not found, else [1, value, deadline]. RESOURCE_EXHAUSTED, refreshing
// nothing, when the answer would pass ARGV[6].
const RedisScript& GetScript();

// ARGV[4...] = the keys. Answers per key 1 if a live member was removed.
const RedisScript& RemoveScript();

// ARGV[4] = the condition ("always", "none": the member has no deadline,
// "some": it has one, "later", "earlier": the new deadline is later or
// earlier than its own; none counts as infinitely late), ARGV[5], ARGV[6] =
// the deadline's kind ("ttl" or "at") and number (as in PutScript), then the
// keys. Answers per key [outcome, deadline (-1 for none)]: outcome 0 updated,
// 1 condition not met (its deadline), 2 not found, 3 expired — the deadline
// was not after now, so the member expired at once, with its event.
const RedisScript& ExpireScript();

// ARGV[4...] = the keys. Answers per key 0 persisted (its deadline cleared),
// 1 it had none, 2 not found.
const RedisScript& PersistScript();

// ARGV[4] = the order ("key", or "deadline": by deadline then key, the
// persistent members last by key), ARGV[5] = the page size, ARGV[6] = "1"
// for keys only, ARGV[7] = Limits::max_response_bytes, ARGV[8] =
// kResponseEntryOverhead, ARGV[9] = "1" when the page starts after a member,
// ARGV[10] = that member's deadline ("none" when persistent; by deadline
// only), ARGV[11] = its key. Answers [more (1 when members follow), then per
// member key, value ("" for keys only), deadline (-1 for none)]. The page
// ends before the member that would pass ARGV[7]; it always holds one.
const RedisScript& ListMembersScript();

// Answers [members, members with a deadline, the earliest deadline (-1 for
// none)]; NOT_FOUND when the collection has no member.
const RedisScript& GetCollectionScript();

// Removes the collection's members, without events (its due members expire
// first, with theirs). Answers how many it removed.
const RedisScript& DeleteCollectionScript();

// On one partition (KEYS = ListCollectionsKeys): ARGV[2] = the stream's
// retention, ARGV[3] = PartitionKeys::wake, ARGV[4] = the name prefix,
// ARGV[5] = where to start, as ZRANGEBYLEX's min ("-", "[<prefix>" or
// "(<after>"), ARGV[6] = how many to answer at most, then the candidates:
// the collections whose keys ListCollectionsKeys declares. Answers [entries,
// from, need]: the entries are the partition's first collections from there
// whose names start with the prefix and that have a live member, each [name,
// members, members with a deadline, the earliest deadline (-1 for none)]; a
// collection with due members has them expired first, with their events, as
// every collection script does. It stops at the first collection that is no
// candidate: `need` then names it and those after it in its batch, and a
// call from `from`, for the entries still wanted, with them as the
// candidates goes on (`need` is empty when the answer is complete).
const RedisScript& ListCollectionsScript();
std::vector<std::string> ListCollectionsKeys(const PartitionKeys& partition,
                                             absl::Span<const std::string> candidates);

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_COLLECTION_SCRIPTS_H_

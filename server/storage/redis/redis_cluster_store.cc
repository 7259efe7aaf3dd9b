#include "server/storage/redis/redis_cluster_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/engine/validate.h"
#include "server/storage/crc32c.h"
#include "server/storage/redis/collection_scripts.h"
#include "server/storage/redis/key_slot.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

constexpr absl::string_view kStoreName = "--store=redis-cluster";
// Where the partition count and the store's identity are recorded.
constexpr absl::string_view kMetaKey = "lapse:{meta}";

absl::Status NotYet(absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat(what, " is not yet supported by ", kStoreName));
}

// The status of an error reply: a script's errors start with a canonical
// code name; anything else is Redis's own.
absl::Status StatusOf(const RedisReply& error) {
  const std::pair<absl::string_view, absl::StatusCode> kCodes[] = {
      {"INVALID_ARGUMENT", absl::StatusCode::kInvalidArgument},
      {"FAILED_PRECONDITION", absl::StatusCode::kFailedPrecondition},
      {"RESOURCE_EXHAUSTED", absl::StatusCode::kResourceExhausted},
  };
  const std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(error.str, absl::MaxSplits(' ', 1));
  for (const auto& [name, code] : kCodes) {
    if (parts.first == name) return absl::Status(code, parts.second);
  }
  return absl::InternalError(absl::StrCat("Redis answered: ", error.str));
}

absl::Status Malformed(absl::string_view script) {
  return absl::InternalError(absl::StrCat("Redis answered the ", script, " script malformed"));
}

// A deadline in a script's answer: Unix ms, -1 for none.
absl::Time DeadlineIn(const RedisReply& r) {
  int64_t ms = r.integer;
  if (r.type != RedisReply::Type::kInteger && !absl::SimpleAtoi(r.str, &ms)) ms = -1;
  return ms < 0 ? NoDeadline() : TimeOfDeadline(ms);
}

// The two script arguments of a deadline (collection_scripts.h).
std::pair<std::string, std::string> DeadlineArgs(const Expiration& e) {
  switch (e.kind) {
    case Expiration::Kind::kTtl:
      return {"ttl",
              absl::StrCat(absl::ToInt64Milliseconds(absl::Ceil(e.ttl, absl::Milliseconds(1))))};
    case Expiration::Kind::kTime:
      return {"at", absl::StrCat(CeilMillis(e.time))};
    case Expiration::Kind::kNone:
      break;
  }
  return {"none", "0"};
}

// Calls `done` with `parse` of the reply, or with the error.
template <typename T, typename Parse>
ClusterRouter::Done Answer(StoreDone<T> done, Parse parse) {
  return [done = std::move(done), parse](absl::StatusOr<RedisReply> reply) mutable {
    if (!reply.ok()) {
      std::move(done)(reply.status());
    } else if (reply->type == RedisReply::Type::kError) {
      std::move(done)(StatusOf(*reply));
    } else {
      std::move(done)(parse(*reply));
    }
  };
}

// Hash tags for `partitions` partitions, the i-th in the i-th of as many
// equal slot ranges, so the partitions spread over the masters.
std::vector<std::string> SpreadTags(int partitions) {
  std::vector<std::string> tags;
  for (int p = 0; p < partitions; ++p) {
    const int64_t first = int64_t{p} * kClusterSlots / partitions;
    const int64_t end = int64_t{p + 1} * kClusterSlots / partitions;
    for (int attempt = 0;; ++attempt) {
      std::string tag = absl::StrCat("p", p, ".", attempt);
      const int slot = KeySlot(tag);
      if (slot >= first && slot < end) {
        tags.push_back(std::move(tag));
        break;
      }
    }
  }
  return tags;
}

absl::StatusOr<StoreId> ParseStoreId(absl::string_view hex) {
  StoreId id;
  if (hex.size() != 32 || !absl::SimpleHexAtoi(hex.substr(0, 16), &id.high) ||
      !absl::SimpleHexAtoi(hex.substr(16), &id.low)) {
    return absl::DataLossError(
        absl::StrCat("the store identity recorded in ", kMetaKey, " is malformed: \"", hex, "\""));
  }
  return id;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisClusterStore>> RedisClusterStore::Open(
    RedisClusterStoreOptions options) {
  if (options.partitions < 1 || options.partitions > kClusterSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("partitions: must be 1 to ", kClusterSlots, ", not ", options.partitions));
  }
  auto router = std::make_unique<ClusterRouter>(options.router);
  static const RedisScript* const kRecord = new RedisScript(R"lua(
redis.call('HSETNX', KEYS[1], 'partitions', ARGV[1])
redis.call('HSETNX', KEYS[1], 'store_id', ARGV[2])
return redis.call('HMGET', KEYS[1], 'partitions', 'store_id')
)lua");
  Mutex mu;
  CondVar answered;
  std::optional<absl::StatusOr<RedisReply>> meta;
  router->Send(RedisCall::Eval(*kRecord, {std::string(kMetaKey)},
                               {absl::StrCat(options.partitions), StoreId::Random().ToString()})
                   .WaitForReplicas(options.wait_replicas, options.wait_timeout),
               [&](absl::StatusOr<RedisReply> reply) {
                 MutexLock lock(&mu);
                 meta = std::move(reply);
                 answered.Signal();
               });
  {
    // The router answers within its retry budget, or fails.
    MutexLock lock(&mu);
    while (!meta.has_value()) answered.WaitWithTimeout(&mu, absl::InfiniteDuration());
  }
  if (!meta->ok()) return meta->status();
  const RedisReply& reply = **meta;
  if (reply.type == RedisReply::Type::kError) return StatusOf(reply);
  int partitions = 0;
  if (reply.elements.size() != 2 || !absl::SimpleAtoi(reply.elements[0].str, &partitions) ||
      partitions < 1 || partitions > kClusterSlots) {
    return absl::DataLossError(
        absl::StrCat("the partition count recorded in ", kMetaKey, " is malformed"));
  }
  absl::StatusOr<StoreId> id = ParseStoreId(reply.elements[1].str);
  if (!id.ok()) return id.status();
  std::vector<std::string> tags = SpreadTags(partitions);
  absl::StatusOr<std::unique_ptr<RedisEventSource>> events =
      RedisEventSource::Open(router.get(), {.store_id = *id,
                                            .tags = tags,
                                            .max_events = options.event_buffer_events,
                                            .max_bytes = options.event_buffer_bytes,
                                            .on_readable = options.on_events_readable,
                                            .on_append = options.on_event});
  if (!events.ok()) return events.status();
  return std::unique_ptr<RedisClusterStore>(new RedisClusterStore(
      std::move(options), std::move(router), std::move(tags), std::move(*events)));
}

RedisClusterStore::RedisClusterStore(RedisClusterStoreOptions options,
                                     std::unique_ptr<ClusterRouter> router,
                                     std::vector<std::string> tags,
                                     std::unique_ptr<RedisEventSource> events)
    : options_(std::move(options)),
      router_(std::move(router)),
      tags_(std::move(tags)),
      events_(std::move(events)),
      partition_calls_(new std::atomic<uint64_t>[tags_.size()]()) {
  if (options_.reap) {
    reaper_ = std::make_unique<Reaper>(
        *router_, tags_,
        ReaperOptions{.wait_replicas = options_.wait_replicas,
                      .wait_timeout = options_.wait_timeout,
                      .event_retention = options_.event_retention,
                      .heartbeat_interval = options_.heartbeat_interval,
                      .clock = options_.reaper_clock,
                      .script_clock = options_.script_clock,
                      .advance = [events = events_.get()](int partition, uint64_t delivered) {
                        events->Advance(partition, delivered);
                      }});
  }
}

RedisClusterStore::~RedisClusterStore() = default;

void RedisClusterStore::WakeReaperForTesting() {
  if (reaper_ != nullptr) reaper_->Wake();
}

int RedisClusterStore::PartitionOf(absl::string_view collection) const {
  return static_cast<int>(crc32c::Value(collection) % tags_.size());
}

std::vector<uint64_t> RedisClusterStore::PartitionCalls() const {
  std::vector<uint64_t> calls(tags_.size());
  for (size_t p = 0; p < calls.size(); ++p) {
    calls[p] = partition_calls_[p].load(std::memory_order_relaxed);
  }
  return calls;
}

RedisCall RedisClusterStore::CollectionCall(const RedisScript& script, absl::string_view collection,
                                            std::vector<std::string> args) const {
  const int partition = PartitionOf(collection);
  partition_calls_[partition].fetch_add(1, std::memory_order_relaxed);
  const CollectionKeys keys(TagOf(partition), collection);
  args.insert(args.begin(), {ScriptTimeArg(options_.script_clock), std::string(collection),
                             absl::StrCat(options_.event_retention)});
  return RedisCall::Eval(script, keys.All(), std::move(args));
}

void RedisClusterStore::PutMembers(absl::string_view collection,
                                   absl::Span<const MemberWrite> writes, const PutOptions& options,
                                   StoreDone<std::vector<PutResult>> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = ValidateName("collection", collection, limits);
  if (valid.ok()) {
    valid = ValidateKeyList(
        "members", writes.size(), [&](size_t i) { return writes[i].key; }, ".key", limits);
  }
  const absl::Time now = options_.clock->Now();
  if (valid.ok()) {
    valid = DeadlineOf(options.default_expiration, "default_", now, PastDeadline::kRejected, limits)
                .status();
  }
  for (size_t i = 0; i < writes.size() && valid.ok(); ++i) {
    const MemberWrite& w = writes[i];
    valid = ValidateMemberWrite(i, w.value, w.expiration, w.keep_expiration, now, limits).status();
  }
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::vector<std::string> args = {absl::StrCat(options.max_members)};
  args.reserve(1 + 5 * writes.size());
  for (const MemberWrite& w : writes) {
    args.emplace_back(w.key);
    args.emplace_back(w.value);
    args.emplace_back(w.condition == PutCondition::kIfAbsent    ? "absent"
                      : w.condition == PutCondition::kIfPresent ? "present"
                                                                : "always");
    const bool takes_default = w.expiration.kind == Expiration::Kind::kNone;
    std::pair<std::string, std::string> deadline =
        w.keep_expiration ? std::pair<std::string, std::string>{"keep", "0"}
                          : DeadlineArgs(takes_default ? options.default_expiration : w.expiration);
    args.push_back(std::move(deadline.first));
    args.push_back(std::move(deadline.second));
  }
  const size_t n = writes.size();
  router_->Send(CollectionCall(PutScript(), collection, std::move(args))
                    .WaitForReplicas(options_.wait_replicas, options_.wait_timeout),
                Answer(std::move(done),
                       [n](const RedisReply& reply) -> absl::StatusOr<std::vector<PutResult>> {
                         if (reply.elements.size() != n) return Malformed("put");
                         std::vector<PutResult> results;
                         for (const RedisReply& r : reply.elements) {
                           if (r.elements.size() != 2) return Malformed("put");
                           const PutOutcome outcome =
                               r.elements[0].integer == 0   ? PutOutcome::kCreated
                               : r.elements[0].integer == 1 ? PutOutcome::kReplaced
                                                            : PutOutcome::kSkipped;
                           results.push_back({outcome, DeadlineIn(r.elements[1])});
                         }
                         return results;
                       }));
}

void RedisClusterStore::GetMembers(absl::string_view collection,
                                   absl::Span<const absl::string_view> keys,
                                   const Expiration& refresh,
                                   StoreDone<std::vector<GetResult>> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = ValidateName("collection", collection, limits);
  if (valid.ok()) valid = ValidateKeys(keys, limits);
  if (valid.ok()) {
    valid = DeadlineOf(refresh, "refresh_", options_.clock->Now(), PastDeadline::kRejected, limits)
                .status();
  }
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::pair<std::string, std::string> deadline = DeadlineArgs(refresh);
  std::vector<std::string> args = {std::move(deadline.first), std::move(deadline.second),
                                   absl::StrCat(limits.max_response_bytes),
                                   absl::StrCat(kResponseEntryOverhead)};
  for (absl::string_view key : keys) args.emplace_back(key);
  RedisCall call = CollectionCall(GetScript(), collection, std::move(args));
  call = refresh.kind == Expiration::Kind::kNone
             ? std::move(call).Idempotent()
             : std::move(call).WaitForReplicas(options_.wait_replicas, options_.wait_timeout);
  const size_t n = keys.size();
  router_->Send(std::move(call),
                Answer(std::move(done),
                       [n](const RedisReply& reply) -> absl::StatusOr<std::vector<GetResult>> {
                         if (reply.elements.size() != n) return Malformed("get");
                         std::vector<GetResult> results(n);
                         for (size_t i = 0; i < n; ++i) {
                           const RedisReply& r = reply.elements[i];
                           if (r.elements.empty()) return Malformed("get");
                           if (r.elements[0].integer == 0) continue;
                           if (r.elements.size() != 3) return Malformed("get");
                           results[i] = {true, r.elements[1].str, DeadlineIn(r.elements[2])};
                         }
                         return results;
                       }));
}

void RedisClusterStore::RemoveMembers(absl::string_view collection,
                                      absl::Span<const absl::string_view> keys,
                                      StoreDone<std::vector<bool>> done) {
  absl::Status valid = ValidateName("collection", collection, options_.limits);
  if (valid.ok()) valid = ValidateKeys(keys, options_.limits);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::vector<std::string> args(keys.begin(), keys.end());
  const size_t n = keys.size();
  router_->Send(
      CollectionCall(RemoveScript(), collection, std::move(args))
          .WaitForReplicas(options_.wait_replicas, options_.wait_timeout),
      Answer(std::move(done), [n](const RedisReply& reply) -> absl::StatusOr<std::vector<bool>> {
        if (reply.elements.size() != n) return Malformed("remove");
        std::vector<bool> removed;
        for (const RedisReply& r : reply.elements) removed.push_back(r.integer == 1);
        return removed;
      }));
}

void RedisClusterStore::ExpireMembers(absl::string_view, absl::Span<const absl::string_view>,
                                      const Expiration&, ExpireCondition,
                                      StoreDone<std::vector<ExpireResult>> done) {
  std::move(done)(NotYet("ExpireMembers"));
}

void RedisClusterStore::PersistMembers(absl::string_view, absl::Span<const absl::string_view>,
                                       StoreDone<std::vector<PersistOutcome>> done) {
  std::move(done)(NotYet("PersistMembers"));
}

void RedisClusterStore::ListMembers(absl::string_view, const ListMembersOptions&,
                                    StoreDone<MemberPage> done) {
  std::move(done)(NotYet("ListMembers"));
}

void RedisClusterStore::GetCollection(absl::string_view, StoreDone<CollectionInfo> done) {
  std::move(done)(NotYet("GetCollection"));
}

void RedisClusterStore::ListCollections(absl::string_view, int, absl::string_view,
                                        StoreDone<CollectionPage> done) {
  std::move(done)(NotYet("ListCollections"));
}

void RedisClusterStore::DeleteCollection(absl::string_view, StoreDone<uint64_t> done) {
  std::move(done)(NotYet("DeleteCollection"));
}

const EventSource& RedisClusterStore::events() const { return *events_; }

void RedisClusterStore::CreateConsumerGroup(absl::string_view, const ConsumerGroupOptions&,
                                            const GroupStart&, StoreDone<ConsumerGroupInfo> done) {
  std::move(done)(NotYet("CreateConsumerGroup"));
}

void RedisClusterStore::GetConsumerGroup(absl::string_view, size_t,
                                         StoreDone<ConsumerGroupInfo> done) {
  std::move(done)(NotYet("GetConsumerGroup"));
}

void RedisClusterStore::ListConsumerGroups(int, absl::string_view,
                                           StoreDone<ConsumerGroups::Page> done) {
  std::move(done)(NotYet("ListConsumerGroups"));
}

void RedisClusterStore::DeleteConsumerGroup(absl::string_view, StoreDone<ConsumerGroupInfo> done) {
  std::move(done)(NotYet("DeleteConsumerGroup"));
}

void RedisClusterStore::ResetConsumerGroup(absl::string_view, const GroupStart&,
                                           StoreDone<ConsumerGroupInfo> done) {
  std::move(done)(NotYet("ResetConsumerGroup"));
}

void RedisClusterStore::Poll(absl::string_view, absl::string_view, size_t,
                             StoreDone<PollResult> done) {
  std::move(done)(NotYet("Poll"));
}

void RedisClusterStore::Ack(absl::string_view, absl::string_view, absl::Span<const LeaseRef>,
                            StoreDone<std::vector<absl::Status>> done) {
  std::move(done)(NotYet("Ack"));
}

void RedisClusterStore::Nack(absl::string_view, absl::string_view, absl::Span<const LeaseRef>,
                             StoreDone<std::vector<absl::Status>> done) {
  std::move(done)(NotYet("Nack"));
}

void RedisClusterStore::ExtendLeases(absl::string_view, absl::string_view,
                                     absl::Span<const LeaseRef>, absl::Duration,
                                     StoreDone<std::vector<absl::Status>> done) {
  std::move(done)(NotYet("ExtendLeases"));
}

void RedisClusterStore::ListDeadLetters(absl::string_view, uint64_t, int,
                                        StoreDone<DeadLetterPage> done) {
  std::move(done)(NotYet("ListDeadLetters"));
}

void RedisClusterStore::RedriveDeadLetters(absl::string_view, absl::Span<const uint64_t>,
                                           StoreDone<size_t> done) {
  std::move(done)(NotYet("RedriveDeadLetters"));
}

}  // namespace lapse::redis

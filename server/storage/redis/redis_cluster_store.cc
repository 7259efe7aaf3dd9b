#include "server/storage/redis/redis_cluster_store.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/engine/pages.h"
#include "server/engine/validate.h"
#include "server/storage/crc32c.h"
#include "server/storage/redis/collection_scripts.h"
#include "server/storage/redis/key_slot.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/script_clock.h"
#include "server/storage/redis/script_reply.h"

namespace lapse::redis {
namespace {

// Where the partition count and the store's identity are recorded.
constexpr absl::string_view kMetaKey = "lapse:{meta}";

// The checks of a request on `keys` of `collection`, as the engine's.
absl::Status CheckKeyedRequest(absl::string_view collection,
                               absl::Span<const absl::string_view> keys, const Limits& limits) {
  if (absl::Status s = ValidateName("collection", collection, limits); !s.ok()) return s;
  return ValidateKeys(keys, limits);
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

// An ExpireCondition as ExpireScript takes it.
absl::string_view ConditionArg(ExpireCondition condition) {
  switch (condition) {
    case ExpireCondition::kIfNoExpiration:
      return "none";
    case ExpireCondition::kIfHasExpiration:
      return "some";
    case ExpireCondition::kIfLater:
      return "later";
    case ExpireCondition::kIfEarlier:
      return "earlier";
    case ExpireCondition::kAlways:
      break;
  }
  return "always";
}

// The `n` answers of a script on `n` members, each read by `one` (a
// std::optional<T>, nullopt for an answer of the wrong shape).
template <typename T, typename One>
absl::StatusOr<std::vector<T>> EachMember(const RedisReply& reply, size_t n,
                                          absl::string_view script, One one) {
  if (reply.elements.size() != n) return Malformed(script);
  std::vector<T> results;
  results.reserve(n);
  for (const RedisReply& r : reply.elements) {
    std::optional<T> result = one(r);
    if (!result.has_value()) return Malformed(script);
    results.push_back(*std::move(result));
  }
  return results;
}

// [members, members with a deadline, the earliest deadline] of a collection,
// its name left empty.
absl::StatusOr<CollectionInfo> InfoIn(absl::Span<const RedisReply> counts) {
  if (counts.size() != 3 || counts[0].integer <= 0 || counts[1].integer < 0) {
    return Malformed("collection");
  }
  return CollectionInfo{.member_count = static_cast<uint64_t>(counts[0].integer),
                        .expiring_count = static_cast<uint64_t>(counts[1].integer),
                        .next_expire_time = DeadlineIn(counts[2])};
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
  if (reply.type == RedisReply::Type::kError) return StatusOfErrorReply(reply);
  int partitions = 0;
  if (reply.elements.size() != 2 || !absl::SimpleAtoi(reply.elements[0].str, &partitions) ||
      partitions < 1 || partitions > kClusterSlots) {
    return absl::DataLossError(
        absl::StrCat("the partition count recorded in ", kMetaKey, " is malformed"));
  }
  absl::StatusOr<StoreId> id = ParseStoreId(reply.elements[1].str);
  if (!id.ok()) return id.status();
  if (options.limits.max_total_members < static_cast<uint64_t>(partitions)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_total_members: %d is below the store's %d partitions, each of which holds its "
        "share of it",
        options.limits.max_total_members, partitions));
  }
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
      groups_(std::make_unique<RedisConsumerGroups>(
          router_.get(), &tags_, events_.get(),
          RedisConsumerGroupsOptions{.limits = options_.limits,
                                     .wait_replicas = options_.wait_replicas,
                                     .wait_timeout = options_.wait_timeout,
                                     .script_clock = options_.script_clock,
                                     .on_group_readable = options_.on_group_readable,
                                     .clock = options_.clock})),
      partition_calls_(new std::atomic<uint64_t>[tags_.size()]()) {
  if (options_.reap) {
    reaper_ = std::make_unique<Reaper>(
        *router_, tags_,
        ReaperOptions{.replica_id = options_.replica_id,
                      .wait_replicas = options_.wait_replicas,
                      .wait_timeout = options_.wait_timeout,
                      .event_retention = options_.event_retention,
                      .heartbeat_interval = options_.heartbeat_interval,
                      .clock = options_.reaper_clock,
                      .script_clock = options_.script_clock,
                      .advance = [events = events_.get()](
                                     int partition,
                                     uint64_t delivered) { events->Advance(partition, delivered); },
                      .deregister = options_.deregister});
  }
}

// One ListCollections page being merged from the answers of every
// partition; the last partition to finish merges them and calls `done`.
// Thread-safe.
class RedisClusterStore::CollectionMerge final {
 public:
  CollectionMerge(int partitions, size_t limit, size_t max_bytes, StoreDone<CollectionPage> done)
      : limit_(limit), max_bytes_(max_bytes), pending_(partitions), done_(std::move(done)) {}

  // Adds `entries` of a partition's answer, each [name, members, members
  // with a deadline, the earliest deadline]; false once the page failed.
  bool Add(const RedisReply& entries) {
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = Collect(entries);
    return status_.ok();
  }

  // A partition's part is complete, or failed with `status`.
  void Finish(absl::Status status) {
    absl::StatusOr<CollectionPage> page;
    StoreDone<CollectionPage> done;
    {
      MutexLock lock(&mu_);
      if (status_.ok()) status_ = std::move(status);
      if (--pending_ > 0) return;
      page = status_.ok() ? absl::StatusOr<CollectionPage>(
                                CollectionPageOf(std::move(candidates_), limit_, max_bytes_))
                          : status_;
      done = std::move(done_);
    }
    std::move(done)(std::move(page));
  }

 private:
  absl::Status Collect(const RedisReply& entries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const RedisReply& r : entries.elements) {
      if (r.elements.size() != 4) return Malformed("list collections");
      absl::StatusOr<CollectionInfo> info = InfoIn(absl::MakeConstSpan(r.elements).subspan(1));
      if (!info.ok()) return info.status();
      info->name = r.elements[0].str;
      candidates_.push_back(*std::move(info));
    }
    return absl::OkStatus();
  }

  const size_t limit_;
  const size_t max_bytes_;

  Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<CollectionInfo> candidates_ ABSL_GUARDED_BY(mu_);
  StoreDone<CollectionPage> done_ ABSL_GUARDED_BY(mu_);
};

struct RedisClusterStore::ListingRound {
  int partition = 0;
  std::string prefix;
  // ZRANGEBYLEX's min, and how many entries are still wanted.
  std::string from;
  size_t want = 0;
  std::vector<std::string> candidates;
  // Calls in a row that had candidates and got nowhere.
  int stalls = 0;
};

RedisClusterStore::~RedisClusterStore() {
  // Chained calls reach events_, which goes before router_, or send again.
  MutexLock lock(&chains_mu_);
  while (chains_in_flight_ > 0) {
    chains_done_.WaitWithTimeout(&chains_mu_, absl::InfiniteDuration());
  }
}

void RedisClusterStore::ChainStarted() {
  MutexLock lock(&chains_mu_);
  ++chains_in_flight_;
}

void RedisClusterStore::ChainEnded() {
  MutexLock lock(&chains_mu_);
  if (--chains_in_flight_ == 0) chains_done_.SignalAll();
}

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

template <typename T, typename Parse>
void RedisClusterStore::SendCollection(RedisCall call, absl::string_view collection,
                                       Delivery delivery, StoreDone<T> done, Parse parse) {
  const int partition = PartitionOf(collection);
  router_->Send(std::move(call), [this, partition, delivery, done = std::move(done),
                                  parse](absl::StatusOr<RedisReply> reply) mutable {
    if (absl::Status s = ReplyStatus(reply); !s.ok()) {
      std::move(done)(s);
      return;
    }
    if (reply->elements.size() != 2 || reply->elements[1].integer < 0) {
      std::move(done)(Malformed("collection"));
      return;
    }
    absl::StatusOr<T> result = parse(reply->elements[0]);
    const uint64_t appended = static_cast<uint64_t>(reply->elements[1].integer);
    if (delivery == Delivery::kByTheReaper || !result.ok() || appended == 0) {
      std::move(done)(std::move(result));
      return;
    }
    DeliverThen(partition, appended,
                [done = std::move(done), result = std::move(result)]() mutable {
                  std::move(done)(std::move(result));
                });
  });
}

template <typename T, typename Parse>
void RedisClusterStore::SendWrite(const RedisScript& script, absl::string_view collection,
                                  std::vector<std::string> args, StoreDone<T> done, Parse parse) {
  SendCollection(CollectionCall(script, collection, std::move(args))
                     .WaitForReplicas(options_.wait_replicas, options_.wait_timeout),
                 collection, Delivery::kBeforeAnswer, std::move(done), std::move(parse));
}

template <typename T, typename One>
void RedisClusterStore::SendKeyedWrite(const RedisScript& script, absl::string_view collection,
                                       absl::Span<const absl::string_view> keys,
                                       absl::string_view what, StoreDone<std::vector<T>> done,
                                       One one) {
  if (absl::Status valid = CheckKeyedRequest(collection, keys, options_.limits); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  const size_t n = keys.size();
  SendWrite(script, collection, {keys.begin(), keys.end()}, std::move(done),
            [n, what, one = std::move(one)](const RedisReply& reply) {
              return EachMember<T>(reply, n, what, one);
            });
}

void RedisClusterStore::DeliverThen(int partition, uint64_t sequence,
                                    absl::AnyInvocable<void() &&> then) {
  ChainStarted();
  const PartitionKeys keys(TagOf(partition));
  router_->Send(
      RedisCall::Eval(AdvanceWatermarkScript(), {keys.delivered},
                      {ScriptTimeArg(options_.script_clock), absl::StrCat(sequence), keys.wake}),
      [this, partition, sequence,
       then = std::move(then)](absl::StatusOr<RedisReply> reply) mutable {
        if (ReplyStatus(reply).ok()) {
          events_->Advance(partition, sequence);
          events_->WhenRead(partition, sequence, std::move(then));
        } else {
          // The reaper delivers them on its next pass.
          std::move(then)();
        }
        ChainEnded();
      });
}

uint64_t RedisClusterStore::MemberShareOf(int partition) const {
  const uint64_t total = options_.limits.max_total_members;
  const uint64_t count = tags_.size();
  return total / count + (static_cast<uint64_t>(partition) < total % count ? 1 : 0);
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
  std::vector<std::string> args = {absl::StrCat(options.max_members),
                                   absl::StrCat(MemberShareOf(PartitionOf(collection)))};
  args.reserve(2 + 5 * writes.size());
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
  SendWrite(PutScript(), collection, std::move(args), std::move(done),
            [n](const RedisReply& reply) {
              return EachMember<PutResult>(
                  reply, n, "put", [](const RedisReply& r) -> std::optional<PutResult> {
                    if (r.elements.size() != 2) return std::nullopt;
                    const PutOutcome outcome = r.elements[0].integer == 0   ? PutOutcome::kCreated
                                               : r.elements[0].integer == 1 ? PutOutcome::kReplaced
                                                                            : PutOutcome::kSkipped;
                    return PutResult{outcome, DeadlineIn(r.elements[1])};
                  });
            });
}

void RedisClusterStore::GetMembers(absl::string_view collection,
                                   absl::Span<const absl::string_view> keys,
                                   const Expiration& refresh,
                                   StoreDone<std::vector<GetResult>> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = CheckKeyedRequest(collection, keys, limits);
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
  SendCollection(
      std::move(call), collection,
      refresh.kind == Expiration::Kind::kNone ? Delivery::kByTheReaper : Delivery::kBeforeAnswer,
      std::move(done), [n](const RedisReply& reply) {
        return EachMember<GetResult>(
            reply, n, "get", [](const RedisReply& r) -> std::optional<GetResult> {
              if (r.elements.empty()) return std::nullopt;
              if (r.elements[0].integer == 0) return GetResult{};
              if (r.elements.size() != 3) return std::nullopt;
              return GetResult{true, r.elements[1].str, DeadlineIn(r.elements[2])};
            });
      });
}

void RedisClusterStore::RemoveMembers(absl::string_view collection,
                                      absl::Span<const absl::string_view> keys,
                                      StoreDone<std::vector<bool>> done) {
  SendKeyedWrite<bool>(RemoveScript(), collection, keys, "remove", std::move(done),
                       [](const RedisReply& r) { return std::optional<bool>(r.integer == 1); });
}

void RedisClusterStore::ExpireMembers(absl::string_view collection,
                                      absl::Span<const absl::string_view> keys,
                                      const Expiration& expiration, ExpireCondition condition,
                                      StoreDone<std::vector<ExpireResult>> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = CheckKeyedRequest(collection, keys, limits);
  if (valid.ok() && expiration.kind == Expiration::Kind::kNone) {
    valid = InvalidField("expiration", "one of ttl or expire_time is required");
  }
  if (valid.ok()) {
    valid =
        DeadlineOf(expiration, "", options_.clock->Now(), PastDeadline::kAllowed, limits).status();
  }
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::pair<std::string, std::string> deadline = DeadlineArgs(expiration);
  std::vector<std::string> args = {std::string(ConditionArg(condition)), std::move(deadline.first),
                                   std::move(deadline.second)};
  for (absl::string_view key : keys) args.emplace_back(key);
  const size_t n = keys.size();
  SendWrite(
      ExpireScript(), collection, std::move(args), std::move(done), [n](const RedisReply& reply) {
        return EachMember<ExpireResult>(
            reply, n, "expire", [](const RedisReply& r) -> std::optional<ExpireResult> {
              constexpr ExpireOutcome kOutcomes[] = {
                  ExpireOutcome::kUpdated, ExpireOutcome::kConditionNotMet,
                  ExpireOutcome::kNotFound, ExpireOutcome::kExpired};
              if (r.elements.size() != 2 || r.elements[0].integer < 0 ||
                  r.elements[0].integer > 3) {
                return std::nullopt;
              }
              return ExpireResult{kOutcomes[r.elements[0].integer], DeadlineIn(r.elements[1])};
            });
      });
}

void RedisClusterStore::PersistMembers(absl::string_view collection,
                                       absl::Span<const absl::string_view> keys,
                                       StoreDone<std::vector<PersistOutcome>> done) {
  SendKeyedWrite<PersistOutcome>(PersistScript(), collection, keys, "persist", std::move(done),
                                 [](const RedisReply& r) -> std::optional<PersistOutcome> {
                                   constexpr PersistOutcome kOutcomes[] = {
                                       PersistOutcome::kPersisted, PersistOutcome::kNoExpiration,
                                       PersistOutcome::kNotFound};
                                   if (r.integer < 0 || r.integer > 2) return std::nullopt;
                                   return kOutcomes[r.integer];
                                 });
}

void RedisClusterStore::ListMembers(absl::string_view collection, const ListMembersOptions& options,
                                    StoreDone<MemberPage> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = ValidateName("collection", collection, limits);
  if (valid.ok()) valid = ValidatePageSize(options.page_size);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  const bool by_key = options.order == MemberOrder::kKey;
  std::string after_deadline = "none";
  if (options.after.has_value() && options.after->expire_time != NoDeadline()) {
    after_deadline = absl::StrCat(FloorMillis(options.after->expire_time));
  }
  std::vector<std::string> args = {by_key ? "key" : "deadline",
                                   absl::StrCat(EffectivePageSize(options.page_size, limits)),
                                   options.keys_only ? "1" : "0",
                                   absl::StrCat(limits.max_response_bytes),
                                   absl::StrCat(kResponseEntryOverhead),
                                   options.after.has_value() ? "1" : "0",
                                   std::move(after_deadline),
                                   options.after.has_value() ? options.after->key : ""};
  SendCollection(
      CollectionCall(ListMembersScript(), collection, std::move(args)).Idempotent(), collection,
      Delivery::kByTheReaper, std::move(done),
      [](const RedisReply& reply) -> absl::StatusOr<MemberPage> {
        if (reply.elements.empty() || reply.elements.size() % 3 != 1) {
          return Malformed("list members");
        }
        MemberPage page;
        for (size_t i = 1; i < reply.elements.size(); i += 3) {
          page.members.push_back({reply.elements[i].str, reply.elements[i + 1].str,
                                  DeadlineIn(reply.elements[i + 2])});
        }
        if (reply.elements[0].integer == 1 && !page.members.empty()) {
          page.next = MemberCursor{page.members.back().expire_time, page.members.back().key};
        }
        return page;
      });
}

void RedisClusterStore::GetCollection(absl::string_view name, StoreDone<CollectionInfo> done) {
  if (absl::Status valid = ValidateName("name", name, options_.limits); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  SendCollection(
      CollectionCall(GetCollectionScript(), name, {}).Idempotent(), name, Delivery::kByTheReaper,
      std::move(done),
      [name = std::string(name)](const RedisReply& reply) -> absl::StatusOr<CollectionInfo> {
        absl::StatusOr<CollectionInfo> info = InfoIn(reply.elements);
        if (info.ok()) info->name = name;
        return info;
      });
}

void RedisClusterStore::ListCollections(absl::string_view prefix, int page_size,
                                        absl::string_view after, StoreDone<CollectionPage> done) {
  const Limits& limits = options_.limits;
  absl::Status valid = absl::OkStatus();
  if (!prefix.empty()) valid = ValidateName("prefix", prefix, limits);
  if (valid.ok()) valid = ValidatePageSize(page_size);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  const size_t limit = EffectivePageSize(page_size, limits);
  // ZRANGEBYLEX's min: the first name after `after` that can have the prefix.
  std::string from = "-";
  if (!after.empty() && after >= prefix) {
    from = absl::StrCat("(", after);
  } else if (!prefix.empty()) {
    from = absl::StrCat("[", prefix);
  }
  // Each partition answers its first limit + 1 live names; the page is the
  // first `limit` of their union, merged by the last partition to finish.
  auto merge = std::make_shared<CollectionMerge>(partitions(), limit, limits.max_response_bytes,
                                                 std::move(done));
  for (int p = 0; p < partitions(); ++p) {
    ListPartition(merge,
                  {.partition = p, .prefix = std::string(prefix), .from = from, .want = limit + 1});
  }
}

void RedisClusterStore::ListPartition(std::shared_ptr<CollectionMerge> merge, ListingRound round) {
  const PartitionKeys keys(TagOf(round.partition));
  std::vector<std::string> args = {ScriptTimeArg(options_.script_clock),
                                   absl::StrCat(options_.event_retention),
                                   keys.wake,
                                   round.prefix,
                                   round.from,
                                   absl::StrCat(round.want)};
  args.insert(args.end(), round.candidates.begin(), round.candidates.end());
  RedisCall call = RedisCall::Eval(ListCollectionsScript(),
                                   ListCollectionsKeys(keys, round.candidates), std::move(args))
                       .Idempotent();
  ChainStarted();
  router_->Send(std::move(call), [this, merge = std::move(merge), round = std::move(round)](
                                     absl::StatusOr<RedisReply> reply) mutable {
    // [entries, from, need] (collection_scripts.h).
    absl::Status status = ReplyStatus(reply);
    if (status.ok() &&
        (reply->elements.size() != 3 || reply->elements[0].type != RedisReply::Type::kArray ||
         reply->elements[2].type != RedisReply::Type::kArray)) {
      status = Malformed("list collections");
    }
    if (!status.ok()) {
      merge->Finish(std::move(status));
    } else if (merge->Add(reply->elements[0])) {
      const size_t listed = reply->elements[0].elements.size();
      std::string& from = reply->elements[1].str;
      std::vector<RedisReply>& need = reply->elements[2].elements;
      // A call with candidates that got nowhere met a name created since the
      // call before named them.
      const bool stalled = !round.candidates.empty() && listed == 0 && from == round.from;
      round.stalls = stalled ? round.stalls + 1 : 0;
      if (need.empty()) {
        merge->Finish(absl::OkStatus());
      } else if (round.stalls == 2) {
        merge->Finish(absl::AbortedError(
            absl::StrCat("collections were created in partition ", round.partition,
                         " faster than they could be listed; list again")));
      } else {
        round.want -= listed;
        round.from = std::move(from);
        round.candidates.clear();
        for (RedisReply& name : need) round.candidates.push_back(std::move(name.str));
        ListPartition(std::move(merge), std::move(round));
      }
    } else {
      merge->Finish(absl::OkStatus());
    }
    ChainEnded();
  });
}

void RedisClusterStore::DeleteCollection(absl::string_view name, StoreDone<uint64_t> done) {
  if (absl::Status valid = ValidateName("name", name, options_.limits); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  SendWrite(DeleteCollectionScript(), name, {}, std::move(done),
            [](const RedisReply& reply) -> absl::StatusOr<uint64_t> {
              if (reply.type != RedisReply::Type::kInteger || reply.integer < 0) {
                return Malformed("delete collection");
              }
              return static_cast<uint64_t>(reply.integer);
            });
}

const EventSource& RedisClusterStore::events() const { return *events_; }

void RedisClusterStore::CreateConsumerGroup(absl::string_view name,
                                            const ConsumerGroupOptions& options,
                                            const GroupStart& start,
                                            StoreDone<ConsumerGroupInfo> done) {
  groups_->Create(name, options, start, std::move(done));
}

void RedisClusterStore::GetConsumerGroup(absl::string_view name, size_t max_leases,
                                         StoreDone<ConsumerGroupInfo> done) {
  groups_->Get(name, max_leases, std::move(done));
}

void RedisClusterStore::ListConsumerGroups(int page_size, absl::string_view after,
                                           StoreDone<ConsumerGroups::Page> done) {
  groups_->List(page_size, after, std::move(done));
}

void RedisClusterStore::DeleteConsumerGroup(absl::string_view name,
                                            StoreDone<ConsumerGroupInfo> done) {
  groups_->Delete(name, std::move(done));
}

void RedisClusterStore::ResetConsumerGroup(absl::string_view name, const GroupStart& start,
                                           StoreDone<ConsumerGroupInfo> done) {
  groups_->Reset(name, start, std::move(done));
}

void RedisClusterStore::Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
                             StoreDone<PollResult> done) {
  groups_->Poll(group, consumer, max_events, std::move(done));
}

void RedisClusterStore::Ack(absl::string_view group, absl::string_view consumer,
                            absl::Span<const LeaseRef> leases,
                            StoreDone<std::vector<absl::Status>> done) {
  groups_->Ack(group, consumer, leases, std::move(done));
}

void RedisClusterStore::Nack(absl::string_view group, absl::string_view consumer,
                             absl::Span<const LeaseRef> leases,
                             StoreDone<std::vector<absl::Status>> done) {
  groups_->Nack(group, consumer, leases, std::move(done));
}

void RedisClusterStore::ExtendLeases(absl::string_view group, absl::string_view consumer,
                                     absl::Span<const LeaseRef> leases, absl::Duration extension,
                                     StoreDone<std::vector<absl::Status>> done) {
  groups_->ExtendLeases(group, consumer, leases, extension, std::move(done));
}

void RedisClusterStore::ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                                        StoreDone<DeadLetterPage> done) {
  groups_->ListDeadLetters(group, after, page_size, std::move(done));
}

void RedisClusterStore::RedriveDeadLetters(absl::string_view group,
                                           absl::Span<const uint64_t> sequences,
                                           StoreDone<size_t> done) {
  groups_->RedriveDeadLetters(group, sequences, std::move(done));
}

}  // namespace lapse::redis

#include "server/storage/redis/redis_consumer_groups.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/base/coding.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/engine/resume_token.h"
#include "server/engine/validate.h"
#include "server/storage/redis/group_scripts.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/script_clock.h"
#include "server/storage/redis/script_reply.h"

namespace lapse::redis {
namespace {

// Partitions one Poll reads at most, and the stream entries each read
// examines at most.
constexpr size_t kMaxReadsPerPoll = 8;
constexpr int kEntriesPerRead = 1000;
// A Poll that leased nothing but moved positions, or found them moved by
// another, starts again: at most this many times more than it takes to read
// every partition once.
constexpr int kMaxPollAttempts = 3;
// Wake channels a replica subscribes to, per max_consumer_groups: room for
// groups deleted and created again under new names.
constexpr size_t kMaxSubscriptionsPerGroupLimit = 4;
// A lease alarm that fired before the master saw the lease expire fires
// again this much later.
constexpr int64_t kAlarmRetryMs = 10;

int64_t IntOf(const RedisReply& r) {
  if (r.type == RedisReply::Type::kInteger) return r.integer;
  int64_t n = 0;
  return absl::SimpleAtoi(r.str, &n) ? n : 0;
}

uint64_t UintOf(const RedisReply& r) {
  if (r.type == RedisReply::Type::kInteger) return r.integer < 0 ? 0 : r.integer;
  uint64_t n = 0;
  return absl::SimpleAtoi(r.str, &n) ? n : 0;
}

// An event as a group keeps it: collection, key, value (length-prefixed),
// deadline and expired-at (Unix ms, varint).
std::string EncodeEvent(absl::string_view collection, absl::string_view key,
                        absl::string_view value, uint64_t deadline_ms, uint64_t expired_ms) {
  std::string out;
  PutLengthPrefixed(&out, collection);
  PutLengthPrefixed(&out, key);
  PutLengthPrefixed(&out, value);
  PutVarint64(&out, deadline_ms);
  PutVarint64(&out, expired_ms);
  return out;
}

absl::StatusOr<ExpiryEvent> DecodeEvent(uint64_t id, absl::string_view in) {
  absl::string_view collection, key, value;
  uint64_t deadline_ms = 0, expired_ms = 0;
  if (!GetLengthPrefixed(&in, &collection) || !GetLengthPrefixed(&in, &key) ||
      !GetLengthPrefixed(&in, &value) || !GetVarint64(&in, &deadline_ms) ||
      !GetVarint64(&in, &expired_ms) || !in.empty()) {
    return absl::DataLossError(absl::StrCat("the consumer group event ", id, " does not decode"));
  }
  return ExpiryEvent{.sequence = id,
                     .collection = std::string(collection),
                     .key = std::string(key),
                     .value = std::string(value),
                     .expire_time = TimeOfDeadline(static_cast<int64_t>(deadline_ms)),
                     .expired_at = TimeOfDeadline(static_cast<int64_t>(expired_ms))};
}

// (partition, position) pairs for a script, the non-zero ones.
void AppendPositions(const std::vector<uint64_t>& positions, std::vector<std::string>* args) {
  for (size_t p = 0; p < positions.size(); ++p) {
    if (positions[p] == 0) continue;
    args->push_back(absl::StrCat(p));
    args->push_back(absl::StrCat(positions[p]));
  }
}

// Positions from (partition, position) pairs.
std::vector<uint64_t> PositionsOf(const RedisReply& pairs, size_t partitions) {
  std::vector<uint64_t> positions(partitions, 0);
  for (size_t i = 0; i + 1 < pairs.elements.size(); i += 2) {
    const uint64_t p = UintOf(pairs.elements[i]);
    if (p < partitions) positions[p] = UintOf(pairs.elements[i + 1]);
  }
  return positions;
}

}  // namespace

struct RedisConsumerGroups::Subscriptions {
  Mutex mu;
  // Cleared by the destructor: nothing is announced after.
  bool alive ABSL_GUARDED_BY(mu) = true;
  absl::flat_hash_set<std::string> groups ABSL_GUARDED_BY(mu);
  std::function<void(absl::string_view group)> announce;

  void Announce(absl::string_view group) {
    MutexLock lock(&mu);
    if (alive && announce) announce(group);
  }
};

struct RedisConsumerGroups::PollState {
  std::string group;
  std::string consumer;
  size_t max_events = 0;
  int attempts = 0;
  StoreDone<PollResult> done;
};

RedisConsumerGroups::RedisConsumerGroups(ClusterRouter* router,
                                         const std::vector<std::string>* tags,
                                         const RedisEventSource* events,
                                         RedisConsumerGroupsOptions options)
    : router_(router),
      tags_(tags),
      events_(events),
      options_(std::move(options)),
      subscriptions_(std::make_shared<Subscriptions>()),
      alarms_(std::make_unique<Expirer>(ExpiryWork{.expire_due = [this] { FireDueAlarms(); },
                                                   .next_deadline = [this] { return NextAlarm(); }},
                                        options_.clock, &wakeup_)) {
  subscriptions_->announce = options_.on_group_readable;
}

RedisConsumerGroups::~RedisConsumerGroups() {
  // No alarm sends a call once this returns.
  alarms_.reset();
  {
    MutexLock lock(&subscriptions_->mu);
    subscriptions_->alive = false;
  }
  MutexLock lock(&mu_);
  while (in_flight_ > 0) calls_done_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
}

void RedisConsumerGroups::Send(RedisCall call, ClusterRouter::Done done) {
  {
    MutexLock lock(&mu_);
    ++in_flight_;
  }
  router_->Send(std::move(call),
                [this, done = std::move(done)](absl::StatusOr<RedisReply> reply) mutable {
                  std::move(done)(std::move(reply));
                  MutexLock lock(&mu_);
                  if (--in_flight_ == 0) calls_done_.SignalAll();
                });
}

void RedisConsumerGroups::FanOut(std::vector<RedisCall> calls,
                                 absl::AnyInvocable<void(Replies) &&> done) {
  if (calls.empty()) {
    std::move(done)(Replies());
    return;
  }
  struct Join {
    Mutex mu;
    Replies replies ABSL_GUARDED_BY(mu);
    size_t left ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void(Replies) &&> done;
  };
  auto join = std::make_shared<Join>();
  {
    MutexLock lock(&join->mu);
    join->replies.resize(calls.size(), absl::UnknownError("no reply"));
    join->left = calls.size();
  }
  join->done = std::move(done);
  for (size_t i = 0; i < calls.size(); ++i) {
    Send(std::move(calls[i]), [join, i](absl::StatusOr<RedisReply> reply) {
      Replies all;
      {
        MutexLock lock(&join->mu);
        join->replies[i] = std::move(reply);
        if (--join->left > 0) return;
        all = std::move(join->replies);
      }
      std::move(join->done)(std::move(all));
    });
  }
}

void RedisConsumerGroups::ArmLeaseAlarm(absl::string_view group, int64_t deadline_ms) {
  {
    MutexLock lock(&mu_);
    auto [it, added] = alarm_of_.try_emplace(group, deadline_ms);
    if (!added) {
      if (it->second <= deadline_ms) return;
      alarm_times_.erase({it->second, it->first});
      it->second = deadline_ms;
    }
    alarm_times_.insert({deadline_ms, it->first});
  }
  wakeup_.Listener()(TimeOfDeadline(deadline_ms));
}

void RedisConsumerGroups::FireDueAlarms() {
  const int64_t now_ms = FloorMillis(options_.clock->Now());
  std::vector<std::string> due;
  {
    MutexLock lock(&mu_);
    while (!alarm_times_.empty() && alarm_times_.begin()->first <= now_ms) {
      due.push_back(alarm_times_.begin()->second);
      alarm_of_.erase(due.back());
      alarm_times_.erase(alarm_times_.begin());
    }
  }
  for (const std::string& group : due) {
    Announce(group);
    // The group's next lease deadline, whoever holds it.
    Send(GroupCall(NextLeaseScript(), group, {}).Idempotent(),
         [this, group, now_ms](absl::StatusOr<RedisReply> next) {
           if (!next.ok() || next->type != RedisReply::Type::kInteger || next->integer < 0) return;
           // A deadline this replica's clock has passed and the master's has
           // not (their clocks differ): looked at again a little later.
           ArmLeaseAlarm(group, std::max(next->integer, now_ms + kAlarmRetryMs));
         });
  }
}

absl::Time RedisConsumerGroups::NextAlarm() const {
  MutexLock lock(&mu_);
  return alarm_times_.empty() ? absl::InfiniteFuture()
                              : TimeOfDeadline(alarm_times_.begin()->first);
}

void RedisConsumerGroups::Subscribe(absl::string_view group) {
  {
    MutexLock lock(&subscriptions_->mu);
    if (subscriptions_->groups.size() >=
            kMaxSubscriptionsPerGroupLimit * options_.limits.max_consumer_groups ||
        !subscriptions_->groups.emplace(group).second) {
      return;
    }
  }
  // A message may have been missed while not subscribed: announced then too.
  router_->Subscribe(
      GroupKeys(group).wake,
      [state = subscriptions_, group = std::string(group)](absl::string_view) {
        state->Announce(group);
      },
      [state = subscriptions_, group = std::string(group)] { state->Announce(group); });
}

void RedisConsumerGroups::FireDueAlarmsForTesting() { FireDueAlarms(); }

RedisCall RedisConsumerGroups::GroupCall(const RedisScript& script, absl::string_view group,
                                         std::vector<std::string> args) const {
  args.insert(args.begin(), {ScriptTimeArg(options_.script_clock), std::string(group),
                             absl::StrCat(options_.limits.max_group_dead_letters)});
  return RedisCall::Eval(script, GroupKeys(group).All(), std::move(args));
}

RedisCall RedisConsumerGroups::Durable(RedisCall call) const {
  return std::move(call).WaitForReplicas(options_.wait_replicas, options_.wait_timeout);
}

std::string RedisConsumerGroups::Reads() const {
  std::string reads;
  for (size_t p = 0; p < tags_->size(); ++p) {
    absl::StrAppend(&reads, p == 0 ? "" : " ", events_->read_sequence(static_cast<int>(p)));
  }
  return reads;
}

void RedisConsumerGroups::Announce(absl::string_view group) const {
  if (options_.on_group_readable) options_.on_group_readable(group);
}

absl::StatusOr<ConsumerGroupInfo> RedisConsumerGroups::InfoOf(absl::string_view name,
                                                              const RedisReply& state) const {
  if (state.elements.size() != 5 || state.elements[0].elements.size() != 10 ||
      state.elements[2].elements.size() != 3) {
    return Malformed("consumer group");
  }
  const std::vector<RedisReply>& f = state.elements[0].elements;
  ConsumerGroupInfo info;
  info.name = std::string(name);
  for (absl::string_view c : absl::StrSplit(f[0].str, ' ', absl::SkipEmpty())) {
    info.options.filter.collections.emplace(c);
  }
  info.options.filter.prefix = f[1].str;
  info.options.filter.include_values = f[2].str == "1";
  info.options.visibility_timeout = absl::Milliseconds(IntOf(f[3]));
  info.options.max_deliveries = static_cast<uint32_t>(IntOf(f[4]));
  info.options.max_unacked_per_consumer = static_cast<uint32_t>(IntOf(f[5]));
  info.bytes = static_cast<size_t>(std::max<int64_t>(0, IntOf(f[6])));
  info.delivered_total = UintOf(f[7]);
  info.acked_total = UintOf(f[8]);
  info.lost_sequences_total = UintOf(f[9]);
  if (state.elements[1].elements.size() != 2) return Malformed("consumer group");
  info.position = UintOf(state.elements[1].elements[0]);
  info.lag = UintOf(state.elements[1].elements[1]);
  const std::vector<RedisReply>& counts = state.elements[2].elements;
  info.pending = UintOf(counts[0]);
  info.awaiting_redelivery = UintOf(counts[1]);
  info.dead_lettered = UintOf(counts[2]);
  const std::vector<RedisReply>& consumers = state.elements[3].elements;
  for (size_t i = 0; i + 2 < consumers.size(); i += 3) {
    info.consumers.push_back({.name = consumers[i].str,
                              .unacked = UintOf(consumers[i + 1]),
                              .last_seen = TimeOfDeadline(IntOf(consumers[i + 2]))});
  }
  std::sort(info.consumers.begin(), info.consumers.end(),
            [](const ConsumerInfo& a, const ConsumerInfo& b) { return a.name < b.name; });
  const std::vector<RedisReply>& leases = state.elements[4].elements;
  for (size_t i = 0; i + 3 < leases.size(); i += 4) {
    info.leases.push_back({.sequence = UintOf(leases[i]),
                           .consumer = leases[i + 1].str,
                           .delivery_count = static_cast<uint32_t>(IntOf(leases[i + 2])),
                           .deadline = TimeOfDeadline(IntOf(leases[i + 3]))});
  }
  return info;
}

void RedisConsumerGroups::StartPositions(const GroupStart& start, StoreDone<Positions> done) {
  const size_t partitions = tags_->size();
  if (start.kind == GroupStart::Kind::kAfterSequence) {
    if (absl::Status s = events_->CheckPosition(start.after_sequence); !s.ok()) {
      std::move(done)(s);
      return;
    }
    absl::StatusOr<ResumePosition> at =
        DecodeResumeToken(events_->ResumeTokenAfter(start.after_sequence));
    if (!at.ok()) {
      std::move(done)(at.status());
      return;
    }
    Positions positions(partitions, 0);
    for (const PartitionPosition& p : at->partitions) {
      if (p.partition < partitions) positions[p.partition] = p.sequence;
    }
    std::move(done)(std::move(positions));
    return;
  }
  std::vector<RedisCall> calls;
  for (const std::string& tag : *tags_) {
    const PartitionKeys keys(tag);
    calls.push_back(
        RedisCall::Eval(PartitionStartScript(), {keys.events, keys.delivered}, {}).Idempotent());
  }
  const bool oldest = start.kind == GroupStart::Kind::kOldest;
  FanOut(std::move(calls), [oldest, done = std::move(done)](Replies replies) mutable {
    Positions positions;
    for (const absl::StatusOr<RedisReply>& reply : replies) {
      if (absl::Status s = ReplyStatus(reply); !s.ok()) {
        std::move(done)(s);
        return;
      }
      if (reply->elements.size() != 2) {
        std::move(done)(Malformed("partition start"));
        return;
      }
      const uint64_t delivered = UintOf(reply->elements[0]);
      const uint64_t first = UintOf(reply->elements[1]);
      // The oldest event a stream keeps is its first; an empty stream keeps
      // none up to the watermark.
      positions.push_back(oldest && first > 0 ? std::min(first - 1, delivered) : delivered);
    }
    std::move(done)(std::move(positions));
  });
}

void RedisConsumerGroups::Create(absl::string_view name, const ConsumerGroupOptions& options,
                                 const GroupStart& start, StoreDone<ConsumerGroupInfo> done) {
  absl::Status valid = ValidateName("name", name, options_.limits);
  if (valid.ok()) valid = ValidateConsumerGroupOptions(options, options_.limits);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::vector<std::string> collections(options.filter.collections.begin(),
                                       options.filter.collections.end());
  std::sort(collections.begin(), collections.end());
  // Names hold no spaces (ValidateName).
  std::vector<std::string> args = {
      absl::StrCat(absl::Hex(StoreId::Random().high, absl::kZeroPad16)),
      absl::StrJoin(collections, " "),
      options.filter.prefix,
      options.filter.include_values ? "1" : "0",
      absl::StrCat(absl::ToInt64Milliseconds(options.visibility_timeout)),
      absl::StrCat(options.max_deliveries),
      absl::StrCat(options.max_unacked_per_consumer)};
  const std::string incarnation = args[0];
  // Gives the room back when the group was certainly not created, then
  // answers `status`; the name stays listed only if its incarnation changed.
  auto give_back = [this, name = std::string(name), incarnation](
                       absl::Status status, StoreDone<ConsumerGroupInfo> done) {
    const GroupIndexKeys index;
    Send(Durable(RedisCall::Eval(UnindexGroupScript(), {index.names, index.incarnations},
                                 {name, incarnation})),
         [status = std::move(status), done = std::move(done)](absl::StatusOr<RedisReply>) mutable {
           // A name left in the index is skipped by List.
           std::move(done)(std::move(status));
         });
  };
  const GroupIndexKeys index;
  Send(Durable(RedisCall::Eval(
           ReserveGroupScript(), {index.names, index.incarnations},
           {std::string(name), incarnation, absl::StrCat(options_.limits.max_consumer_groups)})),
       [this, name = std::string(name), start, args = std::move(args), incarnation, give_back,
        done = std::move(done)](absl::StatusOr<RedisReply> reserved) mutable {
         if (!reserved.ok()) {
           // The reservation may have been made (e.g. its WAIT timed out);
           // the group was not created.
           give_back(ReplyStatus(reserved), std::move(done));
           return;
         }
         if (absl::Status s = ReplyStatus(reserved); !s.ok()) {
           std::move(done)(s);
           return;
         }
         // Else the name was listed already: it keeps the room it holds.
         const bool reserved_here = IntOf(*reserved) == 1;
         StartPositions(start, [this, name = std::move(name), args = std::move(args), incarnation,
                                give_back, reserved_here,
                                done = std::move(done)](absl::StatusOr<Positions> at) mutable {
           if (!at.ok()) {
             if (reserved_here) {
               give_back(at.status(), std::move(done));
             } else {
               std::move(done)(at.status());
             }
             return;
           }
           args.push_back(Reads());
           AppendPositions(*at, &args);
           Send(
               Durable(GroupCall(CreateGroupScript(), name, std::move(args))),
               [this, name, incarnation, give_back, reserved_here,
                done = std::move(done)](absl::StatusOr<RedisReply> reply) mutable {
                 if (absl::Status s = ReplyStatus(reply); !s.ok()) {
                   // Any other failure may have created the group: it keeps
                   // its room.
                   if (reserved_here && absl::IsAlreadyExists(s)) {
                     give_back(s, std::move(done));
                   } else {
                     std::move(done)(s);
                   }
                   return;
                 }
                 absl::StatusOr<ConsumerGroupInfo> info = InfoOf(name, *reply);
                 if (reserved_here) {
                   std::move(done)(std::move(info));
                   return;
                 }
                 // The name was listed already, perhaps with a gone group's
                 // incarnation: the index records this one's.
                 const GroupIndexKeys index;
                 Send(
                     Durable(RedisCall::Eval(IndexGroupScript(), {index.names, index.incarnations},
                                             {name, incarnation})),
                     [info = std::move(info),
                      done = std::move(done)](absl::StatusOr<RedisReply> indexed) mutable {
                       if (absl::Status s = ReplyStatus(indexed); !s.ok()) {
                         std::move(done)(absl::Status(
                             s.code(), absl::StrCat("the group was created but may not be listed: ",
                                                    s.message())));
                         return;
                       }
                       std::move(done)(std::move(info));
                     });
               });
         });
       });
}

void RedisConsumerGroups::Get(absl::string_view name, size_t max_leases,
                              StoreDone<ConsumerGroupInfo> done) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) {
    std::move(done)(s);
    return;
  }
  Send(GroupCall(GroupInfoScript(), name, {absl::StrCat(max_leases), Reads()}).Idempotent(),
       AnswerWith(std::move(done), [this, name = std::string(name)](const RedisReply& reply) {
         return InfoOf(name, reply);
       }));
}

void RedisConsumerGroups::List(int page_size, absl::string_view after,
                               StoreDone<ConsumerGroups::Page> done) {
  if (absl::Status s = ValidatePageSize(page_size); !s.ok()) {
    std::move(done)(s);
    return;
  }
  const size_t size = EffectivePageSize(page_size, options_.limits);
  const GroupIndexKeys index;
  Send(RedisCall::Command(index.names, {"ZRANGEBYLEX", index.names,
                                        after.empty() ? std::string("-") : absl::StrCat("(", after),
                                        "+", "LIMIT", "0", absl::StrCat(size + 1)})
           .Idempotent(),
       [this, size, done = std::move(done)](absl::StatusOr<RedisReply> names) mutable {
         if (absl::Status s = ReplyStatus(names); !s.ok()) {
           std::move(done)(s);
           return;
         }
         ConsumerGroups::Page page;
         std::vector<std::string> listed;
         for (const RedisReply& n : names->elements) {
           if (listed.size() == size) {
             page.next_after = listed.back();
             break;
           }
           listed.push_back(n.str);
         }
         std::vector<RedisCall> calls;
         const std::string reads = Reads();
         for (const std::string& name : listed) {
           calls.push_back(GroupCall(GroupInfoScript(), name, {"0", reads}).Idempotent());
         }
         FanOut(std::move(calls), [this, listed = std::move(listed), page = std::move(page),
                                   done = std::move(done)](Replies replies) mutable {
           for (size_t i = 0; i < replies.size(); ++i) {
             // A name whose group is gone (deleted meanwhile, or a
             // create that failed half-way) is left out.
             if (absl::Status s = ReplyStatus(replies[i]); absl::IsNotFound(s)) {
               continue;
             } else if (!s.ok()) {
               std::move(done)(s);
               return;
             }
             absl::StatusOr<ConsumerGroupInfo> info = InfoOf(listed[i], *replies[i]);
             if (!info.ok()) {
               std::move(done)(info.status());
               return;
             }
             page.groups.push_back(*std::move(info));
           }
           std::move(done)(std::move(page));
         });
       });
}

void RedisConsumerGroups::Delete(absl::string_view name, StoreDone<ConsumerGroupInfo> done) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) {
    std::move(done)(s);
    return;
  }
  Send(Durable(GroupCall(DeleteGroupScript(), name, {Reads()})),
       [this, name = std::string(name),
        done = std::move(done)](absl::StatusOr<RedisReply> reply) mutable {
         if (absl::Status s = ReplyStatus(reply); !s.ok()) {
           std::move(done)(s);
           return;
         }
         if (reply->elements.size() != 2) {
           std::move(done)(Malformed("delete group"));
           return;
         }
         absl::StatusOr<ConsumerGroupInfo> info = InfoOf(name, reply->elements[1]);
         // Its waiters learn that it is gone.
         Announce(name);
         const GroupIndexKeys index;
         Send(Durable(RedisCall::Eval(UnindexGroupScript(), {index.names, index.incarnations},
                                      {name, reply->elements[0].str})),
              [info = std::move(info), done = std::move(done)](absl::StatusOr<RedisReply>) mutable {
                // A name left in the index is skipped by List.
                std::move(done)(std::move(info));
              });
       });
}

void RedisConsumerGroups::Reset(absl::string_view name, const GroupStart& start,
                                StoreDone<ConsumerGroupInfo> done) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) {
    std::move(done)(s);
    return;
  }
  StartPositions(start, [this, name = std::string(name),
                         done = std::move(done)](absl::StatusOr<Positions> at) mutable {
    if (!at.ok()) {
      std::move(done)(at.status());
      return;
    }
    std::vector<std::string> args = {Reads()};
    AppendPositions(*at, &args);
    Send(Durable(GroupCall(ResetGroupScript(), name, std::move(args))),
         AnswerWith(std::move(done), [this, name](const RedisReply& reply) {
           absl::StatusOr<ConsumerGroupInfo> info = InfoOf(name, reply);
           if (info.ok()) Announce(name);
           return info;
         }));
  });
}

void RedisConsumerGroups::Poll(absl::string_view group, absl::string_view consumer,
                               size_t max_events, StoreDone<PollResult> done) {
  absl::Status valid = ValidateName("group", group, options_.limits);
  if (valid.ok()) valid = ValidateName("consumer", consumer, options_.limits);
  if (valid.ok() && max_events == 0) valid = InvalidField("max_events", "must be positive");
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  auto poll = std::make_shared<PollState>();
  poll->group = std::string(group);
  poll->consumer = std::string(consumer);
  poll->max_events = std::min(max_events, options_.limits.max_poll_events);
  poll->done = std::move(done);
  PollOnce(std::move(poll));
}

void RedisConsumerGroups::PollOnce(std::shared_ptr<PollState> poll) {
  ++poll->attempts;
  RedisCall begin = GroupCall(PollBeginScript(), poll->group,
                              {poll->consumer, absl::StrCat(poll->max_events),
                               absl::StrCat(options_.limits.max_group_pending)})
                        .Idempotent();
  Send(std::move(begin), [this, poll](absl::StatusOr<RedisReply> reply) mutable {
    OnPollBegun(std::move(poll), std::move(reply));
  });
}

void RedisConsumerGroups::OnPollBegun(std::shared_ptr<PollState> poll,
                                      absl::StatusOr<RedisReply> reply) {
  if (absl::Status s = ReplyStatus(reply); !s.ok()) {
    std::move(poll->done)(s);
    return;
  }
  if (reply->elements.size() != 7) {
    std::move(poll->done)(Malformed("poll"));
    return;
  }
  const std::vector<RedisReply>& begun = reply->elements;
  // Waiters on this replica hear when the group's leases expire, whoever
  // holds them.
  if (const int64_t lease = IntOf(begun[6]); lease >= 0) ArmLeaseAlarm(poll->group, lease);
  Subscribe(poll->group);
  const std::string incarnation = begun[0].str;
  const int64_t want = IntOf(begun[4]);
  const std::vector<uint64_t> positions = PositionsOf(begun[5], tags_->size());
  // The partitions to read: those this replica's event source has read past
  // the group's position.
  std::vector<int> partitions;
  const int count = static_cast<int>(tags_->size());
  const int first = static_cast<int>(next_partition_.fetch_add(1) % count);
  for (int i = 0; i < count && want > 0 && partitions.size() < kMaxReadsPerPoll; ++i) {
    const int p = (first + i) % count;
    if (positions[p] < events_->read_sequence(p)) partitions.push_back(p);
  }
  // The reads share one answer's bytes (each returns at least one event), so
  // what the commit is sent stays near what it can lease.
  const size_t bytes_per_read =
      options_.limits.max_response_bytes / std::max<size_t>(1, partitions.size());
  std::vector<RedisCall> reads;
  for (int p : partitions) {
    const PartitionKeys keys((*tags_)[p]);
    std::vector<std::string> args = {absl::StrCat(positions[p]),
                                     absl::StrCat(kEntriesPerRead),
                                     absl::StrCat(want),
                                     absl::StrCat(bytes_per_read),
                                     begun[3].str,
                                     begun[2].str};
    for (absl::string_view c : absl::StrSplit(begun[1].str, ' ', absl::SkipEmpty())) {
      args.emplace_back(c);
    }
    reads.push_back(
        RedisCall::Eval(ReadPartitionScript(), {keys.events, keys.delivered}, std::move(args))
            .Idempotent());
  }
  FanOut(std::move(reads), [this, poll = std::move(poll), partitions = std::move(partitions),
                            positions = positions, incarnation](Replies replies) mutable {
    std::vector<std::string> blocks;
    int n = 0;
    for (size_t i = 0; i < replies.size(); ++i) {
      // A partition that could not be read is read by a later Poll.
      if (!replies[i].ok() || replies[i]->type != RedisReply::Type::kArray ||
          replies[i]->elements.size() < 3 || (replies[i]->elements.size() - 3) % 6 != 0) {
        continue;
      }
      const std::vector<RedisReply>& read = replies[i]->elements;
      const int p = partitions[i];
      const size_t events = (read.size() - 3) / 6;
      blocks.insert(blocks.end(), {absl::StrCat(p), absl::StrCat(positions[p]),
                                   absl::StrCat(UintOf(read[0])), absl::StrCat(UintOf(read[1])),
                                   absl::StrCat(UintOf(read[2])), absl::StrCat(events)});
      for (size_t e = 3; e < read.size(); e += 6) {
        blocks.push_back(absl::StrCat(GroupEventId(UintOf(read[e]), p)));
        blocks.push_back(EncodeEvent(read[e + 1].str, read[e + 2].str, read[e + 3].str,
                                     UintOf(read[e + 4]), UintOf(read[e + 5])));
      }
      ++n;
    }
    const Limits& limits = options_.limits;
    std::vector<std::string> args = {
        poll->consumer,
        absl::StrCat(poll->max_events),
        absl::StrCat(limits.max_consumers_per_group),
        absl::StrCat(limits.max_group_pending),
        absl::StrCat(limits.max_group_bytes),
        absl::StrCat(limits.max_response_bytes),
        absl::StrCat(kResponseEntryOverhead),
        absl::StrCat(limits.max_collection_name_bytes + limits.max_key_bytes +
                     limits.max_value_bytes + kResponseEntryOverhead),
        incarnation,
        absl::StrCat(n)};
    args.insert(args.end(), std::make_move_iterator(blocks.begin()),
                std::make_move_iterator(blocks.end()));
    Commit(std::move(poll), std::move(args));
  });
}

void RedisConsumerGroups::Commit(std::shared_ptr<PollState> poll, std::vector<std::string> args) {
  RedisCall commit = Durable(GroupCall(PollCommitScript(), poll->group, std::move(args)));
  Send(std::move(commit), [this, poll](absl::StatusOr<RedisReply> reply) mutable {
    if (absl::Status s = ReplyStatus(reply); !s.ok()) {
      std::move(poll->done)(s);
      return;
    }
    const std::vector<RedisReply>& r = reply->elements;
    if (r.size() < 4 || (r.size() - 4) % 3 != 0) {
      std::move(poll->done)(Malformed("poll"));
      return;
    }
    const absl::Time deadline = TimeOfDeadline(IntOf(r[0]));
    PollResult result;
    if (r[1].elements.size() == 3) {
      const int p = static_cast<int>(IntOf(r[1].elements[0]));
      result.lost = LostRange{.first = GroupEventId(UintOf(r[1].elements[1]), p),
                              .last = GroupEventId(UintOf(r[1].elements[2]), p)};
    }
    for (size_t i = 4; i < r.size(); i += 3) {
      const uint64_t id = UintOf(r[i]);
      absl::StatusOr<ExpiryEvent> event = DecodeEvent(id, r[i + 2].str);
      if (!event.ok()) {
        std::move(poll->done)(event.status());
        return;
      }
      result.deliveries.push_back({.event = *std::move(event),
                                   .delivery_count = static_cast<uint32_t>(IntOf(r[i + 1])),
                                   .lease_deadline = deadline});
    }
    if (!result.deliveries.empty()) ArmLeaseAlarm(poll->group, IntOf(r[0]));
    // Nothing to answer, but another Poll took what this one read, or this
    // one moved past events its filter does not match: read on.
    const bool again = IntOf(r[2]) > 0 || IntOf(r[3]) > 0;
    const int attempts = kMaxPollAttempts + static_cast<int>(tags_->size() / kMaxReadsPerPoll);
    if (result.deliveries.empty() && !result.lost.has_value() && again &&
        poll->attempts < attempts) {
      PollOnce(std::move(poll));
      return;
    }
    std::move(poll->done)(std::move(result));
  });
}

void RedisConsumerGroups::Settle(absl::string_view group, absl::string_view consumer,
                                 absl::Span<const LeaseRef> leases, absl::string_view op,
                                 absl::Duration extension,
                                 StoreDone<std::vector<absl::Status>> done) {
  absl::Status valid = ValidateName("group", group, options_.limits);
  if (valid.ok()) valid = ValidateName("consumer", consumer, options_.limits);
  if (valid.ok()) valid = ValidateCount("leases", leases.size(), options_.limits);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::vector<std::string> args = {
      std::string(consumer), std::string(op),
      absl::StrCat(absl::ToInt64Milliseconds(absl::Ceil(extension, absl::Milliseconds(1))))};
  for (const LeaseRef& ref : leases) {
    args.push_back(absl::StrCat(ref.sequence));
    args.push_back(absl::StrCat(ref.delivery_count));
  }
  std::vector<LeaseRef> refs(leases.begin(), leases.end());
  const bool frees = op != "extend";
  Send(Durable(GroupCall(SettleLeasesScript(), group, std::move(args))),
       AnswerWith(std::move(done),
                  [this, group = std::string(group), refs = std::move(refs),
                   frees](const RedisReply& reply) -> absl::StatusOr<std::vector<absl::Status>> {
                    if (reply.elements.size() != refs.size()) return Malformed("settle leases");
                    std::vector<absl::Status> results;
                    bool held = false;
                    for (size_t i = 0; i < refs.size(); ++i) {
                      const std::vector<RedisReply>& r = reply.elements[i].elements;
                      const int64_t outcome = r.empty() ? -1 : IntOf(r[0]);
                      switch (outcome) {
                        case 0:
                          held = true;
                          results.push_back(absl::OkStatus());
                          break;
                        case 1:
                          results.push_back(
                              LostLeaseError(i, refs[i], "the group has not delivered it"));
                          break;
                        case 2:
                          results.push_back(LostLeaseError(
                              i, refs[i],
                              "it is not pending: acknowledged already (by this or another "
                              "consumer), dead-lettered, or dropped by a reset of the group"));
                          break;
                        case 3:
                          results.push_back(LostLeaseError(
                              i, refs[i],
                              "the lease expired or was released and the event awaits "
                              "redelivery"));
                          break;
                        case 4:
                          if (r.size() != 3) return Malformed("settle leases");
                          results.push_back(LostLeaseError(
                              i, refs[i],
                              absl::StrFormat("delivery %d of it is leased to consumer \"%s\"",
                                              IntOf(r[1]), r[2].str)));
                          break;
                        default:
                          return Malformed("settle leases");
                      }
                    }
                    // A consumer that acked or released leases may take more.
                    if (held && frees) Announce(group);
                    return results;
                  }));
}

void RedisConsumerGroups::Ack(absl::string_view group, absl::string_view consumer,
                              absl::Span<const LeaseRef> leases,
                              StoreDone<std::vector<absl::Status>> done) {
  Settle(group, consumer, leases, "ack", absl::ZeroDuration(), std::move(done));
}

void RedisConsumerGroups::Nack(absl::string_view group, absl::string_view consumer,
                               absl::Span<const LeaseRef> leases,
                               StoreDone<std::vector<absl::Status>> done) {
  Settle(group, consumer, leases, "nack", absl::ZeroDuration(), std::move(done));
}

void RedisConsumerGroups::ExtendLeases(absl::string_view group, absl::string_view consumer,
                                       absl::Span<const LeaseRef> leases, absl::Duration extension,
                                       StoreDone<std::vector<absl::Status>> done) {
  if (extension <= absl::ZeroDuration() || extension > options_.limits.max_visibility_timeout) {
    std::move(done)(InvalidField(
        "extension", absl::StrCat("must be positive and at most ",
                                  absl::FormatDuration(options_.limits.max_visibility_timeout))));
    return;
  }
  Settle(group, consumer, leases, "extend", extension, std::move(done));
}

void RedisConsumerGroups::ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                                          StoreDone<DeadLetterPage> done) {
  absl::Status valid = ValidateName("group", group, options_.limits);
  if (valid.ok()) valid = ValidatePageSize(page_size);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  const size_t size = EffectivePageSize(page_size, options_.limits);
  Send(GroupCall(
           ListDeadLettersScript(), group,
           {absl::StrCat(after), absl::StrCat(size),
            absl::StrCat(options_.limits.max_response_bytes), absl::StrCat(kResponseEntryOverhead)})
           .Idempotent(),
       AnswerWith(std::move(done), [](const RedisReply& reply) -> absl::StatusOr<DeadLetterPage> {
         const std::vector<RedisReply>& r = reply.elements;
         if (r.empty() || (r.size() - 1) % 5 != 0) return Malformed("list dead letters");
         DeadLetterPage page;
         if (!r[0].str.empty()) page.next_after = UintOf(r[0]);
         for (size_t i = 1; i < r.size(); i += 5) {
           const uint64_t id = UintOf(r[i]);
           absl::StatusOr<ExpiryEvent> event = DecodeEvent(id, r[i + 1].str);
           if (!event.ok()) return event.status();
           page.letters.push_back({.event = *std::move(event),
                                   .delivery_count = static_cast<uint32_t>(IntOf(r[i + 2])),
                                   .consumer = r[i + 3].str,
                                   .dead_lettered_at = TimeOfDeadline(IntOf(r[i + 4]))});
         }
         return page;
       }));
}

void RedisConsumerGroups::RedriveDeadLetters(absl::string_view group,
                                             absl::Span<const uint64_t> sequences,
                                             StoreDone<size_t> done) {
  absl::Status valid = ValidateName("group", group, options_.limits);
  if (valid.ok() && sequences.size() > options_.limits.max_members_per_request) {
    valid = InvalidField("sequences",
                         absl::StrFormat("%d entries exceed the limit of %d", sequences.size(),
                                         options_.limits.max_members_per_request));
  }
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::vector<std::string> args = {absl::StrCat(options_.limits.max_group_pending)};
  for (uint64_t id : sequences) args.push_back(absl::StrCat(id));
  Send(Durable(GroupCall(RedriveScript(), group, std::move(args))),
       AnswerWith(
           std::move(done),
           [this, group = std::string(group)](const RedisReply& reply) -> absl::StatusOr<size_t> {
             const size_t redriven = static_cast<size_t>(IntOf(reply));
             if (redriven > 0) Announce(group);
             return redriven;
           }));
}

}  // namespace lapse::redis

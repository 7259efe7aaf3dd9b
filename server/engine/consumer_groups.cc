#include "server/engine/consumer_groups.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/base/deadline.h"
#include "server/engine/validate.h"

namespace lapse {

struct ConsumerGroups::Pending {
  Group* group;
  ExpiryEvent event;
  // Deliveries so far.
  uint32_t delivery_count = 0;
  // The consumer holding the lease; empty while the event awaits redelivery.
  std::string consumer;
  // Queued in leases_ under it while leased.
  int64_t deadline_ms = kNoDeadlineMs;
};

namespace {

struct Consumer {
  size_t unacked = 0;
  absl::Time last_seen;
};

// Sequences a Poll reads past (in several Reads of the source, each bounded by
// ReadLimits::max_examined) looking for matching events.
constexpr int kMaxReadsPerPoll = 4;

absl::Status ValidateOptions(const ConsumerGroupOptions& options, const Limits& limits) {
  const EventFilter& filter = options.filter;
  if (!filter.collections.empty() && !filter.prefix.empty()) {
    return InvalidField("collections",
                        "at most one of collections and collection_prefix may be set");
  }
  if (filter.collections.size() > limits.max_watch_collections) {
    return InvalidField("collections",
                        absl::StrFormat("%d entries exceed the limit of %d",
                                        filter.collections.size(), limits.max_watch_collections));
  }
  for (const std::string& name : filter.collections) {
    if (absl::Status s = ValidateName("collections", name, limits); !s.ok()) return s;
  }
  if (filter.prefix.size() > limits.max_collection_name_bytes) {
    return InvalidField("collection_prefix",
                        absl::StrFormat("%d bytes exceeds the limit of %d", filter.prefix.size(),
                                        limits.max_collection_name_bytes));
  }
  if (options.visibility_timeout <= absl::ZeroDuration() ||
      options.visibility_timeout > limits.max_visibility_timeout) {
    return InvalidField("visibility_timeout",
                        absl::StrCat("must be positive and at most ",
                                     absl::FormatDuration(limits.max_visibility_timeout)));
  }
  if (options.max_deliveries < 1 || options.max_deliveries > limits.max_deliveries) {
    return InvalidField("max_deliveries",
                        absl::StrCat("must be between 1 and ", limits.max_deliveries));
  }
  if (options.max_unacked_per_consumer < 1 ||
      options.max_unacked_per_consumer > limits.max_unacked_per_consumer) {
    return InvalidField("max_unacked_per_consumer",
                        absl::StrCat("must be between 1 and ", limits.max_unacked_per_consumer));
  }
  return absl::OkStatus();
}

absl::Status LostLease(size_t index, const LeaseRef& ref, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "leases[%d]: the lease on event %d (delivery %d) is not held: %s; the event may be "
      "handled more than once",
      index, ref.sequence, ref.delivery_count, why));
}

}  // namespace

struct ConsumerGroups::Group {
  std::string name;
  ConsumerGroupOptions options;
  uint64_t position = 0;
  // Leased or awaiting redelivery, by sequence. std::map: leases_ points into it.
  std::map<uint64_t, Pending> pending;
  // The sequences of the pending events that await redelivery.
  absl::btree_set<uint64_t> ready;
  absl::btree_map<uint64_t, DeadLetter> dead_letters;
  absl::flat_hash_map<std::string, Consumer> consumers;
  // MemoryFootprint of the events in `pending` and `dead_letters`.
  size_t bytes = 0;
  // Lost and not yet told to a consumer.
  std::optional<LostRange> unreported_loss;
  uint64_t delivered_total = 0;
  uint64_t acked_total = 0;
  uint64_t lost_sequences_total = 0;
};

ConsumerGroups::ConsumerGroups(const Options& options, Clock* clock, const EventSource* source)
    : options_(options), clock_(clock), source_(source) {}

ConsumerGroups::~ConsumerGroups() = default;

absl::StatusOr<uint64_t> ConsumerGroups::StartPositionOf(const GroupStart& start) const {
  switch (start.kind) {
    case GroupStart::Kind::kNew:
      return source_->last_sequence();
    case GroupStart::Kind::kOldest:
      return source_->oldest_retained_sequence() - 1;
    case GroupStart::Kind::kAfterSequence:
      if (absl::Status s = source_->CheckPosition(start.after_sequence); !s.ok()) return s;
      return start.after_sequence;
  }
  return InvalidField("start_position", "unknown value");
}

absl::StatusOr<ConsumerGroups::Group*> ConsumerGroups::FindLocked(absl::string_view name) {
  auto it = groups_.find(name);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("consumer group \"", name, "\" does not exist"));
  }
  return it->second.get();
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Create(absl::string_view name,
                                                         const ConsumerGroupOptions& options,
                                                         const GroupStart& start) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateOptions(options, options_.limits); !s.ok()) return s;
  MutexLock lock(&mu_);
  if (groups_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("consumer group \"", name,
                                                 "\" already exists; delete it first or pick "
                                                 "another name"));
  }
  if (groups_.size() >= options_.limits.max_consumer_groups) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d consumer groups exist, the limit (max_consumer_groups); delete one first",
        groups_.size()));
  }
  absl::StatusOr<uint64_t> position = StartPositionOf(start);
  if (!position.ok()) return position.status();
  auto group = std::make_unique<Group>();
  group->name = std::string(name);
  group->options = options;
  group->position = *position;
  Group& created = *group;
  groups_.emplace(created.name, std::move(group));
  return InfoLocked(created, 0);
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Get(absl::string_view name, size_t max_leases) {
  std::vector<std::string> readable;
  absl::StatusOr<ConsumerGroupInfo> info;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked(clock_->Now(), &readable);
    absl::StatusOr<Group*> group = FindLocked(name);
    if (group.ok()) {
      info = InfoLocked(**group, max_leases);
    } else {
      info = group.status();
    }
  }
  Announce(readable);
  return info;
}

absl::StatusOr<ConsumerGroups::Page> ConsumerGroups::List(int page_size, absl::string_view after) {
  if (absl::Status s = ValidatePageSize(page_size); !s.ok()) return s;
  const size_t size = EffectivePageSize(page_size, options_.limits);
  std::vector<std::string> readable;
  Page page;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked(clock_->Now(), &readable);
    for (auto it = groups_.upper_bound(after); it != groups_.end(); ++it) {
      if (page.groups.size() == size) {
        page.next_after = page.groups.back().name;
        break;
      }
      page.groups.push_back(InfoLocked(*it->second, 0));
    }
  }
  Announce(readable);
  return page;
}

absl::Status ConsumerGroups::Delete(absl::string_view name) {
  MutexLock lock(&mu_);
  absl::StatusOr<Group*> group = FindLocked(name);
  if (!group.ok()) return group.status();
  DropPendingLocked(**group);
  groups_.erase(groups_.find(name));
  return absl::OkStatus();
}

absl::Status ConsumerGroups::Reset(absl::string_view name, const GroupStart& start) {
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Group*> group = FindLocked(name);
    if (!group.ok()) return group.status();
    absl::StatusOr<uint64_t> position = StartPositionOf(start);
    if (!position.ok()) return position.status();
    DropPendingLocked(**group);
    (*group)->position = *position;
    (*group)->unreported_loss.reset();
  }
  Announce({std::string(name)});
  return absl::OkStatus();
}

absl::StatusOr<PollResult> ConsumerGroups::Poll(absl::string_view group_name,
                                                absl::string_view consumer, size_t max_events) {
  if (absl::Status s = ValidateName("consumer", consumer, options_.limits); !s.ok()) return s;
  if (max_events == 0) return InvalidField("max_events", "must be positive");
  max_events = std::min(max_events, options_.limits.max_poll_events);
  std::vector<std::string> readable;
  PollResult result;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    ExpireLeasesLocked(now, &readable);
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    Group& group = **found;
    status = TouchConsumerLocked(group, consumer, now);
    if (status.ok()) {
      const size_t unacked = group.consumers[consumer].unacked;
      const size_t allowed = group.options.max_unacked_per_consumer;
      size_t want = unacked >= allowed ? 0 : std::min(max_events, allowed - unacked);
      while (want > 0 && !group.ready.empty()) {
        Pending& pending = group.pending.at(*group.ready.begin());
        group.ready.erase(group.ready.begin());
        LeaseLocked(group, pending, consumer, now);
        result.deliveries.push_back({.event = pending.event,
                                     .delivery_count = pending.delivery_count,
                                     .lease_deadline = TimeOfDeadline(pending.deadline_ms)});
        --want;
      }
      if (want > 0) status = ReadNewLocked(group, consumer, want, now, &result);
      result.lost = std::exchange(group.unreported_loss, std::nullopt);
    }
  }
  Announce(readable);
  if (!status.ok()) return status;
  return result;
}

absl::Status ConsumerGroups::ReadNewLocked(Group& group, absl::string_view consumer, size_t want,
                                           absl::Time now, PollResult* result) {
  const Limits& limits = options_.limits;
  for (int reads = 0; reads < kMaxReadsPerPoll && want > 0; ++reads) {
    if (group.pending.size() >= limits.max_group_pending || group.bytes >= limits.max_group_bytes) {
      return absl::OkStatus();
    }
    const ReadLimits read_limits = {
        .max_events = std::min(want, limits.max_group_pending - group.pending.size()),
        .max_bytes = limits.max_group_bytes - group.bytes};
    absl::StatusOr<EventBatch> batch =
        source_->Read(group.position, group.options.filter, read_limits);
    if (!batch.ok()) {
      const uint64_t oldest = source_->oldest_retained_sequence();
      if (batch.status().code() != absl::StatusCode::kOutOfRange || group.position + 1 >= oldest) {
        return batch.status();
      }
      // The source discarded events the group had not received: remember
      // the range for the consumer this Poll answers, and go on after it.
      const uint64_t first =
          group.unreported_loss.has_value() ? group.unreported_loss->first : group.position + 1;
      group.unreported_loss = LostRange{.first = first, .last = oldest - 1};
      group.lost_sequences_total += oldest - 1 - group.position;
      group.position = oldest - 1;
      continue;
    }
    if (batch->examined_sequence == group.position) return absl::OkStatus();
    group.position = batch->examined_sequence;
    for (ExpiryEvent& event : batch->events) {
      const uint64_t sequence = event.sequence;
      group.bytes += MemoryFootprint(event);
      Pending& pending =
          group.pending.emplace(sequence, Pending{.group = &group, .event = std::move(event)})
              .first->second;
      LeaseLocked(group, pending, consumer, now);
      result->deliveries.push_back({.event = pending.event,
                                    .delivery_count = pending.delivery_count,
                                    .lease_deadline = TimeOfDeadline(pending.deadline_ms)});
      --want;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::Ack(absl::string_view group,
                                                              absl::string_view consumer,
                                                              absl::Span<const LeaseRef> leases) {
  return ForEachHeldLease(group, consumer, leases,
                          [this](Group& g, Pending& pending) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                            ++g.acked_total;
                            ErasePendingLocked(g, pending.event.sequence);
                            return absl::OkStatus();
                          });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::Nack(absl::string_view group,
                                                               absl::string_view consumer,
                                                               absl::Span<const LeaseRef> leases) {
  const absl::Time now = clock_->Now();
  return ForEachHeldLease(group, consumer, leases,
                          [this, now](Group& g, Pending& pending)
                              ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                ReleaseLocked(g, pending, now);
                                return absl::OkStatus();
                              });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::ExtendLeases(
    absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
    absl::Duration extension) {
  if (extension <= absl::ZeroDuration() || extension > options_.limits.max_visibility_timeout) {
    return InvalidField("extension",
                        absl::StrCat("must be positive and at most ",
                                     absl::FormatDuration(options_.limits.max_visibility_timeout)));
  }
  const absl::Time now = clock_->Now();
  return ForEachHeldLease(group, consumer, leases,
                          [this, now, extension](Group&, Pending& pending)
                              ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                leases_.Remove(pending.deadline_ms, &pending);
                                QueueLeaseLocked(pending, CeilMillis(now + extension));
                                return absl::OkStatus();
                              });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::ForEachHeldLease(
    absl::string_view group_name, absl::string_view consumer, absl::Span<const LeaseRef> leases,
    const PerLease& fn) {
  if (absl::Status s = ValidateName("consumer", consumer, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateCount("leases", leases.size(), options_.limits); !s.ok()) return s;
  std::vector<std::string> readable;
  std::vector<absl::Status> results;
  results.reserve(leases.size());
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    ExpireLeasesLocked(now, &readable);
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    Group& group = **found;
    bool held = false;
    if (auto it = group.consumers.find(consumer); it != group.consumers.end()) {
      it->second.last_seen = now;
    }
    for (size_t i = 0; i < leases.size(); ++i) {
      const LeaseRef& ref = leases[i];
      auto it = group.pending.find(ref.sequence);
      if (it == group.pending.end()) {
        results.push_back(LostLease(
            i, ref,
            ref.sequence > group.position
                ? "the group has not delivered it"
                : "it is not pending: acknowledged already (by this or another consumer), "
                  "dead-lettered, or dropped by a reset of the group"));
      } else if (it->second.consumer.empty()) {
        results.push_back(LostLease(i, ref,
                                    "the lease expired or was released and the event awaits "
                                    "redelivery"));
      } else if (it->second.consumer != consumer ||
                 it->second.delivery_count != ref.delivery_count) {
        results.push_back(
            LostLease(i, ref,
                      absl::StrFormat("delivery %d of it is leased to consumer \"%s\"",
                                      it->second.delivery_count, it->second.consumer)));
      } else {
        results.push_back(fn(group, it->second));
        held = true;
      }
    }
    // A consumer that acked or released leases may take more.
    if (held) readable.push_back(group.name);
  }
  Announce(readable);
  return results;
}

absl::StatusOr<DeadLetterPage> ConsumerGroups::ListDeadLetters(absl::string_view group_name,
                                                               uint64_t after, int page_size) {
  if (absl::Status s = ValidatePageSize(page_size); !s.ok()) return s;
  const size_t size = EffectivePageSize(page_size, options_.limits);
  MutexLock lock(&mu_);
  absl::StatusOr<Group*> found = FindLocked(group_name);
  if (!found.ok()) return found.status();
  const Group& group = **found;
  DeadLetterPage page;
  size_t bytes = 0;
  for (auto it = group.dead_letters.upper_bound(after); it != group.dead_letters.end(); ++it) {
    const DeadLetter& letter = it->second;
    const size_t entry = letter.event.collection.size() + letter.event.key.size() +
                         letter.event.value.size() + letter.consumer.size() +
                         kResponseEntryOverhead;
    // Like a ListMembers page: cut short rather than too big for one answer.
    if (page.letters.size() == size ||
        (!page.letters.empty() && bytes + entry > options_.limits.max_response_bytes)) {
      page.next_after = page.letters.back().event.sequence;
      break;
    }
    bytes += entry;
    page.letters.push_back(letter);
  }
  return page;
}

absl::StatusOr<size_t> ConsumerGroups::RedriveDeadLetters(absl::string_view group_name,
                                                          absl::Span<const uint64_t> sequences) {
  if (sequences.size() > options_.limits.max_members_per_request) {
    return InvalidField("sequences",
                        absl::StrFormat("%d entries exceed the limit of %d", sequences.size(),
                                        options_.limits.max_members_per_request));
  }
  size_t redriven = 0;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    Group& group = **found;
    auto redrive = [&](absl::btree_map<uint64_t, DeadLetter>::iterator it) {
      const uint64_t sequence = it->first;
      group.pending.emplace(sequence,
                            Pending{.group = &group, .event = std::move(it->second.event)});
      group.ready.insert(sequence);
      ++redriven;
      return group.dead_letters.erase(it);
    };
    auto full = [&] { return group.pending.size() >= options_.limits.max_group_pending; };
    if (sequences.empty()) {
      for (auto it = group.dead_letters.begin(); it != group.dead_letters.end() && !full();) {
        it = redrive(it);
      }
    } else {
      for (uint64_t sequence : sequences) {
        if (full()) break;
        if (auto it = group.dead_letters.find(sequence); it != group.dead_letters.end()) {
          redrive(it);
        }
      }
    }
  }
  if (redriven > 0) Announce({std::string(group_name)});
  return redriven;
}

size_t ConsumerGroups::ExpireLeases() {
  std::vector<std::string> readable;
  size_t expired;
  {
    MutexLock lock(&mu_);
    expired = ExpireLeasesLocked(clock_->Now(), &readable);
  }
  Announce(readable);
  return expired;
}

absl::Time ConsumerGroups::NextLeaseDeadline() const {
  ReaderMutexLock lock(&mu_);
  return TimeOfDeadline(leases_.NextDeadline());
}

ExpiryWork ConsumerGroups::Work() {
  return {.expire_due = [this] { ExpireLeases(); },
          .next_deadline = [this] { return NextLeaseDeadline(); }};
}

size_t ConsumerGroups::ExpireLeasesLocked(absl::Time now, std::vector<std::string>* readable) {
  const int64_t now_ms = FloorMillis(now);
  size_t expired = 0;
  while (leases_.NextDeadline() <= now_ms) {
    Pending& pending = *leases_.Front();
    Group& group = *pending.group;
    ReleaseLocked(group, pending, now);
    if (readable->empty() || readable->back() != group.name) readable->push_back(group.name);
    ++expired;
  }
  return expired;
}

void ConsumerGroups::QueueLeaseLocked(Pending& pending, int64_t deadline_ms) {
  const int64_t earliest = leases_.NextDeadline();
  pending.deadline_ms = deadline_ms;
  leases_.Add(deadline_ms, &pending);
  if (deadline_ms < earliest && options_.earlier_deadline_listener) {
    options_.earlier_deadline_listener(TimeOfDeadline(deadline_ms));
  }
}

void ConsumerGroups::LeaseLocked(Group& group, Pending& pending, absl::string_view consumer,
                                 absl::Time now) {
  pending.consumer = std::string(consumer);
  ++pending.delivery_count;
  QueueLeaseLocked(pending, CeilMillis(now + group.options.visibility_timeout));
  ++group.consumers[consumer].unacked;
  ++group.delivered_total;
}

void ConsumerGroups::DropLeaseLocked(Group& group, Pending& pending) {
  leases_.Remove(pending.deadline_ms, &pending);
  pending.deadline_ms = kNoDeadlineMs;
  // A consumer holding leases is never evicted (TouchConsumerLocked).
  --group.consumers.at(pending.consumer).unacked;
  pending.consumer.clear();
}

void ConsumerGroups::ReleaseLocked(Group& group, Pending& pending, absl::Time now) {
  std::string consumer = pending.consumer;
  DropLeaseLocked(group, pending);
  if (pending.delivery_count < group.options.max_deliveries ||
      group.dead_letters.size() >= options_.limits.max_group_dead_letters) {
    group.ready.insert(pending.event.sequence);
    return;
  }
  const uint64_t sequence = pending.event.sequence;
  group.dead_letters.emplace(sequence, DeadLetter{.event = std::move(pending.event),
                                                  .delivery_count = pending.delivery_count,
                                                  .consumer = std::move(consumer),
                                                  .dead_lettered_at = now});
  // The event's bytes move to the dead letter.
  group.pending.erase(sequence);
}

void ConsumerGroups::ErasePendingLocked(Group& group, uint64_t sequence) {
  auto it = group.pending.find(sequence);
  Pending& pending = it->second;
  if (!pending.consumer.empty()) DropLeaseLocked(group, pending);
  group.ready.erase(sequence);
  group.bytes -= MemoryFootprint(pending.event);
  group.pending.erase(it);
}

void ConsumerGroups::DropPendingLocked(Group& group) {
  while (!group.pending.empty()) ErasePendingLocked(group, group.pending.begin()->first);
}

absl::Status ConsumerGroups::TouchConsumerLocked(Group& group, absl::string_view consumer,
                                                 absl::Time now) {
  if (auto it = group.consumers.find(consumer); it != group.consumers.end()) {
    it->second.last_seen = now;
    return absl::OkStatus();
  }
  if (group.consumers.size() >= options_.limits.max_consumers_per_group) {
    // Make room by forgetting the consumer idle the longest, if one holds
    // no lease.
    auto idlest = group.consumers.end();
    for (auto it = group.consumers.begin(); it != group.consumers.end(); ++it) {
      if (it->second.unacked == 0 &&
          (idlest == group.consumers.end() || it->second.last_seen < idlest->second.last_seen)) {
        idlest = it;
      }
    }
    if (idlest == group.consumers.end()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "consumer group \"%s\" has %d consumers holding leases, the limit "
          "(max_consumers_per_group); reuse a consumer name or wait for leases to end",
          group.name, group.consumers.size()));
    }
    group.consumers.erase(idlest);
  }
  group.consumers.emplace(consumer, Consumer{.last_seen = now});
  return absl::OkStatus();
}

ConsumerGroupInfo ConsumerGroups::InfoLocked(const Group& group, size_t max_leases) const {
  ConsumerGroupInfo info;
  info.name = group.name;
  info.options = group.options;
  info.position = group.position;
  const uint64_t last = source_->last_sequence();
  info.lag = last > group.position ? last - group.position : 0;
  info.pending = group.pending.size();
  info.awaiting_redelivery = group.ready.size();
  info.dead_lettered = group.dead_letters.size();
  info.bytes = group.bytes;
  info.delivered_total = group.delivered_total;
  info.acked_total = group.acked_total;
  info.lost_sequences_total = group.lost_sequences_total;
  for (const auto& [name, consumer] : group.consumers) {
    info.consumers.push_back(
        {.name = name, .unacked = consumer.unacked, .last_seen = consumer.last_seen});
  }
  std::sort(info.consumers.begin(), info.consumers.end(),
            [](const ConsumerInfo& a, const ConsumerInfo& b) { return a.name < b.name; });
  for (const auto& [sequence, pending] : group.pending) {
    if (info.leases.size() == max_leases) break;
    if (pending.consumer.empty()) continue;
    info.leases.push_back({.sequence = sequence,
                           .consumer = pending.consumer,
                           .delivery_count = pending.delivery_count,
                           .deadline = TimeOfDeadline(pending.deadline_ms)});
  }
  return info;
}

void ConsumerGroups::Announce(const std::vector<std::string>& readable) const {
  if (!options_.on_readable) return;
  for (const std::string& group : readable) options_.on_readable(group);
}

}  // namespace lapse

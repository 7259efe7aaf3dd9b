#include "server/engine/consumer_groups.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/base/coding.h"
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

// What a Poll found after a group's position.
struct ConsumerGroups::FeedRead {
  uint64_t position = 0;
  std::optional<LostRange> lost;
  std::vector<ExpiryEvent> events;
};

namespace {

struct Consumer {
  size_t unacked = 0;
  absl::Time last_seen;
};

// Reads of the source one Poll makes (each bounded by
// ReadLimits::max_examined) looking for matching events.
constexpr int kMaxReadsPerPoll = 4;

// kGroupCreate's options: varint32 count | collection* | prefix |
// include_values u8 | visibility_timeout_ns u64 | max_deliveries u32 |
// max_unacked_per_consumer u32 (strings length-prefixed).
std::string EncodeOptions(const ConsumerGroupOptions& options) {
  std::string out;
  PutVarint32(&out, static_cast<uint32_t>(options.filter.collections.size()));
  for (const std::string& name : options.filter.collections) PutLengthPrefixed(&out, name);
  PutLengthPrefixed(&out, options.filter.prefix);
  out.push_back(options.filter.include_values ? 1 : 0);
  PutFixed64(&out, static_cast<uint64_t>(absl::ToInt64Nanoseconds(options.visibility_timeout)));
  PutFixed32(&out, options.max_deliveries);
  PutFixed32(&out, options.max_unacked_per_consumer);
  return out;
}

absl::StatusOr<ConsumerGroupOptions> DecodeOptions(absl::string_view in) {
  ConsumerGroupOptions options;
  uint32_t count = 0;
  bool ok = GetVarint32(&in, &count);
  for (uint32_t i = 0; ok && i < count; ++i) {
    absl::string_view name;
    ok = GetLengthPrefixed(&in, &name);
    if (ok) options.filter.collections.emplace(name);
  }
  absl::string_view prefix;
  uint8_t include_values = 0;
  uint64_t visibility_ns = 0;
  ok = ok && GetLengthPrefixed(&in, &prefix) && GetByte(&in, &include_values) &&
       GetFixed64(&in, &visibility_ns) && GetFixed32(&in, &options.max_deliveries) &&
       GetFixed32(&in, &options.max_unacked_per_consumer) && in.empty();
  if (!ok) return absl::DataLossError("consumer group options do not decode");
  options.filter.prefix = std::string(prefix);
  options.filter.include_values = include_values != 0;
  options.visibility_timeout = absl::Nanoseconds(static_cast<int64_t>(visibility_ns));
  return options;
}

JournalRecord GroupRecord(RecordType type, absl::string_view group) {
  JournalRecord r;
  r.type = type;
  r.group = group;
  return r;
}

JournalRecord PositionRecord(absl::string_view group, uint64_t position) {
  JournalRecord r = GroupRecord(RecordType::kGroupPosition, group);
  r.position = position;
  return r;
}

JournalRecord AckRecord(absl::string_view group, uint64_t sequence) {
  JournalRecord r = GroupRecord(RecordType::kGroupAck, group);
  r.sequence = sequence;
  return r;
}

JournalRecord LeaseRecord(absl::string_view group, uint64_t sequence, uint32_t delivery_count,
                          absl::string_view consumer, int64_t deadline_ms) {
  JournalRecord r = GroupRecord(RecordType::kGroupLease, group);
  r.sequence = sequence;
  r.delivery_count = delivery_count;
  r.consumer = consumer;
  r.at_ms = deadline_ms;
  return r;
}

// kGroupEvent or kGroupDeadLetter.
JournalRecord EventRecord(RecordType type, absl::string_view group, const ExpiryEvent& event,
                          uint32_t delivery_count, absl::string_view consumer, int64_t at_ms) {
  JournalRecord r = GroupRecord(type, group);
  SetEvent(event, &r);
  r.delivery_count = delivery_count;
  r.consumer = consumer;
  r.at_ms = at_ms;
  return r;
}

// What a delivered event adds to a Poll's answer (Limits::max_response_bytes).
size_t ResponseBytesOf(const ExpiryEvent& e) {
  return e.collection.size() + e.key.size() + e.value.size() + kResponseEntryOverhead;
}

size_t MaxResponseBytesOfAnEvent(const Limits& limits) {
  return limits.max_collection_name_bytes + limits.max_key_bytes + limits.max_value_bytes +
         kResponseEntryOverhead;
}

}  // namespace

absl::Status ValidateConsumerGroupOptions(const ConsumerGroupOptions& options,
                                          const Limits& limits) {
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

absl::Status LostLeaseError(size_t index, const LeaseRef& ref, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "leases[%d]: the lease on event %d (delivery %d) is not held: %s; the event may be "
      "handled more than once",
      index, ref.sequence, ref.delivery_count, why));
}

struct ConsumerGroups::Group {
  std::string name;
  ConsumerGroupOptions options;
  // `options` as kGroupCreate records them.
  std::string encoded_options;
  uint64_t position = 0;
  // Leased or awaiting redelivery, by sequence. std::map: leases_ points into it.
  std::map<uint64_t, Pending> pending;
  // The sequences of the pending events that await redelivery.
  absl::btree_set<uint64_t> ready;
  absl::btree_map<uint64_t, DeadLetter> dead_letters;
  absl::flat_hash_map<std::string, Consumer> consumers;
  // MemoryFootprint of the events in `pending` and `dead_letters`.
  size_t bytes = 0;
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

absl::StatusOr<ConsumerGroups::Group*> ConsumerGroups::FindLocked(absl::string_view name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("consumer group \"", name, "\" does not exist"));
  }
  return it->second.get();
}

absl::Status ConsumerGroups::WritableLocked() const {
  return options_.journal == nullptr ? absl::OkStatus() : options_.journal->status();
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Create(absl::string_view name,
                                                         const ConsumerGroupOptions& options,
                                                         const GroupStart& start,
                                                         CommitTicket* committed) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateConsumerGroupOptions(options, options_.limits); !s.ok()) return s;
  MutexLock lock(&mu_);
  if (absl::Status s = WritableLocked(); !s.ok()) return s;
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
  const std::string encoded = EncodeOptions(options);
  JournalRecord create = GroupRecord(RecordType::kGroupCreate, name);
  create.options = encoded;
  create.position = *position;
  Change change;
  UndoLocked(change, GroupRecord(RecordType::kGroupDelete, name));
  RedoLocked(change, create);
  CommitLocked(change, committed);
  return InfoLocked(**FindLocked(name), 0);
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Get(absl::string_view name, size_t max_leases) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  Announcer readable(this);
  absl::StatusOr<ConsumerGroupInfo> info;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked(clock_->Now(), &readable.groups);
    absl::StatusOr<Group*> group = FindLocked(name);
    if (group.ok()) {
      info = InfoLocked(**group, max_leases);
    } else {
      info = group.status();
    }
  }
  return info;
}

absl::StatusOr<ConsumerGroups::Page> ConsumerGroups::List(int page_size, absl::string_view after) {
  if (absl::Status s = ValidatePageSize(page_size); !s.ok()) return s;
  const size_t size = EffectivePageSize(page_size, options_.limits);
  Announcer readable(this);
  Page page;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked(clock_->Now(), &readable.groups);
    for (auto it = groups_.upper_bound(after); it != groups_.end(); ++it) {
      if (page.groups.size() == size) {
        page.next_after = page.groups.back().name;
        break;
      }
      page.groups.push_back(InfoLocked(*it->second, 0));
    }
  }
  return page;
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Delete(absl::string_view name,
                                                         CommitTicket* committed) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  // Those waiting on the group learn that it is gone.
  Announcer readable(this);
  MutexLock lock(&mu_);
  if (absl::Status s = WritableLocked(); !s.ok()) return s;
  absl::StatusOr<Group*> group = FindLocked(name);
  if (!group.ok()) return group.status();
  readable.groups.emplace_back(name);
  ConsumerGroupInfo deleted = InfoLocked(**group, 0);
  Change change;
  // An undo batch is applied last record first.
  std::vector<JournalRecord> rebuild;
  ForEachGroupRecordLocked(**group, /*pending_only=*/false,
                           [&](const JournalRecord& r) { rebuild.push_back(r); });
  for (auto it = rebuild.rbegin(); it != rebuild.rend(); ++it) UndoLocked(change, *it);
  RedoLocked(change, GroupRecord(RecordType::kGroupDelete, name));
  CommitLocked(change, committed);
  return deleted;
}

absl::StatusOr<ConsumerGroupInfo> ConsumerGroups::Reset(absl::string_view name,
                                                        const GroupStart& start,
                                                        CommitTicket* committed) {
  if (absl::Status s = ValidateName("name", name, options_.limits); !s.ok()) return s;
  ConsumerGroupInfo info;
  {
    MutexLock lock(&mu_);
    if (absl::Status s = WritableLocked(); !s.ok()) return s;
    absl::StatusOr<Group*> found = FindLocked(name);
    if (!found.ok()) return found.status();
    absl::StatusOr<uint64_t> position = StartPositionOf(start);
    if (!position.ok()) return position.status();
    Group& group = **found;
    Change change;
    // Applied last record first: the position, then the pending events.
    ForEachGroupRecordLocked(group, /*pending_only=*/true,
                             [&](const JournalRecord& r)
                                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { UndoLocked(change, r); });
    UndoLocked(change, PositionRecord(group.name, group.position));
    JournalRecord reset = GroupRecord(RecordType::kGroupReset, group.name);
    reset.position = *position;
    RedoLocked(change, reset);
    CommitLocked(change, committed);
    info = InfoLocked(group, 0);
  }
  Announce({std::string(name)});
  return info;
}

absl::StatusOr<PollResult> ConsumerGroups::Poll(absl::string_view group_name,
                                                absl::string_view consumer, size_t max_events,
                                                CommitTicket* committed) {
  if (absl::Status s = ValidateName("group", group_name, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateName("consumer", consumer, options_.limits); !s.ok()) return s;
  if (max_events == 0) return InvalidField("max_events", "must be positive");
  max_events = std::min(max_events, options_.limits.max_poll_events);
  Announcer readable(this);
  PollResult result;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    ExpireLeasesLocked(now, &readable.groups);
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    Group& group = **found;
    status = WritableLocked();
    if (status.ok()) status = TouchConsumerLocked(group, consumer, now);
    const size_t unacked = status.ok() ? group.consumers.at(consumer).unacked : 0;
    const size_t allowed = group.options.max_unacked_per_consumer;
    const size_t want = unacked >= allowed ? 0 : std::min(max_events, allowed - unacked);
    // The answer fits in one response, like a ListMembers page: it holds at
    // least one event, and stops before one that would not fit.
    size_t bytes = 0;
    size_t redeliveries = 0;
    for (auto it = group.ready.begin(); it != group.ready.end() && redeliveries < want; ++it) {
      const size_t size = ResponseBytesOf(group.pending.at(*it).event);
      if (redeliveries > 0 && bytes + size > options_.limits.max_response_bytes) break;
      bytes += size;
      ++redeliveries;
    }
    // A Read returns at least one event, whatever its size: read only with
    // room for the largest.
    const bool room_left =
        redeliveries == 0 ||
        (redeliveries < want && redeliveries == group.ready.size() &&
         bytes + MaxResponseBytesOfAnEvent(options_.limits) <= options_.limits.max_response_bytes);
    // The source is read before anything changes, so a failed read changes
    // nothing.
    FeedRead read;
    read.position = group.position;
    if (status.ok() && room_left && want > redeliveries) {
      status = ReadFeedLocked(group, want - redeliveries,
                              options_.limits.max_response_bytes - bytes, &read);
    }
    if (status.ok()) {
      const int64_t deadline_ms = CeilMillis(now + group.options.visibility_timeout);
      Change change;
      auto deliver = [&](const Pending& pending) {
        result.deliveries.push_back({.event = pending.event,
                                     .delivery_count = pending.delivery_count,
                                     .lease_deadline = TimeOfDeadline(pending.deadline_ms)});
      };
      for (size_t i = 0; i < redeliveries; ++i) {
        const uint64_t sequence = *group.ready.begin();
        const Pending& pending = group.pending.at(sequence);
        UndoLocked(change,
                   LeaseRecord(group.name, sequence, pending.delivery_count, "", kNoDeadlineMs));
        RedoLocked(change, LeaseRecord(group.name, sequence, pending.delivery_count + 1, consumer,
                                       deadline_ms));
        deliver(pending);
      }
      if (read.position != group.position) {
        UndoLocked(change, PositionRecord(group.name, group.position));
        RedoLocked(change, PositionRecord(group.name, read.position));
      }
      for (const ExpiryEvent& event : read.events) {
        UndoLocked(change, AckRecord(group.name, event.sequence));
        RedoLocked(change, EventRecord(RecordType::kGroupEvent, group.name, event, 1, consumer,
                                       deadline_ms));
        deliver(group.pending.at(event.sequence));
      }
      CommitLocked(change, committed);
      group.delivered_total += result.deliveries.size();
      if (read.lost.has_value()) {
        group.lost_sequences_total += read.lost->last - read.lost->first + 1;
        result.lost = read.lost;
      }
    }
  }
  if (!status.ok()) return status;
  return result;
}

absl::Status ConsumerGroups::ReadFeedLocked(const Group& group, size_t want, size_t response_bytes,
                                            FeedRead* read) const {
  const Limits& limits = options_.limits;
  size_t pending = group.pending.size();
  size_t bytes = group.bytes;
  for (int reads = 0; reads < kMaxReadsPerPoll && want > 0; ++reads) {
    if (pending >= limits.max_group_pending || bytes >= limits.max_group_bytes) break;
    // A Read counts an event's strings only; the entry overhead is set
    // aside for the events it may return.
    const size_t overhead = want * kResponseEntryOverhead;
    const ReadLimits read_limits = {
        .max_events = std::min(want, limits.max_group_pending - pending),
        .max_bytes = std::min(limits.max_group_bytes - bytes,
                              response_bytes > overhead ? response_bytes - overhead : 1)};
    absl::StatusOr<EventBatch> batch =
        source_->Read(read->position, group.options.filter, read_limits);
    if (!batch.ok()) {
      const uint64_t oldest = source_->oldest_retained_sequence();
      if (batch.status().code() != absl::StatusCode::kOutOfRange || read->position + 1 >= oldest) {
        return batch.status();
      }
      // The source discarded events the group had not received: tell the
      // consumer this Poll answers, and go on after them.
      const uint64_t first = read->lost.has_value() ? read->lost->first : read->position + 1;
      read->lost = LostRange{.first = first, .last = oldest - 1};
      read->position = oldest - 1;
      continue;
    }
    if (batch->examined_sequence == read->position) break;
    read->position = batch->examined_sequence;
    for (ExpiryEvent& event : batch->events) {
      ++pending;
      bytes += MemoryFootprint(event);
      --want;
      const size_t size = ResponseBytesOf(event);
      response_bytes = size < response_bytes ? response_bytes - size : 0;
      read->events.push_back(std::move(event));
    }
    if (response_bytes < MaxResponseBytesOfAnEvent(limits)) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::Ack(absl::string_view group,
                                                              absl::string_view consumer,
                                                              absl::Span<const LeaseRef> leases,
                                                              CommitTicket* committed) {
  return ForEachHeldLease(
      group, consumer, leases, committed,
      [this](Group& g, Pending& pending, Change& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        UndoLocked(change,
                   EventRecord(RecordType::kGroupEvent, g.name, pending.event,
                               pending.delivery_count, pending.consumer, pending.deadline_ms));
        RedoLocked(change, AckRecord(g.name, pending.event.sequence));
        ++g.acked_total;
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::Nack(absl::string_view group,
                                                               absl::string_view consumer,
                                                               absl::Span<const LeaseRef> leases,
                                                               CommitTicket* committed) {
  const absl::Time now = clock_->Now();
  return ForEachHeldLease(
      group, consumer, leases, committed,
      [this, now](Group& g, Pending& pending, Change& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        UndoLocked(change,
                   EventRecord(RecordType::kGroupEvent, g.name, pending.event,
                               pending.delivery_count, pending.consumer, pending.deadline_ms));
        RedoLocked(change, ReleaseRecordLocked(g, pending, now));
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::ExtendLeases(
    absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
    absl::Duration extension, CommitTicket* committed) {
  if (extension <= absl::ZeroDuration() || extension > options_.limits.max_visibility_timeout) {
    return InvalidField("extension",
                        absl::StrCat("must be positive and at most ",
                                     absl::FormatDuration(options_.limits.max_visibility_timeout)));
  }
  const int64_t deadline_ms = CeilMillis(clock_->Now() + extension);
  return ForEachHeldLease(group, consumer, leases, committed,
                          [this, deadline_ms](Group& g, Pending& pending,
                                              Change& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                            const uint64_t sequence = pending.event.sequence;
                            UndoLocked(change, LeaseRecord(g.name, sequence, pending.delivery_count,
                                                           pending.consumer, pending.deadline_ms));
                            RedoLocked(change, LeaseRecord(g.name, sequence, pending.delivery_count,
                                                           pending.consumer, deadline_ms));
                            return absl::OkStatus();
                          });
}

absl::StatusOr<std::vector<absl::Status>> ConsumerGroups::ForEachHeldLease(
    absl::string_view group_name, absl::string_view consumer, absl::Span<const LeaseRef> leases,
    CommitTicket* committed, const PerLease& fn) {
  if (absl::Status s = ValidateName("group", group_name, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateName("consumer", consumer, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateCount("leases", leases.size(), options_.limits); !s.ok()) return s;
  Announcer readable(this);
  std::vector<absl::Status> results;
  results.reserve(leases.size());
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    ExpireLeasesLocked(now, &readable.groups);
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    if (absl::Status s = WritableLocked(); !s.ok()) return s;
    Group& group = **found;
    if (auto it = group.consumers.find(consumer); it != group.consumers.end()) {
      it->second.last_seen = now;
    }
    Change change;
    bool held = false;
    for (size_t i = 0; i < leases.size(); ++i) {
      const LeaseRef& ref = leases[i];
      auto it = group.pending.find(ref.sequence);
      if (it == group.pending.end()) {
        results.push_back(LostLeaseError(
            i, ref,
            ref.sequence > group.position
                ? "the group has not delivered it"
                : "it is not pending: acknowledged already (by this or another consumer), "
                  "dead-lettered, or dropped by a reset of the group"));
      } else if (it->second.consumer.empty()) {
        results.push_back(LostLeaseError(i, ref,
                                         "the lease expired or was released and the event awaits "
                                         "redelivery"));
      } else if (it->second.consumer != consumer ||
                 it->second.delivery_count != ref.delivery_count) {
        results.push_back(
            LostLeaseError(i, ref,
                           absl::StrFormat("delivery %d of it is leased to consumer \"%s\"",
                                           it->second.delivery_count, it->second.consumer)));
      } else {
        results.push_back(fn(group, it->second, change));
        held = true;
      }
    }
    CommitLocked(change, committed);
    // A consumer that acked or released leases may take more.
    if (held) readable.groups.push_back(group.name);
  }
  return results;
}

absl::StatusOr<DeadLetterPage> ConsumerGroups::ListDeadLetters(absl::string_view group_name,
                                                               uint64_t after, int page_size) {
  if (absl::Status s = ValidateName("group", group_name, options_.limits); !s.ok()) return s;
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
                                                          absl::Span<const uint64_t> sequences,
                                                          CommitTicket* committed) {
  if (absl::Status s = ValidateName("group", group_name, options_.limits); !s.ok()) return s;
  if (sequences.size() > options_.limits.max_members_per_request) {
    return InvalidField("sequences",
                        absl::StrFormat("%d entries exceed the limit of %d", sequences.size(),
                                        options_.limits.max_members_per_request));
  }
  size_t redriven = 0;
  {
    MutexLock lock(&mu_);
    if (absl::Status s = WritableLocked(); !s.ok()) return s;
    absl::StatusOr<Group*> found = FindLocked(group_name);
    if (!found.ok()) return found.status();
    Group& group = **found;
    Change change;
    auto redrive = [&](const DeadLetter& letter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      UndoLocked(change, EventRecord(RecordType::kGroupDeadLetter, group.name, letter.event,
                                     letter.delivery_count, letter.consumer,
                                     FloorMillis(letter.dead_lettered_at)));
      RedoLocked(change, EventRecord(RecordType::kGroupEvent, group.name, letter.event, 0, "",
                                     kNoDeadlineMs));
      ++redriven;
    };
    auto full = [&] { return group.pending.size() >= options_.limits.max_group_pending; };
    if (sequences.empty()) {
      while (!group.dead_letters.empty() && !full()) redrive(group.dead_letters.begin()->second);
    } else {
      for (uint64_t sequence : sequences) {
        if (full()) break;
        if (auto it = group.dead_letters.find(sequence); it != group.dead_letters.end()) {
          redrive(it->second);
        }
      }
    }
    CommitLocked(change, committed);
  }
  if (redriven > 0) Announce({std::string(group_name)});
  return redriven;
}

size_t ConsumerGroups::ExpireLeases() {
  Announcer readable(this);
  size_t expired;
  {
    MutexLock lock(&mu_);
    expired = ExpireLeasesLocked(clock_->Now(), &readable.groups);
  }
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

absl::Status ConsumerGroups::Apply(const JournalRecord& record) {
  MutexLock lock(&mu_);
  return ApplyLocked(record);
}

void ConsumerGroups::RollBack(const std::function<std::vector<std::string>()>& refuse) {
  MutexLock lock(&mu_);
  const std::vector<std::string> undos = refuse();
  std::vector<JournalRecord> records;
  for (const std::string& undo : undos) {
    records.clear();
    [[maybe_unused]] const absl::Status decoded = DecodeBatch(undo, [&](const JournalRecord& r) {
      if (IsGroupRecord(r.type)) records.push_back(r);
      return absl::OkStatus();
    });
    assert(decoded.ok() && "an undo batch does not decode");
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      [[maybe_unused]] const absl::Status applied = ApplyLocked(*it);
      assert(applied.ok() && "an undo record of the groups' own does not apply");
    }
  }
}

absl::Status ConsumerGroups::ForEachStateRecord(
    const std::function<absl::Status(const JournalRecord&)>& fn) const {
  MutexLock lock(&mu_);
  absl::Status status;
  for (const auto& [name, group] : groups_) {
    ForEachGroupRecordLocked(*group, /*pending_only=*/false, [&](const JournalRecord& r) {
      if (status.ok()) status = fn(r);
    });
    if (!status.ok()) break;
  }
  return status;
}

void ConsumerGroups::ForEachGroupRecordLocked(
    const Group& group, bool pending_only,
    const std::function<void(const JournalRecord&)>& fn) const {
  if (!pending_only) {
    JournalRecord create = GroupRecord(RecordType::kGroupCreate, group.name);
    create.options = group.encoded_options;
    create.position = group.position;
    fn(create);
  }
  for (const auto& [sequence, pending] : group.pending) {
    fn(EventRecord(RecordType::kGroupEvent, group.name, pending.event, pending.delivery_count,
                   pending.consumer, pending.deadline_ms));
  }
  if (pending_only) return;
  for (const auto& [sequence, letter] : group.dead_letters) {
    fn(EventRecord(RecordType::kGroupDeadLetter, group.name, letter.event, letter.delivery_count,
                   letter.consumer, FloorMillis(letter.dead_lettered_at)));
  }
}

void ConsumerGroups::UndoLocked(Change& change, const JournalRecord& undo) const {
  if (options_.journal != nullptr) change.undo.GroupRecord(undo);
}

void ConsumerGroups::RedoLocked(Change& change, const JournalRecord& redo) {
  if (options_.journal != nullptr) change.redo.GroupRecord(redo);
  [[maybe_unused]] const absl::Status applied = ApplyLocked(redo);
  assert(applied.ok() && "a record of the groups' own does not apply");
}

void ConsumerGroups::CommitLocked(Change& change, CommitTicket* committed) {
  if (options_.journal == nullptr || change.redo.empty()) return;
  const CommitTicket ticket =
      options_.journal->Commit(change.redo.Finish(0), change.undo.Finish(0), 0);
  if (committed != nullptr) *committed = ticket;
}

absl::Status ConsumerGroups::ApplyLocked(const JournalRecord& r) {
  if (!IsGroupRecord(r.type)) return absl::OkStatus();
  if (r.type == RecordType::kGroupCreate) {
    absl::StatusOr<ConsumerGroupOptions> options = DecodeOptions(r.options);
    if (!options.ok()) return options.status();
    std::unique_ptr<Group>& slot = groups_[r.group];
    if (slot != nullptr) DropPendingLocked(*slot);
    slot = std::make_unique<Group>();
    slot->name = std::string(r.group);
    slot->options = *std::move(options);
    slot->encoded_options = std::string(r.options);
    slot->position = r.position;
    return absl::OkStatus();
  }
  auto found = groups_.find(r.group);
  if (found == groups_.end()) return absl::OkStatus();
  Group& group = *found->second;
  auto pending = group.pending.find(r.sequence);
  switch (r.type) {
    case RecordType::kGroupDelete:
      DropPendingLocked(group);
      groups_.erase(found);
      break;
    case RecordType::kGroupReset:
      DropPendingLocked(group);
      group.position = r.position;
      break;
    case RecordType::kGroupPosition:
      group.position = r.position;
      break;
    case RecordType::kGroupEvent: {
      // Everything is copied out of `r` first: its views may point into the
      // entries replaced below.
      ExpiryEvent event = EventOf(r);
      const std::string consumer(r.consumer);
      if (auto letter = group.dead_letters.find(r.sequence); letter != group.dead_letters.end()) {
        group.bytes -= MemoryFootprint(letter->second.event);
        group.dead_letters.erase(letter);
      }
      if (pending != group.pending.end()) ErasePendingLocked(group, r.sequence);
      group.bytes += MemoryFootprint(event);
      Pending& added = group.pending
                           .emplace(r.sequence, Pending{.group = &group,
                                                        .event = std::move(event),
                                                        .delivery_count = r.delivery_count})
                           .first->second;
      SetLeaseLocked(group, added, consumer, r.at_ms);
      break;
    }
    case RecordType::kGroupLease: {
      if (pending == group.pending.end()) break;
      const std::string consumer(r.consumer);
      if (pending->second.consumer.empty()) {
        group.ready.erase(r.sequence);
      } else {
        DropLeaseLocked(group, pending->second);
      }
      pending->second.delivery_count = r.delivery_count;
      SetLeaseLocked(group, pending->second, consumer, r.at_ms);
      break;
    }
    case RecordType::kGroupAck:
      if (pending != group.pending.end()) ErasePendingLocked(group, r.sequence);
      break;
    case RecordType::kGroupDeadLetter: {
      DeadLetter letter{.event = EventOf(r),
                        .delivery_count = r.delivery_count,
                        .consumer = std::string(r.consumer),
                        .dead_lettered_at = TimeOfDeadline(r.at_ms)};
      if (pending != group.pending.end()) ErasePendingLocked(group, r.sequence);
      if (auto old = group.dead_letters.find(r.sequence); old != group.dead_letters.end()) {
        group.bytes -= MemoryFootprint(old->second.event);
      }
      group.bytes += MemoryFootprint(letter.event);
      group.dead_letters.insert_or_assign(r.sequence, std::move(letter));
      break;
    }
    default:
      break;
  }
  return absl::OkStatus();
}

JournalRecord ConsumerGroups::ReleaseRecordLocked(const Group& group, const Pending& pending,
                                                  absl::Time now) const {
  if (pending.delivery_count >= group.options.max_deliveries &&
      group.dead_letters.size() < options_.limits.max_group_dead_letters) {
    return EventRecord(RecordType::kGroupDeadLetter, group.name, pending.event,
                       pending.delivery_count, pending.consumer, FloorMillis(now));
  }
  return LeaseRecord(group.name, pending.event.sequence, pending.delivery_count, "", kNoDeadlineMs);
}

size_t ConsumerGroups::ExpireLeasesLocked(absl::Time now, std::vector<std::string>* readable) {
  const int64_t now_ms = FloorMillis(now);
  size_t expired = 0;
  while (leases_.NextDeadline() <= now_ms) {
    const Pending& pending = *leases_.Front();
    const Group& group = *pending.group;
    if (readable->empty() || readable->back() != group.name) readable->push_back(group.name);
    [[maybe_unused]] const absl::Status applied =
        ApplyLocked(ReleaseRecordLocked(group, pending, now));
    assert(applied.ok() && "a record of the groups' own does not apply");
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

void ConsumerGroups::SetLeaseLocked(Group& group, Pending& pending, absl::string_view consumer,
                                    int64_t deadline_ms) {
  if (consumer.empty()) {
    group.ready.insert(pending.event.sequence);
    return;
  }
  pending.consumer = std::string(consumer);
  ++group.consumers[consumer].unacked;
  QueueLeaseLocked(pending, deadline_ms);
}

void ConsumerGroups::DropLeaseLocked(Group& group, Pending& pending) {
  leases_.Remove(pending.deadline_ms, &pending);
  pending.deadline_ms = kNoDeadlineMs;
  // A consumer holding leases is never evicted (TouchConsumerLocked).
  --group.consumers.at(pending.consumer).unacked;
  pending.consumer.clear();
}

void ConsumerGroups::ErasePendingLocked(Group& group, uint64_t sequence) {
  auto it = group.pending.find(sequence);
  Pending& pending = it->second;
  if (pending.consumer.empty()) {
    group.ready.erase(sequence);
  } else {
    DropLeaseLocked(group, pending);
  }
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

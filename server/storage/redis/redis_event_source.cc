#include "server/storage/redis/redis_event_source.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/base/deadline.h"

namespace lapse::redis {
namespace {

constexpr uint64_t kSpacing = RedisEventSource::kPositionSpacing;
// Token vectors held for cursors between events, at most.
constexpr size_t kMaxFloors = 4096;

std::string PartitionKey(absl::string_view tag, absl::string_view name) {
  return absl::StrCat("lapse:{", tag, "}:", name);
}

// A stream entry's sequence ("<sequence>-0"); 0 when malformed.
uint64_t SequenceOfId(absl::string_view id) {
  uint64_t sequence = 0;
  const std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(id, absl::MaxSplits('-', 1));
  if (!absl::SimpleAtoi(parts.first, &sequence)) return 0;
  return sequence;
}

// Milliseconds written by a script (an integer, maybe as a Lua float).
int64_t MillisOf(absl::string_view text) {
  int64_t ms = 0;
  if (absl::SimpleAtoi(text, &ms)) return ms;
  double d = 0;
  return absl::SimpleAtod(text, &d) ? static_cast<int64_t>(d) : 0;
}

// One stream entry as an event; false when malformed.
bool EventOfEntry(const RedisReply& entry, uint64_t* sequence, ExpiryEvent* event) {
  if (entry.elements.size() != 2) return false;
  *sequence = SequenceOfId(entry.elements[0].str);
  if (*sequence == 0) return false;
  const std::vector<RedisReply>& fields = entry.elements[1].elements;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& name = fields[i].str;
    const std::string& value = fields[i + 1].str;
    if (name == "c") {
      event->collection = value;
    } else if (name == "k") {
      event->key = value;
    } else if (name == "v") {
      event->value = value;
    } else if (name == "d") {
      event->expire_time = TimeOfDeadline(MillisOf(value));
    } else if (name == "x") {
      event->expired_at = absl::FromUnixMillis(MillisOf(value));
    }
  }
  return true;
}

}  // namespace

struct RedisEventSource::Partition {
  Partition() = default;
  Partition(Partition&&) = default;
  Partition(const Partition&) = delete;

  // The last sequence read into the buffer, or found trimmed.
  uint64_t read = 0;
  // The highest watermark Advance was given.
  uint64_t target = 0;
  bool in_flight = false;
  // The last sequence examined before the buffer's first event.
  uint64_t base = 0;
  // Where reading started at Open: examined before any event this replica
  // ever buffered.
  uint64_t initial = 0;
  // Sequences below this are known trimmed from the stream.
  uint64_t stream_first = 1;
  // Feed indexes of this partition's buffered events, in order.
  std::deque<uint64_t> indexes;
  // WhenRead's callbacks, with the sequence each waits for.
  std::vector<std::pair<uint64_t, absl::AnyInvocable<void() &&>>> waiting;
};

// Partition `partition`'s sequences `from`..`to` were missing from its stream;
// the first event read after them has feed index `index`.
struct RedisEventSource::Gap {
  uint64_t index;
  uint32_t partition;
  uint64_t from;
  uint64_t to;
};

// A decoded position: after feed index `index`, skipping what `floor` (when
// set) says was already seen.
struct RedisEventSource::Cursor {
  uint64_t index = 0;
  uint64_t slot = 0;
  const std::vector<uint64_t>* floor = nullptr;
};

absl::StatusOr<std::unique_ptr<RedisEventSource>> RedisEventSource::Open(
    ClusterRouter* router, RedisEventSourceOptions options) {
  const size_t n = options.tags.size();
  std::unique_ptr<RedisEventSource> source(new RedisEventSource(router, std::move(options)));
  struct Answers {
    Mutex mu;
    CondVar cv;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::StatusOr<RedisReply>> replies ABSL_GUARDED_BY(mu);
  };
  Answers answers;
  {
    MutexLock lock(&answers.mu);
    answers.pending = 2 * n;
    answers.replies.assign(2 * n, absl::UnknownError("unanswered"));
  }
  std::vector<std::pair<std::string, std::string>> keys;
  for (const std::string& tag : source->options_.tags) {
    keys.emplace_back(PartitionKey(tag, "delivered"), PartitionKey(tag, "events"));
  }
  auto answer = [&answers](size_t i) {
    return [&answers, i](absl::StatusOr<RedisReply> reply) {
      MutexLock lock(&answers.mu);
      answers.replies[i] = std::move(reply);
      if (--answers.pending == 0) answers.cv.Signal();
    };
  };
  for (size_t p = 0; p < n; ++p) {
    const auto& [delivered, events] = keys[p];
    router->Send(RedisCall::Command(delivered, {"GET", delivered}).Idempotent(), answer(2 * p));
    router->Send(
        RedisCall::Command(events, {"XRANGE", events, "-", "+", "COUNT", "1"}).Idempotent(),
        answer(2 * p + 1));
  }
  std::vector<absl::StatusOr<RedisReply>> replies;
  {
    // The router answers every call within its retry budget.
    MutexLock lock(&answers.mu);
    while (answers.pending > 0) answers.cv.WaitWithTimeout(&answers.mu, absl::InfiniteDuration());
    replies = std::move(answers.replies);
  }
  std::vector<uint64_t> delivered(n);
  {
    MutexLock lock(&source->mu_);
    const size_t share = source->options_.max_events / std::max<size_t>(n, 1);
    for (size_t p = 0; p < n; ++p) {
      for (const absl::StatusOr<RedisReply>& r : {replies[2 * p], replies[2 * p + 1]}) {
        if (!r.ok()) return r.status();
        if (r->type == RedisReply::Type::kError) {
          return absl::InternalError(absl::StrCat("Redis answered: ", r->str));
        }
      }
      const RedisReply& watermark = *replies[2 * p];
      if (watermark.type != RedisReply::Type::kNil &&
          !absl::SimpleAtoi(watermark.str, &delivered[p])) {
        return absl::DataLossError(absl::StrCat("the delivery watermark ", keys[p].first,
                                                " is not a number: \"", watermark.str, "\""));
      }
      const RedisReply& first = *replies[2 * p + 1];
      const uint64_t first_sequence = first.elements.empty()
                                          ? 0
                                          : SequenceOfId(first.elements[0].elements.empty()
                                                             ? ""
                                                             : first.elements[0].elements[0].str);
      Partition& partition = source->partitions_[p];
      uint64_t start = delivered[p] > share ? delivered[p] - share : 0;
      if (first_sequence > 0) {
        start = std::max(start, first_sequence - 1);
        partition.stream_first = first_sequence;
      } else {
        start = delivered[p];
        partition.stream_first = delivered[p] + 1;
      }
      partition.read = partition.base = partition.initial = start;
    }
  }
  for (size_t p = 0; p < n; ++p) source->Advance(static_cast<int>(p), delivered[p]);
  return source;
}

RedisEventSource::RedisEventSource(ClusterRouter* router, RedisEventSourceOptions options)
    : router_(router),
      options_(std::move(options)),
      feed_({.store_id = options_.store_id,
             .first_sequence = 1,
             .max_events = options_.max_events,
             .max_bytes = options_.max_bytes,
             .on_append = options_.on_append}) {
  MutexLock lock(&mu_);
  partitions_.resize(options_.tags.size());
}

RedisEventSource::~RedisEventSource() {
  std::vector<absl::AnyInvocable<void() &&>> due;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    while (reads_in_flight_ > 0) reads_done_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
    for (size_t p = 0; p < partitions_.size(); ++p) {
      for (auto& then : DueWaitersLocked(p)) due.push_back(std::move(then));
    }
  }
  for (auto& then : due) std::move(then)();
}

void RedisEventSource::WhenRead(int partition, uint64_t sequence,
                                absl::AnyInvocable<void() &&> then) {
  {
    MutexLock lock(&mu_);
    if (partition >= 0 && static_cast<size_t>(partition) < partitions_.size()) {
      Partition& p = partitions_[partition];
      if (p.read < sequence && p.in_flight) {
        p.waiting.emplace_back(sequence, std::move(then));
        return;
      }
    }
  }
  std::move(then)();
}

std::vector<absl::AnyInvocable<void() &&>> RedisEventSource::DueWaitersLocked(size_t p) {
  Partition& partition = partitions_[p];
  std::vector<absl::AnyInvocable<void() &&>> due;
  auto& waiting = partition.waiting;
  for (size_t i = 0; i < waiting.size();) {
    if (!partition.in_flight || waiting[i].first <= partition.read) {
      due.push_back(std::move(waiting[i].second));
      waiting[i] = std::move(waiting.back());
      waiting.pop_back();
    } else {
      ++i;
    }
  }
  return due;
}

void RedisEventSource::Advance(int partition, uint64_t delivered) {
  uint64_t from;
  {
    MutexLock lock(&mu_);
    if (partition < 0 || static_cast<size_t>(partition) >= partitions_.size()) return;
    Partition& p = partitions_[partition];
    p.target = std::max(p.target, delivered);
    if (stopping_ || p.in_flight || p.read >= p.target) return;
    p.in_flight = true;
    ++reads_in_flight_;
    from = p.read + 1;
    delivered = p.target;
  }
  SendRead(partition, from, delivered);
}

void RedisEventSource::SendRead(int p, uint64_t from, uint64_t to) {
  const std::string key = PartitionKey(options_.tags[p], "events");
  router_->Send(
      RedisCall::Command(key, {"XRANGE", key, absl::StrCat(from, "-0"), absl::StrCat(to, "-0"),
                               "COUNT", absl::StrCat(options_.read_batch)})
          .Idempotent(),
      [this, p, from](absl::StatusOr<RedisReply> reply) { OnRead(p, from, std::move(reply)); });
}

void RedisEventSource::OnRead(int p, uint64_t from, absl::StatusOr<RedisReply> reply) {
  std::optional<std::pair<uint64_t, uint64_t>> next;
  std::vector<absl::AnyInvocable<void() &&>> due;
  uint64_t readable = 0;
  {
    MutexLock lock(&mu_);
    Partition& partition = partitions_[p];
    const bool ok = reply.ok() && reply->type == RedisReply::Type::kArray;
    std::vector<ExpiryEvent> events;
    std::vector<uint64_t> sequences;
    if (ok) {
      for (const RedisReply& entry : reply->elements) {
        ExpiryEvent event;
        uint64_t sequence;
        if (!EventOfEntry(entry, &sequence, &event) || sequence <= partition.read ||
            sequence < from) {
          continue;
        }
        const uint64_t expected = partition.read + 1;
        const uint64_t index = feed_.last_sequence() + events.size() + 1;
        if (sequence > expected) {
          gaps_.push_back({index, static_cast<uint32_t>(p), expected, sequence - 1});
          partition.stream_first = std::max(partition.stream_first, sequence);
        }
        partition.read = sequence;
        sequences.push_back(sequence);
        events.push_back(std::move(event));
      }
    }
    if (!events.empty()) {
      const size_t count = events.size();
      readable = feed_.Append(std::move(events));
      for (size_t i = 0; i < count; ++i) {
        const uint64_t index = readable - count + 1 + i;
        partition.indexes.push_back(index);
        origins_.push_back(static_cast<uint32_t>(p));
        sequences_.push_back(sequences[i]);
      }
      TrimLocked();
    }
    if (!stopping_ && readable != 0 && partition.read < partition.target) {
      next = {partition.read + 1, partition.target};
    } else {
      partition.in_flight = false;
    }
    due = DueWaitersLocked(p);
  }
  if (readable != 0 && options_.on_readable) options_.on_readable(readable * kSpacing);
  for (auto& then : due) std::move(then)();
  if (next.has_value()) {
    SendRead(p, next->first, next->second);
    return;
  }
  MutexLock lock(&mu_);
  if (--reads_in_flight_ == 0) reads_done_.SignalAll();
}

void RedisEventSource::TrimLocked() {
  const uint64_t front = feed_.oldest_retained_sequence();
  const uint64_t last = feed_.last_sequence();
  while (origins_.size() > last + 1 - front) {
    Partition& partition = partitions_[origins_.front()];
    partition.base = sequences_.front();
    partition.indexes.pop_front();
    origins_.pop_front();
    sequences_.pop_front();
  }
  while (!gaps_.empty() && gaps_.front().index < front) gaps_.pop_front();
  for (auto it = floors_.begin(); it != floors_.end();) {
    bool dominated = true;
    for (size_t p = 0; p < partitions_.size() && dominated; ++p) {
      dominated = partitions_[p].base >= it->second[p];
    }
    if (dominated) {
      floors_.erase(it++);
    } else {
      ++it;
    }
  }
}

uint64_t RedisEventSource::ExaminedLocked(size_t p, uint64_t n) const {
  const Partition& partition = partitions_[p];
  const uint64_t front = feed_.oldest_retained_sequence();
  if (n + 1 < front) return partition.initial;
  auto it = std::upper_bound(partition.indexes.begin(), partition.indexes.end(), n);
  if (it == partition.indexes.begin()) return partition.base;
  return sequences_[*std::prev(it) - front];
}

absl::StatusOr<RedisEventSource::Cursor> RedisEventSource::CursorLocked(uint64_t position) const {
  Cursor cursor;
  cursor.index = position / kSpacing;
  cursor.slot = position % kSpacing;
  // The position before an event's (oldest_retained_sequence() - 1) is the
  // event before it.
  if (cursor.slot == kSpacing - 1) cursor.slot = 0;
  const uint64_t last = feed_.last_sequence();
  const uint64_t front = feed_.oldest_retained_sequence();
  const std::string id = options_.store_id.ToString();
  // A position between two events that no resumed cursor holds: not one
  // this replica gave out, or one it gave out and released.
  const bool unknown_slot = cursor.slot != 0 && !floors_.contains(cursor.slot);
  if (cursor.index > last || (unknown_slot && position > last * kSpacing)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "sequence %d is beyond the newest event %d of this replica of store %s: a position "
        "from another lapsed replica or another store (sequences of a store on a Redis Cluster "
        "are each replica's own); resume with a resume_token, or start anew "
        "(START_POSITION_OLDEST)",
        position, last * kSpacing, id));
  }
  if (cursor.index + 1 < front) {
    return absl::OutOfRangeError(absl::StrFormat(
        "events after sequence %d are no longer retained by this replica: %d of them were "
        "discarded; the oldest retained sequence is %d",
        position, front - cursor.index - 1, front * kSpacing));
  }
  if (unknown_slot) {
    return absl::OutOfRangeError(absl::StrFormat(
        "sequence %d belongs to another store, or to another lapsed replica of store %s: it "
        "is no position this replica holds (sequences of a store on a Redis Cluster are each "
        "replica's own, multiples of %d); resume with a resume_token, or start anew "
        "(START_POSITION_OLDEST)",
        position, id, kSpacing));
  }
  if (cursor.slot != 0) cursor.floor = &floors_.at(cursor.slot);
  for (const Gap& gap : gaps_) {
    if (gap.index <= cursor.index) continue;
    if (cursor.floor != nullptr && (*cursor.floor)[gap.partition] >= gap.to) continue;
    if (gap.index == cursor.index + 1) {
      return absl::OutOfRangeError(absl::StrFormat(
          "events after sequence %d are lost: partition %d's sequences %d to %d were trimmed "
          "from its stream (MAXLEN) before this replica read them; start anew "
          "(START_POSITION_NEW)",
          position, gap.partition, gap.from, gap.to));
    }
    break;
  }
  return cursor;
}

uint64_t RedisEventSource::read_sequence(int partition) const {
  ReaderMutexLock lock(&mu_);
  return partitions_[partition].read;
}

EventFeed::Retained RedisEventSource::retained() const { return feed_.retained(); }

uint64_t RedisEventSource::last_sequence() const { return feed_.last_sequence() * kSpacing; }

uint64_t RedisEventSource::oldest_retained_sequence() const {
  return feed_.oldest_retained_sequence() * kSpacing;
}

StoreId RedisEventSource::store_id() const { return options_.store_id; }

absl::Status RedisEventSource::CheckPosition(uint64_t after) const {
  ReaderMutexLock lock(&mu_);
  return CursorLocked(after).status();
}

std::string RedisEventSource::ResumeTokenAfter(uint64_t examined) const {
  ReaderMutexLock lock(&mu_);
  const uint64_t index = examined / kSpacing;
  const uint64_t slot = examined % kSpacing;
  auto floor = floors_.find(slot);
  ResumePosition position{.store = options_.store_id};
  for (size_t p = 0; p < partitions_.size(); ++p) {
    uint64_t sequence = ExaminedLocked(p, index);
    if (floor != floors_.end()) sequence = std::max(sequence, floor->second[p]);
    position.partitions.push_back({static_cast<uint32_t>(p), sequence});
  }
  return EncodeResumeToken(position);
}

absl::StatusOr<uint64_t> RedisEventSource::PositionOfToken(absl::string_view token) const {
  absl::StatusOr<ResumePosition> position = DecodeResumeToken(token);
  if (!position.ok()) return position.status();
  if (position->store != options_.store_id) {
    return absl::OutOfRangeError(absl::StrFormat(
        "resume_token: belongs to store %s, not to this server's store %s (another Redis "
        "Cluster, or one whose lapse:{meta} was recreated): its position means nothing here; "
        "start anew (START_POSITION_OLDEST or START_POSITION_NEW)",
        position->store.ToString(), options_.store_id.ToString()));
  }
  MutexLock lock(&mu_);
  const size_t n = partitions_.size();
  if (position->partitions.size() != n || position->partitions.back().partition != n - 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "resume_token: names %d partitions, but store %s has %d; pass a resume_token exactly "
        "as a WatchExpirationsResponse carried it",
        position->partitions.size(), options_.store_id.ToString(), n));
  }
  std::vector<uint64_t> wanted(n);
  const uint64_t front = feed_.oldest_retained_sequence();
  uint64_t index = feed_.last_sequence();
  for (size_t p = 0; p < n; ++p) {
    const Partition& partition = partitions_[p];
    const uint64_t t = wanted[p] = position->partitions[p].sequence;
    if (t < partition.base) {
      if (t + 1 < partition.stream_first) {
        return absl::OutOfRangeError(absl::StrFormat(
            "resume_token: partition %d's events %d to %d were trimmed from its stream "
            "(MAXLEN, the store's event retention); start anew (START_POSITION_OLDEST)",
            p, t + 1, partition.stream_first - 1));
      }
      return absl::OutOfRangeError(absl::StrFormat(
          "resume_token: partition %d's events %d to %d are no longer retained by this "
          "replica (it keeps the newest %d events); resume through a replica that still holds "
          "them, or start anew (START_POSITION_OLDEST)",
          p, t + 1, partition.base, options_.max_events));
    }
    // The last position where this partition has examined no more than t.
    auto above = std::partition_point(
        partition.indexes.begin(), partition.indexes.end(),
        [&](uint64_t i) ABSL_SHARED_LOCKS_REQUIRED(mu_) { return sequences_[i - front] <= t; });
    if (above != partition.indexes.end()) index = std::min(index, *above - 1);
  }
  bool exact = true;
  for (size_t p = 0; p < n && exact; ++p) exact = ExaminedLocked(p, index) == wanted[p];
  uint64_t slot = 0;
  if (!exact) {
    for (const auto& [s, floor] : floors_) {
      if (floor == wanted) slot = s;
    }
    if (slot == 0) {
      if (floors_.size() >= kMaxFloors) {
        return absl::UnavailableError(absl::StrFormat(
            "resume_token: this replica already serves %d watchers resuming from other "
            "replicas' tokens; retry in a moment, or through another replica",
            floors_.size()));
      }
      while (slot == 0 || floors_.contains(slot)) {
        slot = next_slot_;
        next_slot_ = next_slot_ % (kSpacing - 2) + 1;
      }
      floors_.emplace(slot, std::move(wanted));
    }
  }
  const uint64_t after = index * kSpacing + slot;
  if (absl::StatusOr<Cursor> cursor = CursorLocked(after); !cursor.ok()) return cursor.status();
  return after;
}

absl::StatusOr<EventBatch> RedisEventSource::Read(uint64_t after, const EventFilter& filter,
                                                  const ReadLimits& limits) const {
  ReaderMutexLock lock(&mu_);
  absl::StatusOr<Cursor> cursor = CursorLocked(after);
  if (!cursor.ok()) return cursor.status();
  ReadLimits bounded = limits;
  for (const Gap& gap : gaps_) {
    if (gap.index <= cursor->index) continue;
    if (cursor->floor != nullptr && (*cursor->floor)[gap.partition] >= gap.to) continue;
    bounded.max_examined = std::min<size_t>(bounded.max_examined, gap.index - 1 - cursor->index);
    break;
  }
  absl::StatusOr<EventBatch> batch = feed_.Read(cursor->index, filter, bounded);
  if (!batch.ok()) return batch.status();
  const uint64_t front = feed_.oldest_retained_sequence();
  if (cursor->floor != nullptr) {
    const std::vector<uint64_t>& floor = *cursor->floor;
    batch->events.erase(std::remove_if(batch->events.begin(), batch->events.end(),
                                       [&](const ExpiryEvent& e) ABSL_SHARED_LOCKS_REQUIRED(mu_) {
                                         const size_t i = e.sequence - front;
                                         return sequences_[i] <= floor[origins_[i]];
                                       }),
                        batch->events.end());
  }
  for (ExpiryEvent& e : batch->events) e.sequence *= kSpacing;
  const uint64_t examined = batch->examined_sequence;
  bool passed = true;
  for (size_t p = 0; cursor->floor != nullptr && p < partitions_.size() && passed; ++p) {
    passed = ExaminedLocked(p, examined) >= (*cursor->floor)[p];
  }
  batch->examined_sequence = examined * kSpacing + (passed ? 0 : cursor->slot);
  return batch;
}

}  // namespace lapse::redis

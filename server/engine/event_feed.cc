#include "server/engine/event_feed.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace lapse {

bool EventFilter::Matches(absl::string_view collection) const {
  if (!collections.empty()) return collections.contains(collection);
  return absl::StartsWith(collection, prefix);
}

EventFeed::EventFeed(const Options& options)
    : options_(options),
      front_sequence_(first_sequence()),
      visible_sequence_(front_sequence_ - 1) {}

uint64_t EventFeed::Append(std::vector<ExpiryEvent> events) {
  return Append(std::move(events), [](uint64_t, uint64_t) {});
}

uint64_t EventFeed::Append(std::vector<ExpiryEvent> events,
                           absl::FunctionRef<void(uint64_t first, uint64_t last)> then) {
  return Append(std::move(events), then, Notify::kNow);
}

uint64_t EventFeed::Append(std::vector<ExpiryEvent> events,
                           absl::FunctionRef<void(uint64_t first, uint64_t last)> then,
                           Notify notify) {
  std::vector<EventBlock> blocks;
  for (size_t i = 0; i < events.size(); ++i) {
    AddEvent(blocks, ViewOf(events[i]), events.size() - i);
  }
  return Append(std::move(blocks), then, notify);
}

uint64_t EventFeed::Append(std::vector<EventBlock> blocks,
                           absl::FunctionRef<void(uint64_t first, uint64_t last)> then,
                           Notify notify) {
  for (EventBlock& block : blocks) {
    // Outside the lock: a block reserved for far more events than it got
    // (a pass that found few due) gives the rest back before it is kept.
    block.ShrinkToFit();
    if (options_.on_append) {
      for (size_t i = 0; i < block.size(); ++i) options_.on_append(block[i]);
    }
  }
  uint64_t last;
  size_t appended;
  {
    MutexLock lock(&mu_);
    const uint64_t first = front_sequence_ + count_;
    appended = PushBlocksLocked(std::move(blocks));
    last = first + appended - 1;
    if (appended > 0) then(first, last);
    if (options_.visible_on_append) visible_sequence_ = last;
    TrimLocked();
  }
  if (appended > 0 && notify == Notify::kNow && options_.visible_on_append &&
      options_.on_readable) {
    options_.on_readable(last);
  }
  return last;
}

size_t EventFeed::PushBlocksLocked(std::vector<EventBlock> blocks) {
  size_t pushed = 0;
  for (EventBlock& block : blocks) {
    if (block.empty()) continue;
    for (size_t i = 0; i < block.size(); ++i) bytes_ += MemoryFootprint(block[i]);
    blocks_.push_back({.first_sequence = front_sequence_ + count_, .events = std::move(block)});
    count_ += blocks_.back().events.size();
    pushed += blocks_.back().events.size();
  }
  return pushed;
}

void EventFeed::NotifyReadable() {
  if (!options_.visible_on_append || !options_.on_readable) return;
  options_.on_readable(last_sequence());
}

void EventFeed::MakeVisibleThrough(uint64_t sequence) {
  uint64_t visible;
  {
    MutexLock lock(&mu_);
    const uint64_t last = front_sequence_ + count_ - 1;
    visible = std::min(sequence, last);
    if (visible <= visible_sequence_) return;
    visible_sequence_ = visible;
    // Retention could not drop these while they were invisible.
    TrimLocked();
  }
  if (options_.on_readable) options_.on_readable(visible);
}

void EventFeed::DropInvisible() {
  MutexLock lock(&mu_);
  while (count_ > 0 && front_sequence_ + count_ - 1 > visible_sequence_) {
    EventBlock& back = blocks_.back().events;
    bytes_ -= MemoryFootprint(back[back.size() - 1]);
    back.PopBack();
    --count_;
    if (back.size() == (blocks_.size() == 1 ? front_index_ : 0)) {
      blocks_.pop_back();
      if (blocks_.empty()) front_index_ = 0;
    }
  }
}

void EventFeed::Restore(std::vector<ExpiryEvent> events, uint64_t next_sequence) {
  assert(std::adjacent_find(events.begin(), events.end(),
                            [](const ExpiryEvent& a, const ExpiryEvent& b) {
                              return a.sequence >= b.sequence;
                            }) == events.end() &&
         "events not in strictly increasing sequence order");
  MutexLock lock(&mu_);
  assert(count_ == 0 && "Restore into a log already appended to");
  blocks_.clear();
  front_index_ = 0;
  count_ = 0;
  bytes_ = 0;
  if (!events.empty()) next_sequence = std::max(next_sequence, events.back().sequence + 1);
  // Keep the run of consecutive sequences that ends right before
  // next_sequence: a reader's position is an index into that run.
  size_t first = events.size();
  while (first > 0 && events[first - 1].sequence + (events.size() - first) + 1 == next_sequence) {
    --first;
  }
  front_sequence_ = next_sequence - (events.size() - first);
  std::vector<EventBlock> blocks;
  for (size_t i = first; i < events.size(); ++i) {
    AddEvent(blocks, ViewOf(events[i]), events.size() - i);
  }
  PushBlocksLocked(std::move(blocks));
  visible_sequence_ = next_sequence - 1;
  TrimLocked();
}

void EventFeed::TrimLocked() {
  // The newest event always stays, so a reader that is caught up can read it
  // even when it alone is larger than the byte bound; and events not yet
  // visible stay, or a reader could never see them.
  while (count_ > 1 && front_sequence_ <= visible_sequence_ &&
         (count_ > options_.max_events || bytes_ > options_.max_bytes)) {
    const EventBlock& front = blocks_.front().events;
    bytes_ -= MemoryFootprint(front[front_index_]);
    ++front_sequence_;
    --count_;
    if (++front_index_ == front.size()) {
      blocks_.pop_front();
      front_index_ = 0;
    }
  }
}

uint64_t EventFeed::last_sequence() const {
  ReaderMutexLock lock(&mu_);
  return visible_sequence_;
}

uint64_t EventFeed::oldest_retained_sequence() const {
  ReaderMutexLock lock(&mu_);
  return front_sequence_;
}

EventFeed::Retained EventFeed::retained() const {
  ReaderMutexLock lock(&mu_);
  return {.events = count_, .bytes = bytes_};
}

StoreId EventFeed::store_id() const { return options_.store_id; }

absl::Status EventFeed::CheckPosition(uint64_t after) const {
  ReaderMutexLock lock(&mu_);
  uint64_t from;
  return CheckPositionLocked(after, &from);
}

absl::Status EventFeed::CheckPositionLocked(uint64_t after, uint64_t* from) const {
  const uint64_t last = visible_sequence_;
  const uint64_t first = first_sequence();
  if (after > last) {
    return absl::OutOfRangeError(absl::StrFormat(
        "sequence %d is beyond the newest event %d of store %s: a position from another store, "
        "or this store lost events it had shown (its data directory restored from an older "
        "copy?); start anew (START_POSITION_OLDEST)",
        after, last, options_.store_id.ToString()));
  }
  if (after != 0 && after + 1 < first) {
    return absl::OutOfRangeError(absl::StrFormat(
        "sequence %d belongs to another store: the history of store %s starts at sequence %d "
        "(a memory-only server that restarted, or another data directory); resume with a "
        "resume_token to be told which store it came from, or start anew "
        "(START_POSITION_OLDEST)",
        after, options_.store_id.ToString(), first));
  }
  *from = after == 0 ? first - 1 : after;
  if (*from + 1 < front_sequence_) {
    return absl::OutOfRangeError(absl::StrFormat(
        "events after sequence %d are no longer retained: %d of them were discarded; the "
        "oldest retained sequence is %d",
        after, front_sequence_ - *from - 1, front_sequence_));
  }
  return absl::OkStatus();
}

std::string EventFeed::ResumeTokenAfter(uint64_t examined) const {
  return EncodeResumeToken({.store = options_.store_id, .partitions = {{0, examined}}});
}

absl::StatusOr<uint64_t> EventFeed::PositionOfToken(absl::string_view token) const {
  absl::StatusOr<ResumePosition> position = DecodeResumeToken(token);
  if (!position.ok()) return position.status();
  if (position->store != options_.store_id) {
    return absl::OutOfRangeError(absl::StrFormat(
        "resume_token: belongs to store %s, not to this server's store %s (a memory-only "
        "server that restarted, or another data directory): its position means nothing here; "
        "start anew (START_POSITION_OLDEST or START_POSITION_NEW)",
        position->store.ToString(), options_.store_id.ToString()));
  }
  if (position->partitions.size() != 1 || position->partitions[0].partition != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "resume_token: names %d partitions, but store %s has one (partition 0); pass a "
        "resume_token exactly as a WatchExpirationsResponse carried it",
        position->partitions.size(), options_.store_id.ToString()));
  }
  const uint64_t after = position->partitions[0].sequence;
  if (absl::Status s = CheckPosition(after); !s.ok()) return s;
  return after;
}

absl::StatusOr<EventBatch> EventFeed::Read(uint64_t after, const EventFilter& filter,
                                           const ReadLimits& limits) const {
  EventBatch batch;
  absl::StatusOr<uint64_t> examined =
      ReadEach(after, filter, limits, [&batch](uint64_t sequence, const ExpiryEventView& e) {
        ExpiryEvent& out = batch.events.emplace_back();
        out.sequence = sequence;
        out.collection = std::string(e.collection);
        out.key = std::string(e.key);
        out.value = std::string(e.value);
        out.expire_time = e.expire_time;
        out.expired_at = e.expired_at;
      });
  if (!examined.ok()) return examined.status();
  batch.examined_sequence = *examined;
  return batch;
}

absl::StatusOr<uint64_t> EventFeed::ReadEach(uint64_t after, const EventFilter& filter,
                                             const ReadLimits& limits, EventVisitor visit) const {
  ReaderMutexLock lock(&mu_);
  uint64_t from;
  if (absl::Status s = CheckPositionLocked(after, &from); !s.ok()) return s;
  uint64_t examined_sequence = from;
  if (from == visible_sequence_) return examined_sequence;
  size_t bytes = 0;
  size_t examined = 0;
  size_t matched = 0;
  // The block holding from + 1, and its index there.
  size_t block = static_cast<size_t>(std::upper_bound(blocks_.begin(), blocks_.end(), from + 1,
                                                      [](uint64_t sequence, const StoredBlock& b) {
                                                        return sequence < b.first_sequence;
                                                      }) -
                                     blocks_.begin() - 1);
  size_t index = from + 1 - blocks_[block].first_sequence;
  for (uint64_t sequence = from + 1; sequence <= visible_sequence_; ++sequence) {
    if (examined == limits.max_examined || matched == limits.max_events) break;
    if (index == blocks_[block].events.size()) {
      ++block;
      index = 0;
    }
    ExpiryEventView e = blocks_[block].events[index++];
    if (filter.Matches(e.collection)) {
      if (!filter.include_values) e.value = {};
      const size_t size = e.collection.size() + e.key.size() + e.value.size();
      // A batch always makes progress, even with one event over the bound.
      if (matched > 0 && bytes + size > limits.max_bytes) break;
      bytes += size;
      ++matched;
      visit(sequence, e);
    }
    ++examined;
    examined_sequence = sequence;
  }
  return examined_sequence;
}

}  // namespace lapse

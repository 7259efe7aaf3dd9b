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
      visible_sequence_(front_sequence_ - 1),
      published_visible_(visible_sequence_) {}

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
  if (options_.on_append) {
    for (const EventBlock& block : blocks) {
      for (size_t i = 0; i < block.size(); ++i) options_.on_append(block[i]);
    }
  }
  Prepared prepared = Prepare(std::move(blocks));
  const size_t appended = prepared.events;
  std::vector<BlockPtr> dropped;
  uint64_t last;
  {
    MutexLock lock(&mu_);
    const uint64_t first = front_sequence_ + count_;
    PushLocked(std::move(prepared));
    last = first + appended - 1;
    if (appended > 0) then(first, last);
    if (options_.visible_on_append) SetVisibleLocked(last);
    TrimLocked(&dropped);
  }
  if (appended > 0 && notify == Notify::kNow && options_.visible_on_append &&
      options_.on_readable) {
    options_.on_readable(last);
  }
  return last;
}

EventFeed::Prepared EventFeed::Prepare(std::vector<EventBlock> blocks) const {
  Prepared prepared;
  for (EventBlock& block : blocks) {
    if (block.empty()) continue;
    // A block reserved for far more events than it got (a pass that found
    // few due) gives the rest back before it is kept.
    block.ShrinkToFit();
    for (size_t i = 0; i < block.size(); ++i) prepared.bytes += MemoryFootprint(block[i]);
    prepared.events += block.size();
    auto stored = std::make_shared<StoredBlock>();
    stored->events = std::move(block);
    prepared.blocks.push_back(std::move(stored));
  }
  return prepared;
}

void EventFeed::PushLocked(Prepared prepared) {
  for (std::shared_ptr<StoredBlock>& block : prepared.blocks) {
    block->first_sequence = front_sequence_ + count_;
    count_ += block->events.size();
    blocks_.push_back(std::move(block));
  }
  bytes_ += prepared.bytes;
}

void EventFeed::NotifyReadable() {
  if (!options_.visible_on_append || !options_.on_readable) return;
  // Not last_sequence(): the expirer calls this after every pass and must
  // not wait for mu_.
  options_.on_readable(published_visible_.load(std::memory_order_acquire));
}

void EventFeed::SetVisibleLocked(uint64_t sequence) {
  visible_sequence_ = sequence;
  published_visible_.store(sequence, std::memory_order_release);
}

void EventFeed::MakeVisibleThrough(uint64_t sequence) {
  uint64_t visible;
  std::vector<BlockPtr> dropped;
  {
    MutexLock lock(&mu_);
    const uint64_t last = front_sequence_ + count_ - 1;
    visible = std::min(sequence, last);
    if (visible <= visible_sequence_) return;
    SetVisibleLocked(visible);
    // Retention could not drop these while they were invisible.
    TrimLocked(&dropped);
  }
  if (options_.on_readable) options_.on_readable(visible);
}

void EventFeed::DropInvisible() {
  std::vector<BlockPtr> dropped;
  MutexLock lock(&mu_);
  while (count_ > 0 && front_sequence_ + count_ - 1 > visible_sequence_) {
    const StoredBlock& back = *blocks_.back();
    // Events of the back block that stay: the visible ones (the block's
    // first events, which retention may have dropped already).
    const size_t keep =
        visible_sequence_ < back.first_sequence
            ? 0
            : std::min<size_t>(visible_sequence_ + 1 - back.first_sequence, back.events.size());
    for (size_t i = keep; i < back.events.size(); ++i) {
      bytes_ -= MemoryFootprint(back.events[i]);
      --count_;
    }
    if (keep == (blocks_.size() == 1 ? front_index_ : 0)) {
      dropped.push_back(std::move(blocks_.back()));
      blocks_.pop_back();
      if (blocks_.empty()) front_index_ = 0;
    } else {
      // A reader may hold the block: its visible events are replaced by a
      // copy, never changed in place.
      auto kept = std::make_shared<StoredBlock>();
      kept->first_sequence = back.first_sequence;
      kept->events = back.events.Prefix(keep);
      dropped.push_back(std::exchange(blocks_.back(), std::move(kept)));
    }
  }
}

void EventFeed::Restore(std::vector<ExpiryEvent> events, uint64_t next_sequence) {
  assert(std::adjacent_find(events.begin(), events.end(),
                            [](const ExpiryEvent& a, const ExpiryEvent& b) {
                              return a.sequence >= b.sequence;
                            }) == events.end() &&
         "events not in strictly increasing sequence order");
  if (!events.empty()) next_sequence = std::max(next_sequence, events.back().sequence + 1);
  // Keep the run of consecutive sequences that ends right before
  // next_sequence: a reader's position is an index into that run.
  size_t first = events.size();
  while (first > 0 && events[first - 1].sequence + (events.size() - first) + 1 == next_sequence) {
    --first;
  }
  std::vector<EventBlock> blocks;
  for (size_t i = first; i < events.size(); ++i) {
    AddEvent(blocks, ViewOf(events[i]), events.size() - i);
  }
  Prepared prepared = Prepare(std::move(blocks));
  std::vector<BlockPtr> dropped;
  MutexLock lock(&mu_);
  assert(count_ == 0 && "Restore into a log already appended to");
  dropped.assign(blocks_.begin(), blocks_.end());
  blocks_.clear();
  front_index_ = 0;
  count_ = 0;
  bytes_ = 0;
  front_sequence_ = next_sequence - (events.size() - first);
  PushLocked(std::move(prepared));
  SetVisibleLocked(next_sequence - 1);
  TrimLocked(&dropped);
}

void EventFeed::TrimLocked(std::vector<BlockPtr>* dropped) {
  // The newest event always stays, so a reader that is caught up can read it
  // even when it alone is larger than the byte bound; and events not yet
  // visible stay, or a reader could never see them.
  while (count_ > 1 && front_sequence_ <= visible_sequence_ &&
         (count_ > options_.max_events || bytes_ > options_.max_bytes)) {
    const EventBlock& front = blocks_.front()->events;
    bytes_ -= MemoryFootprint(front[front_index_]);
    ++front_sequence_;
    --count_;
    if (++front_index_ == front.size()) {
      dropped->push_back(std::move(blocks_.front()));
      blocks_.pop_front();
      front_index_ = 0;
    }
  }
}

EventFeed::BlockPtr EventFeed::BlockHoldingLocked(uint64_t sequence) const {
  auto after =
      std::upper_bound(blocks_.begin(), blocks_.end(), sequence,
                       [](uint64_t s, const BlockPtr& block) { return s < block->first_sequence; });
  return *(after - 1);
}

uint64_t EventFeed::last_sequence() const {
  MutexLock lock(&mu_);
  return visible_sequence_;
}

uint64_t EventFeed::oldest_retained_sequence() const {
  MutexLock lock(&mu_);
  return front_sequence_;
}

EventFeed::Retained EventFeed::retained() const {
  MutexLock lock(&mu_);
  return {.events = count_, .bytes = bytes_};
}

StoreId EventFeed::store_id() const { return options_.store_id; }

absl::Status EventFeed::CheckPosition(uint64_t after) const {
  MutexLock lock(&mu_);
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
  uint64_t from;
  uint64_t visible;
  BlockPtr block;
  {
    MutexLock lock(&mu_);
    if (absl::Status s = CheckPositionLocked(after, &from); !s.ok()) return s;
    visible = visible_sequence_;
    if (from == visible) return from;
    block = BlockHoldingLocked(from + 1);
  }
  // From here on the lock is taken only to find the next block: the events
  // up to `visible` are immutable in the blocks that hold them.
  uint64_t examined_sequence = from;
  size_t bytes = 0;
  size_t examined = 0;
  size_t matched = 0;
  for (uint64_t sequence = from + 1; sequence <= visible; ++sequence) {
    if (examined == limits.max_examined || matched == limits.max_events) break;
    if (sequence == block->first_sequence + block->events.size()) {
      MutexLock lock(&mu_);
      // Retention overtook this read: the next one says so.
      if (sequence < front_sequence_) break;
      block = BlockHoldingLocked(sequence);
    }
    ExpiryEventView e = block->events[sequence - block->first_sequence];
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

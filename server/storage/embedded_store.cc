#include "server/storage/embedded_store.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <utility>

namespace lapse {
namespace {

// The sequence of a new store's first event: the clock's now in nanoseconds,
// never 0 ("after the sequence before the first" must stay representable).
uint64_t FreshFirstSequence(const EmbeddedStore::Options& options) {
  return static_cast<uint64_t>(std::max<int64_t>(1, absl::ToUnixNanos(options.clock->Now())));
}

EventFeed::Options LogOptions(const EmbeddedStore::Options& options, const StoreIdentity& identity,
                              EventsReadableListener on_readable) {
  EventFeed::Options log;
  // A durable store shows an event only once it is on disk.
  log.visible_on_append = options.data_dir.empty();
  log.store_id = identity.id;
  log.first_sequence = identity.first_sequence;
  log.max_events = options.event_retention_events;
  log.max_bytes = options.event_retention_bytes;
  log.on_readable = std::move(on_readable);
  log.on_append = options.on_event;
  return log;
}

// `log` is filled once the durable store has told the feed's identity, before
// Recover, so before anything can become durable.
DurableStore::Options DurableOptions(const EmbeddedStore::Options& options,
                                     const std::unique_ptr<EventFeed>* log, ExpirerWakeup* wakeup,
                                     WritableListener on_writable_changed) {
  DurableStore::Options durable;
  durable.dir = options.data_dir;
  durable.fresh_first_sequence = FreshFirstSequence(options);
  durable.fsync = options.fsync;
  durable.group_wait = options.wal_group_wait;
  durable.segment_bytes = options.wal_segment_bytes;
  durable.snapshot_after_bytes = options.snapshot_after_bytes;
  durable.truncate_damaged_wal = options.wal_truncate_damaged;
  durable.truncate_damaged_wal_name = options.wal_truncate_damaged_name;
  durable.on_wal_io = options.on_wal_io;
  // Watchers see an expiry event only once the change that made it is durable.
  durable.on_durable = [log](uint64_t last_event_sequence) {
    (*log)->MakeVisibleThrough(last_event_sequence);
  };
  // The expirer sleeps while writes are refused.
  durable.on_writable_changed =
      [wakeup, listener = std::move(on_writable_changed)](const absl::Status& status) {
        if (status.ok()) wakeup->Wake();
        if (listener) listener(status);
      };
  durable.retry_interval = options.wal_retry_interval;
  durable.disk_fault_for_testing = options.disk_fault_for_testing;
  return durable;
}

Engine::Options EngineOptions(const EmbeddedStore::Options& options, Journal* journal,
                              ExpirerWakeup& wakeup) {
  Engine::Options engine;
  engine.shards = options.shards;
  engine.limits = options.limits;
  engine.journal = journal;
  engine.earlier_deadline_listener = wakeup.Listener();
  return engine;
}

}  // namespace

EmbeddedStore::EmbeddedStore(const Options& options) : options_(options) {}

EmbeddedStore::~EmbeddedStore() {
  StopExpiring();
  durable_.reset();
}

absl::StatusOr<std::unique_ptr<EmbeddedStore>> EmbeddedStore::Open(
    const Options& options, EventsReadableListener on_readable,
    WritableListener on_writable_changed) {
  std::unique_ptr<EmbeddedStore> store(new EmbeddedStore(options));
  // A memory-only store's history begins now; a data directory's when it was
  // initialised.
  StoreIdentity identity{.id = StoreId::Random(), .first_sequence = FreshFirstSequence(options)};
  if (!options.data_dir.empty()) {
    absl::StatusOr<std::unique_ptr<DurableStore>> opened = DurableStore::Open(DurableOptions(
        options, &store->event_feed_, &store->expirer_wakeup_, std::move(on_writable_changed)));
    if (!opened.ok()) return opened.status();
    store->durable_ = *std::move(opened);
    identity = store->durable_->identity();
  }
  store->event_feed_ =
      std::make_unique<EventFeed>(LogOptions(options, identity, std::move(on_readable)));
  store->engine_ = std::make_unique<Engine>(
      EngineOptions(options, store->durable_.get(), store->expirer_wakeup_), options.clock,
      store->event_feed_.get());
  store->groups_ = std::make_unique<ConsumerGroups>(
      ConsumerGroups::Options{.limits = options.limits,
                              .on_readable = options.on_group_readable,
                              .earlier_deadline_listener = store->lease_wakeup_.Listener(),
                              .journal = store->durable_.get()},
      options.clock, store->event_feed_.get());
  if (store->durable_ != nullptr) {
    absl::StatusOr<RecoveryStats> recovered = store->durable_->Recover(
        store->engine_.get(), store->event_feed_.get(), store->groups_.get());
    if (!recovered.ok()) return recovered.status();
    store->recovery_ = *std::move(recovered);
  }
  // Members that came due while the server was down expire now, with events.
  store->expirer_ = std::make_unique<Expirer>(store->engine_.get(), options.clock,
                                              &store->expirer_wakeup_, options.expirer_priority);
  // Leases whose deadline passed while the server was down end now.
  store->lease_expirer_ =
      std::make_unique<Expirer>(store->groups_->Work(), options.clock, &store->lease_wakeup_);
  return store;
}

void EmbeddedStore::StopExpiring() {
  lease_expirer_.reset();
  expirer_.reset();
}

Expirer& EmbeddedStore::expirer() {
  assert(expirer_ != nullptr);
  return *expirer_;
}

Expirer& EmbeddedStore::lease_expirer() {
  assert(lease_expirer_ != nullptr);
  return *lease_expirer_;
}

const Limits& EmbeddedStore::limits() const { return engine_->limits(); }

void EmbeddedStore::StartTogether(absl::FunctionRef<void()> start) {
  if (durable_ == nullptr) {
    start();
  } else {
    durable_->StartTogether(start);
  }
}

template <typename T>
void EmbeddedStore::AnswerWhenDurable(absl::StatusOr<T> result, CommitTicket ticket,
                                      StoreDone<T> done) {
  if (!result.ok() || durable_ == nullptr) {
    std::move(done)(std::move(result));
    return;
  }
  durable_->WhenDurable(
      ticket, [result = std::move(result), done = std::move(done)](absl::Status durable) mutable {
        if (!durable.ok()) result = std::move(durable);
        std::move(done)(std::move(result));
      });
}

void EmbeddedStore::PutMembers(absl::string_view collection, absl::Span<const MemberWrite> writes,
                               const PutOptions& options, StoreDone<std::vector<PutResult>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<PutResult>> results =
      engine_->Put(collection, writes, options, &ticket);
  AnswerWhenDurable(std::move(results), ticket, std::move(done));
}

void EmbeddedStore::GetMembers(absl::string_view collection,
                               absl::Span<const absl::string_view> keys, const Expiration& refresh,
                               StoreDone<std::vector<GetResult>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<GetResult>> results = engine_->Get(collection, keys, refresh, &ticket);
  // Only a Get that slides deadlines changes anything.
  if (refresh.kind == Expiration::Kind::kNone) {
    std::move(done)(std::move(results));
  } else {
    AnswerWhenDurable(std::move(results), ticket, std::move(done));
  }
}

void EmbeddedStore::RemoveMembers(absl::string_view collection,
                                  absl::Span<const absl::string_view> keys,
                                  StoreDone<std::vector<bool>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<bool>> results = engine_->Remove(collection, keys, &ticket);
  AnswerWhenDurable(std::move(results), ticket, std::move(done));
}

void EmbeddedStore::ExpireMembers(absl::string_view collection,
                                  absl::Span<const absl::string_view> keys,
                                  const Expiration& expiration, ExpireCondition condition,
                                  StoreDone<std::vector<ExpireResult>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<ExpireResult>> results =
      engine_->Expire(collection, keys, expiration, condition, &ticket);
  AnswerWhenDurable(std::move(results), ticket, std::move(done));
}

void EmbeddedStore::PersistMembers(absl::string_view collection,
                                   absl::Span<const absl::string_view> keys,
                                   StoreDone<std::vector<PersistOutcome>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<PersistOutcome>> results = engine_->Persist(collection, keys, &ticket);
  AnswerWhenDurable(std::move(results), ticket, std::move(done));
}

void EmbeddedStore::ListMembers(absl::string_view collection, const ListMembersOptions& options,
                                StoreDone<MemberPage> done) {
  std::move(done)(engine_->ListMembers(collection, options));
}

void EmbeddedStore::GetCollection(absl::string_view name, StoreDone<CollectionInfo> done) {
  std::move(done)(engine_->GetCollection(name));
}

void EmbeddedStore::ListCollections(absl::string_view prefix, int page_size,
                                    absl::string_view after, StoreDone<CollectionPage> done) {
  std::move(done)(engine_->ListCollections(prefix, page_size, after));
}

void EmbeddedStore::DeleteCollection(absl::string_view name, StoreDone<uint64_t> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<uint64_t> removed = engine_->DeleteCollection(name, &ticket);
  AnswerWhenDurable(std::move(removed), ticket, std::move(done));
}

void EmbeddedStore::CreateConsumerGroup(absl::string_view name, const ConsumerGroupOptions& options,
                                        const GroupStart& start,
                                        StoreDone<ConsumerGroupInfo> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<ConsumerGroupInfo> info = groups_->Create(name, options, start, &ticket);
  AnswerWhenDurable(std::move(info), ticket, std::move(done));
}

void EmbeddedStore::GetConsumerGroup(absl::string_view name, size_t max_leases,
                                     StoreDone<ConsumerGroupInfo> done) {
  std::move(done)(groups_->Get(name, max_leases));
}

void EmbeddedStore::ListConsumerGroups(int page_size, absl::string_view after,
                                       StoreDone<ConsumerGroups::Page> done) {
  std::move(done)(groups_->List(page_size, after));
}

void EmbeddedStore::DeleteConsumerGroup(absl::string_view name, StoreDone<ConsumerGroupInfo> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<ConsumerGroupInfo> deleted = groups_->Delete(name, &ticket);
  AnswerWhenDurable(std::move(deleted), ticket, std::move(done));
}

void EmbeddedStore::ResetConsumerGroup(absl::string_view name, const GroupStart& start,
                                       StoreDone<ConsumerGroupInfo> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<ConsumerGroupInfo> info = groups_->Reset(name, start, &ticket);
  AnswerWhenDurable(std::move(info), ticket, std::move(done));
}

void EmbeddedStore::Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
                         StoreDone<PollResult> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<PollResult> polled = groups_->Poll(group, consumer, max_events, &ticket);
  AnswerWhenDurable(std::move(polled), ticket, std::move(done));
}

void EmbeddedStore::Ack(absl::string_view group, absl::string_view consumer,
                        absl::Span<const LeaseRef> leases,
                        StoreDone<std::vector<absl::Status>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<absl::Status>> acked = groups_->Ack(group, consumer, leases, &ticket);
  AnswerWhenDurable(std::move(acked), ticket, std::move(done));
}

void EmbeddedStore::Nack(absl::string_view group, absl::string_view consumer,
                         absl::Span<const LeaseRef> leases,
                         StoreDone<std::vector<absl::Status>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<absl::Status>> released =
      groups_->Nack(group, consumer, leases, &ticket);
  AnswerWhenDurable(std::move(released), ticket, std::move(done));
}

void EmbeddedStore::ExtendLeases(absl::string_view group, absl::string_view consumer,
                                 absl::Span<const LeaseRef> leases, absl::Duration extension,
                                 StoreDone<std::vector<absl::Status>> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<absl::Status>> extended =
      groups_->ExtendLeases(group, consumer, leases, extension, &ticket);
  AnswerWhenDurable(std::move(extended), ticket, std::move(done));
}

void EmbeddedStore::ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                                    StoreDone<DeadLetterPage> done) {
  std::move(done)(groups_->ListDeadLetters(group, after, page_size));
}

void EmbeddedStore::RedriveDeadLetters(absl::string_view group,
                                       absl::Span<const uint64_t> sequences,
                                       StoreDone<size_t> done) {
  CommitTicket ticket = 0;
  absl::StatusOr<size_t> redriven = groups_->RedriveDeadLetters(group, sequences, &ticket);
  AnswerWhenDurable(std::move(redriven), ticket, std::move(done));
}

}  // namespace lapse

// EmbeddedStore: the Store (store.h) that keeps everything in this process —
// the sharded Engine, its EventFeed and Expirer, the ConsumerGroups over that
// feed with an Expirer of their own for leases and, with a data directory,
// the DurableStore (write-ahead log + snapshots) behind them.
//
//   absl::StatusOr<std::unique_ptr<lapse::EmbeddedStore>> store =
//       lapse::EmbeddedStore::Open({.data_dir = "/var/lib/lapse"}, on_readable);
//   (*store)->PutMembers("orders:42", writes, {}, done);
//
// Operations run on the caller's thread under one shard lock (consumer-group
// operations under the groups' lock) and never wait for I/O: a write's `done` runs at once when
// memory-only, and on the WAL's flusher thread once the write is durable otherwise. Reads answer at
// once. Open recovers what a previous run left in the data directory and starts the expirer, which
// at once expires what came due while the server was down. While the write-ahead log refuses writes
// (a full disk: durable_store.h), writes fail with its status, nothing expires, and a write whose
// batch failed is undone before its `done` hears of the failure.
//
// Without a data directory the event feed's first sequence is the clock's now
// in nanoseconds since the Unix epoch, so a restarted server never reuses a
// sequence a client may hold.
//
// Thread-safe. The accessors below the Store methods are for the wiring and
// for tests that drive the engine directly, e.g. with a FakeClock:
//   clock.Advance(absl::Seconds(30));
//   store->expirer().Wake();
#ifndef LAPSE_SERVER_STORAGE_EMBEDDED_STORE_H_
#define LAPSE_SERVER_STORAGE_EMBEDDED_STORE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/base/clock.h"
#include "server/base/thread_priority.h"
#include "server/engine/consumer_groups.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"
#include "server/engine/expirer.h"
#include "server/engine/limits.h"
#include "server/storage/durable_store.h"
#include "server/storage/store.h"
#include "server/storage/wal.h"

namespace lapse {

class EmbeddedStore final : public Store {
 public:
  struct Options {
    size_t shards = 16;
    Limits limits;
    // Retention of the expiry event feed: whichever bound is hit first.
    size_t event_retention_events = 1'000'000;
    size_t event_retention_bytes = size_t{256} << 20;
    // Not owned; must outlive the store.
    Clock* clock = RealClock();
    // Asked for by the thread that expires members (Expirer).
    ThreadPriority expirer_priority = ThreadPriority::kNormal;

    // Durability: on when data_dir is set (see durable_store.h).
    std::string data_dir;
    FsyncPolicy fsync = FsyncPolicy::kEverySecond;
    // See Wal::Options::max_group_wait.
    absl::Duration wal_group_wait = absl::ZeroDuration();
    size_t snapshot_after_bytes = size_t{256} << 20;
    size_t wal_segment_bytes = size_t{64} << 20;
    bool wal_truncate_damaged = false;
    // What whoever configures the store calls wal_truncate_damaged (lapsed
    // names its flag): the refusal of a log damaged in the middle names it.
    std::string wal_truncate_damaged_name = "wal_truncate_damaged";
    // How often a log that refuses writes checks whether it can write again.
    absl::Duration wal_retry_interval = absl::Seconds(1);
    // See Wal::Options::disk_fault_for_testing.
    std::function<int(DiskOp op)> disk_fault_for_testing = nullptr;

    // Observers for metrics; each may be empty. on_event: every expiry event
    // as it is appended (EventFeed::Options::on_append). on_wal_io: the log's
    // write and fsync times (Wal::Options::on_io).
    std::function<void(const ExpiryEventView&)> on_event = nullptr;
    WalIoListener on_wal_io = nullptr;
    // Told of a consumer group that can deliver something other than new
    // events (ConsumerGroups::Options::on_readable). May be empty.
    std::function<void(absl::string_view group)> on_group_readable = nullptr;
  };

  // Recovers the data directory (if any) and starts expiring. `on_readable`
  // is told whenever new events become readable from events();
  // `on_writable_changed` whenever writes start being refused (with why) and
  // when they resume (OK), on the log's thread, cheaply and without blocking;
  // either may be empty. FAILED_PRECONDITION when the data directory is
  // locked by another server, DATA_LOSS when it is damaged.
  static absl::StatusOr<std::unique_ptr<EmbeddedStore>> Open(
      const Options& options, EventsReadableListener on_readable,
      WritableListener on_writable_changed = nullptr);
  // Stops expiring, then closes the log.
  ~EmbeddedStore() override;
  EmbeddedStore(const EmbeddedStore&) = delete;
  EmbeddedStore& operator=(const EmbeddedStore&) = delete;

  // Store.
  const Limits& limits() const override;
  void StartTogether(absl::FunctionRef<void()> start) override;
  void PutMembers(absl::string_view collection, absl::Span<const MemberWrite> writes,
                  const PutOptions& options, StoreDone<std::vector<PutResult>> done) override;
  void GetMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                  const Expiration& refresh, StoreDone<std::vector<GetResult>> done) override;
  void RemoveMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                     StoreDone<std::vector<bool>> done) override;
  void ExpireMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                     const Expiration& expiration, ExpireCondition condition,
                     StoreDone<std::vector<ExpireResult>> done) override;
  void PersistMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                      StoreDone<std::vector<PersistOutcome>> done) override;
  void ListMembers(absl::string_view collection, const ListMembersOptions& options,
                   StoreDone<MemberPage> done) override;
  void GetCollection(absl::string_view name, StoreDone<CollectionInfo> done) override;
  void ListCollections(absl::string_view prefix, int page_size, absl::string_view after,
                       StoreDone<CollectionPage> done) override;
  void DeleteCollection(absl::string_view name, StoreDone<uint64_t> done) override;
  const EventSource& events() const override { return *event_feed_; }
  void CreateConsumerGroup(absl::string_view name, const ConsumerGroupOptions& options,
                           const GroupStart& start, StoreDone<ConsumerGroupInfo> done) override;
  void GetConsumerGroup(absl::string_view name, size_t max_leases,
                        StoreDone<ConsumerGroupInfo> done) override;
  void ListConsumerGroups(int page_size, absl::string_view after,
                          StoreDone<ConsumerGroups::Page> done) override;
  void DeleteConsumerGroup(absl::string_view name, StoreDone<ConsumerGroupInfo> done) override;
  void ResetConsumerGroup(absl::string_view name, const GroupStart& start,
                          StoreDone<ConsumerGroupInfo> done) override;
  void Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
            StoreDone<PollResult> done) override;
  void Ack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
           StoreDone<std::vector<absl::Status>> done) override;
  void Nack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
            StoreDone<std::vector<absl::Status>> done) override;
  void ExtendLeases(absl::string_view group, absl::string_view consumer,
                    absl::Span<const LeaseRef> leases, absl::Duration extension,
                    StoreDone<std::vector<absl::Status>> done) override;
  void ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                       StoreDone<DeadLetterPage> done) override;
  void RedriveDeadLetters(absl::string_view group, absl::Span<const uint64_t> sequences,
                          StoreDone<size_t> done) override;

  // Stops the expirers (of members and of leases); nothing expires by itself
  // afterwards. Idempotent. Operations keep working (and still expire what
  // they touch).
  void StopExpiring();

  Engine& engine() { return *engine_; }
  ConsumerGroups& consumer_groups() { return *groups_; }
  EventFeed& event_feed() { return *event_feed_; }
  // REQUIRES: StopExpiring() has not been called.
  Expirer& expirer();
  // The expirer of the consumer groups' leases. REQUIRES: as expirer().
  Expirer& lease_expirer();
  // Null when memory-only.
  DurableStore* durable() { return durable_.get(); }
  // What Open recovered; empty when memory-only.
  const std::optional<RecoveryStats>& recovery() const { return recovery_; }

 private:
  explicit EmbeddedStore(const Options& options);

  // Answers a mutating operation: at once on error or when memory-only,
  // otherwise once the batch of `ticket` (0: everything committed so far) is
  // durable.
  template <typename T>
  void AnswerWhenDurable(absl::StatusOr<T> result, CommitTicket ticket, StoreDone<T> done);

  // Constant after construction.
  const Options options_;

  // How the engine wakes the expirer, and the groups theirs: built before
  // and destroyed after both.
  ExpirerWakeup expirer_wakeup_;
  ExpirerWakeup lease_wakeup_;

  // Built by Open: the durable store (it knows the feed's identity), the
  // event feed, the engine, the expirer. The destructor closes the durable
  // store first, as its flusher may roll the engine back until it stops; the
  // rest goes in the reverse order: the event feed outlives the engine.
  std::unique_ptr<EventFeed> event_feed_;
  std::unique_ptr<DurableStore> durable_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ConsumerGroups> groups_;
  std::optional<RecoveryStats> recovery_;
  std::unique_ptr<Expirer> expirer_;
  std::unique_ptr<Expirer> lease_expirer_;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_EMBEDDED_STORE_H_

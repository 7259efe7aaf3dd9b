#include "server/storage/durable_store.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/disk_fault.h"
#include "testing/temp_dir.h"
#include "testing/test_util.h"

namespace lapse {
namespace {

using ::lapse::testing::DiskFault;
using ::lapse::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::FromUnixMillis(1'700'000'000'000);

std::vector<std::string> Names(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  return names.ok() ? *names : std::vector<std::string>{};
}

// The names in `dir` that `parse` accepts, sorted.
std::vector<std::string> NamesOf(const std::string& dir,
                                 bool (*parse)(absl::string_view, uint64_t*)) {
  std::vector<std::string> matching;
  for (const std::string& name : Names(dir)) {
    uint64_t lsn;
    if (parse(name, &lsn)) matching.push_back(name);
  }
  return matching;
}

std::vector<std::string> Snapshots(const std::string& dir) {
  return NamesOf(dir, ParseSnapshotName);
}

std::vector<std::string> Segments(const std::string& dir) {
  return NamesOf(dir, Wal::ParseSegmentName);
}

// Flips a bit in the middle of DIR/NAME, as a bad disk sector would.
void Damage(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name);
  absl::StatusOr<std::string> data = files::ReadAll(path);
  ASSERT_TRUE(data.ok()) << data.status();
  (*data)[data->size() / 2] ^= 0x20;
  ASSERT_TRUE(files::Remove(path).ok());
  ASSERT_TRUE(files::WriteAtomically(dir, name, *data).ok());
}

DurableStore::Options WithoutAutomaticSnapshots() {
  DurableStore::Options options;
  options.snapshot_after_bytes = 0;
  return options;
}

// One server's worth of state over a data directory, as lapsed wires it.
struct Server {
  // A fresh directory's first sequence is `first_sequence`, or, with 0, the
  // clock's seconds, as a fresh server seeds it from its clock; the log takes
  // the directory's identity.
  Server(const std::string& dir, Clock* clock, DurableStore::Options options = {},
         uint64_t first_sequence = 1000) {
    if (first_sequence == 0) first_sequence = absl::ToUnixSeconds(clock->Now());
    options.dir = dir;
    options.fresh_first_sequence = first_sequence;
    options.on_durable = [this](uint64_t sequence) { log->MakeVisibleThrough(sequence); };
    absl::StatusOr<std::unique_ptr<DurableStore>> opened = DurableStore::Open(options);
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    log = std::make_unique<EventFeed>(
        EventFeed::Options{.store_id = store->identity().id,
                           .first_sequence = store->identity().first_sequence,
                           .visible_on_append = false});
    Engine::Options engine_options;
    engine_options.shards = 4;
    engine_options.journal = store.get();
    engine = std::make_unique<Engine>(engine_options, clock, log.get());
    groups = std::make_unique<ConsumerGroups>(ConsumerGroups::Options{.journal = store.get()},
                                              clock, log.get());
    recovered = store->Recover(engine.get(), log.get(), groups.get());
  }
  ~Server() {
    groups.reset();
    engine.reset();
    store.reset();
  }

  absl::Status Durable() { return store->AwaitDurable(); }

  std::unique_ptr<DurableStore> store;
  std::unique_ptr<EventFeed> log;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ConsumerGroups> groups;
  absl::StatusOr<RecoveryStats> recovered;
};

// Everything observable, as text: every collection with every member, and
// every retained event.
std::string Dump(Engine& engine, EventFeed& log) {
  std::string out;
  std::string after;
  while (true) {
    auto page = engine.ListCollections("", 1000, after);
    EXPECT_TRUE(page.ok());
    for (const CollectionInfo& c : page->collections) {
      absl::StrAppend(&out, c.name, " n=", c.member_count, " e=", c.expiring_count, "\n");
      ListMembersOptions options;
      options.page_size = 1000;
      while (true) {
        auto members = engine.ListMembers(c.name, options);
        EXPECT_TRUE(members.ok());
        for (const ListedMember& m : members->members) {
          absl::StrAppend(&out, "  ", m.key, "=", m.value, " @",
                          m.expire_time == NoDeadline() ? -1 : absl::ToUnixMillis(m.expire_time),
                          "\n");
        }
        if (!members->next.has_value()) break;
        options.after = members->next;
      }
    }
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  EventFilter all;
  all.include_values = true;
  uint64_t cursor = log.oldest_retained_sequence() - 1;
  while (true) {
    auto batch = log.Read(cursor, all, ReadLimits{});
    EXPECT_TRUE(batch.ok());
    for (const ExpiryEvent& e : batch->events) {
      absl::StrAppend(&out, "event ", e.sequence, " ", e.collection, "/", e.key, "=", e.value, " @",
                      absl::ToUnixMillis(e.expire_time), " at ", absl::ToUnixNanos(e.expired_at),
                      "\n");
    }
    if (batch->events.empty()) break;
    cursor = batch->examined_sequence;
  }
  absl::StrAppend(&out, "last=", log.last_sequence(), "\n");
  return out;
}

absl::Status Put(Engine& engine, absl::string_view c, absl::string_view k, absl::string_view v,
                 absl::Duration ttl = absl::ZeroDuration()) {
  MemberWrite w{k, v, ttl == absl::ZeroDuration() ? Expiration::None() : Expiration::Ttl(ttl)};
  return engine.Put(c, {w}, {}).status();
}

// A mix of every kind of change.
void MakeHistory(Server& s, FakeClock& clock) {
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Put(*s.engine, absl::StrCat("c", i % 5), absl::StrCat("k", i), absl::StrCat("v", i),
                    absl::Seconds(1 + i % 9))
                    .ok());
  }
  ASSERT_TRUE(Put(*s.engine, "persist", "p", "forever").ok());
  absl::string_view keys[] = {"k1", "k6"};
  ASSERT_TRUE(s.engine->Remove("c1", keys).ok());
  absl::string_view ekeys[] = {"k2"};
  ASSERT_TRUE(
      s.engine->Expire("c2", ekeys, Expiration::Ttl(absl::Hours(2)), ExpireCondition::kAlways)
          .ok());
  absl::string_view pkeys[] = {"k3"};
  ASSERT_TRUE(s.engine->Persist("c3", pkeys).ok());
  ASSERT_TRUE(s.engine->DeleteCollection("c4").ok());
  clock.Advance(absl::Seconds(4));
  s.engine->ExpireDue();
  absl::string_view gkeys[] = {"k0"};
  ASSERT_TRUE(s.engine->Get("c0", gkeys, Expiration::Ttl(absl::Minutes(5))).ok());
  ASSERT_TRUE(s.Durable().ok());
}

// Each test runs servers, one after another, over one data directory and one
// fake clock that keeps its time across their restarts.
class DurableStoreTest : public ::testing::Test {
 protected:
  const TempDir temp_dir_;
  const std::string& dir_ = temp_dir_.path();
  FakeClock clock_{kStart};
};

TEST_F(DurableStoreTest, RestartRestoresMembersDeadlinesEventsAndTheSequence) {
  std::string before;
  {
    Server s(dir_, &clock_);
    ASSERT_TRUE(s.recovered.ok()) << s.recovered.status();
    MakeHistory(s, clock_);
    before = Dump(*s.engine, *s.log);
    EXPECT_THAT(before, HasSubstr("event 1000 "));
  }
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_GT(again.recovered->batches_replayed, 0u);
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
  // New events continue the sequence: none is reused.
  const uint64_t last = again.log->last_sequence();
  clock_.Advance(absl::Seconds(10));
  EXPECT_GT(again.engine->ExpireDue(), 0u);
  ASSERT_TRUE(again.Durable().ok());
  auto batch = again.log->Read(last, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  ASSERT_FALSE(batch->events.empty());
  EXPECT_EQ(batch->events[0].sequence, last + 1);
}

TEST_F(DurableStoreTest, SnapshotPlusLogEqualsTheStateBeforeTheRestart) {
  std::string before;
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    MakeHistory(s, clock_);
    absl::StatusOr<SnapshotStats> snap = s.store->TakeSnapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    EXPECT_GT(snap->members, 0u);
    EXPECT_GT(snap->events, 0u);
    // More history after the snapshot, replayed from the log.
    ASSERT_TRUE(Put(*s.engine, "after", "a", "1", absl::Seconds(30)).ok());
    absl::string_view keys[] = {"k5"};
    ASSERT_TRUE(s.engine->Remove("c0", keys).ok());
    clock_.Advance(absl::Seconds(3));
    s.engine->ExpireDue();
    ASSERT_TRUE(s.Durable().ok());
    before = Dump(*s.engine, *s.log);
  }
  EXPECT_EQ(Snapshots(dir_).size(), 1u);
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_FALSE(again.recovered->snapshot.empty());
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

TEST_F(DurableStoreTest, ASnapshotTakenDuringWritesRecoversTheFinalState) {
  std::string before;
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < 3; ++t) {
      writers.emplace_back([&, t] {
        for (int i = 0; !stop.load() || i < 2000; ++i) {
          const std::string key = absl::StrCat("k", i % 500);
          if (i % 5 == 4) {
            absl::string_view keys[] = {key};
            ASSERT_TRUE(s.engine->Remove(absl::StrCat("w", t), keys).ok());
          } else {
            ASSERT_TRUE(Put(*s.engine, absl::StrCat("w", t), key, absl::StrCat(i),
                            absl::Milliseconds(500 + i % 3000))
                            .ok());
          }
          if (i % 300 == 0) {
            clock_.Advance(absl::Milliseconds(100));
            s.engine->ExpireDue();
          }
          if (i > 20000) break;
        }
      });
    }
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.store->TakeSnapshot().ok());
    stop = true;
    for (auto& w : writers) w.join();
    // A writer held up between reading the clock and writing puts a member
    // already due after the last ExpireDue; Dump would expire it, and its
    // event would be missing from `before` until durable
    // (AnExpiryMadeByAReadIsShownOnceDurableAndSurvivesARestart).
    s.engine->ExpireDue();
    ASSERT_TRUE(s.Durable().ok());
    before = Dump(*s.engine, *s.log);
  }
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

TEST_F(DurableStoreTest, AnExpiryMadeByAReadIsShownOnceDurableAndSurvivesARestart) {
  DiskFault disk;
  DurableStore::Options options = WithoutAutomaticSnapshots();
  options.disk_fault_for_testing = disk.Hook();
  std::string shown;
  {
    Server s(dir_, &clock_, options);
    ASSERT_TRUE(s.recovered.ok());
    ASSERT_TRUE(Put(*s.engine, "orders:42", "o1", "unpaid", absl::Seconds(30)).ok());
    ASSERT_TRUE(s.Durable().ok());
    const uint64_t last = s.log->last_sequence();
    clock_.Advance(absl::Minutes(1));
    disk.Hold({DiskOp::kWrite});
    // Listing expires o1; its event waits for its batch to be durable.
    EXPECT_THAT(Dump(*s.engine, *s.log), Not(HasSubstr("o1")));
    EXPECT_EQ(s.log->last_sequence(), last);
    disk.Release();
    ASSERT_TRUE(s.Durable().ok());
    EXPECT_EQ(s.log->last_sequence(), last + 1);
    shown = Dump(*s.engine, *s.log);
    EXPECT_THAT(shown, HasSubstr(absl::StrCat("event ", last + 1, " orders:42/o1=unpaid")));
  }
  Server again(dir_, &clock_, options);
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_EQ(Dump(*again.engine, *again.log), shown);
}

TEST_F(DurableStoreTest, MembersDueWhileDownExpireAfterStartWithTheirEvents) {
  uint64_t last_before;
  {
    Server s(dir_, &clock_);
    ASSERT_TRUE(s.recovered.ok());
    ASSERT_TRUE(Put(*s.engine, "orders:42", "o1", "unpaid", absl::Minutes(30)).ok());
    ASSERT_TRUE(Put(*s.engine, "orders:42", "o2", "later", absl::Hours(5)).ok());
    ASSERT_TRUE(s.Durable().ok());
    last_before = s.log->last_sequence();
  }
  clock_.Advance(absl::Hours(1));  // The server was down through o1's deadline.
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok());
  EXPECT_EQ(again.engine->total_members(), 2u);
  EXPECT_EQ(again.engine->ExpireDue(), 1u);
  ASSERT_TRUE(again.Durable().ok());
  EventFilter with_values;
  with_values.include_values = true;
  auto batch = again.log->Read(last_before, with_values, ReadLimits{});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].key, "o1");
  EXPECT_EQ(batch->events[0].value, "unpaid");
  EXPECT_EQ(batch->events[0].expire_time, kStart + absl::Minutes(30));
  EXPECT_EQ(batch->events[0].sequence, last_before + 1);
}

TEST_F(DurableStoreTest, AResumePositionTakenBeforeARestartWorksAfterIt) {
  uint64_t position;
  std::vector<std::string> expected;
  {
    Server s(dir_, &clock_);
    ASSERT_TRUE(s.recovered.ok());
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(Put(*s.engine, "c", absl::StrCat("k", i), "v", absl::Seconds(i + 1)).ok());
    }
    clock_.Advance(absl::Seconds(2));
    s.engine->ExpireDue();
    ASSERT_TRUE(s.Durable().ok());
    position = s.log->last_sequence();  // A watcher has read k0, k1.
    clock_.Advance(absl::Seconds(2));
    s.engine->ExpireDue();  // k2, k3: expired while the watcher is away.
    ASSERT_TRUE(s.Durable().ok());
    auto rest = s.log->Read(position, EventFilter{}, ReadLimits{});
    for (const ExpiryEvent& e : rest->events) expected.push_back(absl::StrCat(e.sequence, e.key));
  }
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok());
  auto after = again.log->Read(position, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(after.ok()) << after.status();
  std::vector<std::string> got;
  for (const ExpiryEvent& e : after->events) got.push_back(absl::StrCat(e.sequence, e.key));
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.size(), 2u);
}

TEST_F(DurableStoreTest, TheSequenceCounterSurvivesARestartWithoutSnapshotOrEvents) {
  uint64_t first_next;
  {
    Server s(dir_, &clock_, {}, /*first_sequence=*/0);
    ASSERT_TRUE(s.recovered.ok());
    ASSERT_TRUE(s.Durable().ok());
    first_next = s.log->last_sequence() + 1;
  }
  {
    // A later wall clock_ must not move the counter: positions held by
    // clients stay valid.
    clock_.Advance(absl::Hours(1));
    Server s(dir_, &clock_, {}, /*first_sequence=*/0);
    ASSERT_TRUE(s.recovered.ok());
    EXPECT_EQ(s.log->last_sequence() + 1, first_next);
    EXPECT_TRUE(s.log->CheckPosition(first_next - 1).ok());
    ASSERT_TRUE(Put(*s.engine, "c", "k", "v", absl::Seconds(1)).ok());
    clock_.Advance(absl::Seconds(1));
    ASSERT_EQ(s.engine->ExpireDue(), 1u);
    ASSERT_TRUE(s.Durable().ok());
    EXPECT_EQ(s.log->last_sequence(), first_next);
  }
  clock_.Advance(absl::Hours(1));
  Server again(dir_, &clock_, {}, /*first_sequence=*/0);
  ASSERT_TRUE(again.recovered.ok());
  EXPECT_EQ(again.log->last_sequence(), first_next);
  EXPECT_TRUE(again.log->CheckPosition(first_next - 1).ok()) << "the event is still retained";
}

TEST_F(DurableStoreTest, TheStoreIdAndFirstSequenceSurviveARestart) {
  StoreId id;
  {
    Server s(dir_, &clock_, {}, /*first_sequence=*/1000);
    ASSERT_TRUE(s.recovered.ok());
    id = s.log->store_id();
    ASSERT_TRUE(Put(*s.engine, "c", "k", "v", absl::Seconds(1)).ok());
    clock_.Advance(absl::Seconds(1));
    ASSERT_EQ(s.engine->ExpireDue(), 1u);
    ASSERT_TRUE(s.Durable().ok());
  }
  Server again(dir_, &clock_, {}, /*first_sequence=*/5000);
  ASSERT_TRUE(again.recovered.ok());
  EXPECT_EQ(again.log->store_id(), id);
  // Nothing was discarded: "after 0" reads the history from its first event.
  absl::StatusOr<EventBatch> batch = again.log->Read(0, EventFilter{}, ReadLimits{});
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].sequence, 1000u);
  EXPECT_EQ(again.log->CheckPosition(500).code(), absl::StatusCode::kOutOfRange)
      << "before this directory's first sequence: another store's";
}

TEST_F(DurableStoreTest, AnotherDirectoryHasAnotherStoreId) {
  Server s(dir_, &clock_);
  ASSERT_TRUE(s.recovered.ok());
  TempDir other;
  Server t(other.path(), &clock_);
  ASSERT_TRUE(t.recovered.ok());
  EXPECT_NE(s.log->store_id(), t.log->store_id());
}

TEST_F(DurableStoreTest, ASecondServerCannotOpenALockedDirectory) {
  DurableStore::Options options;
  options.dir = dir_;
  absl::StatusOr<std::unique_ptr<DurableStore>> first = DurableStore::Open(options);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<DurableStore>> second = DurableStore::Open(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
  EXPECT_THAT(second.status().message(), Not(HasSubstr("--"))) << "names no flag of lapsed's";
  first->reset();
  EXPECT_TRUE(DurableStore::Open(options).ok());
}

TEST_F(DurableStoreTest, DeletingEveryFileInTheDirectoryDoesNotReleaseItsLock) {
  Server first(dir_, &clock_);
  ASSERT_TRUE(first.recovered.ok());
  for (const std::string& name : Names(dir_)) {
    ASSERT_TRUE(files::Remove(absl::StrCat(dir_, "/", name)).ok()) << name;
  }
  DurableStore::Options options;
  options.dir = dir_;
  EXPECT_EQ(DurableStore::Open(options).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(DurableStoreTest, ASymlinkToALockedDirectoryFindsItLocked) {
  const std::string store = absl::StrCat(dir_, "/store");
  const std::string link = absl::StrCat(dir_, "/link");
  ASSERT_TRUE(files::EnsureDir(store).ok());
  ASSERT_EQ(::symlink(store.c_str(), link.c_str()), 0);
  DurableStore::Options options;
  options.dir = store;
  absl::StatusOr<std::unique_ptr<DurableStore>> first = DurableStore::Open(options);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(files::Remove(absl::StrCat(store, "/LOCK")).ok());
  options.dir = link;
  absl::StatusOr<std::unique_ptr<DurableStore>> second = DurableStore::Open(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(link));
  first->reset();
  EXPECT_TRUE(DurableStore::Open(options).ok());
}

TEST_F(DurableStoreTest, StartUpDeletesOnlyTheTemporaryFilesOfSnapshots) {
  const std::string left_by_a_crash = files::TempName(SnapshotName(7));
  ASSERT_TRUE(files::WriteAtomically(dir_, left_by_a_crash, "half a snapshot").ok());
  for (const char* name : {"notes.tmp", "snapshot-7.snap.tmp", ".tmp"}) {
    ASSERT_TRUE(files::WriteAtomically(dir_, name, "an operator's").ok());
  }
  Server s(dir_, &clock_);
  ASSERT_TRUE(s.recovered.ok()) << s.recovered.status();
  const std::vector<std::string> names = Names(dir_);
  EXPECT_THAT(names, ::testing::Not(::testing::Contains(left_by_a_crash)));
  EXPECT_THAT(names, ::testing::IsSupersetOf({"notes.tmp", "snapshot-7.snap.tmp", ".tmp"}));
}

TEST_F(DurableStoreTest, TheTwoNewestSnapshotsAndTheLogFromTheOlderOneAreKept) {
  Server s(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(s.recovered.ok());
  std::vector<std::string> taken;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Put(*s.engine, "c", absl::StrCat("k", i), "v").ok());
    ASSERT_TRUE(s.store->TakeSnapshot().ok());
    taken = Snapshots(dir_);
    if (i == 0) {
      EXPECT_EQ(Segments(dir_).front(), Wal::SegmentName(1)) << "the whole log is the fallback";
    }
  }
  ASSERT_EQ(taken.size(), 2u);
  uint64_t older;
  ASSERT_TRUE(ParseSnapshotName(taken[0], &older));
  EXPECT_EQ(Segments(dir_).front(), Wal::SegmentName(older));
}

// Three generations of writes with a snapshot between each.
std::string WriteSnapshotWriteSnapshotWrite(Server& s) {
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(Put(*s.engine, absl::StrCat("c", round), absl::StrCat("k", i),
                      absl::StrCat(round, "/", i))
                      .ok());
    }
    absl::string_view gone[] = {"k3"};
    EXPECT_TRUE(s.engine->Remove(absl::StrCat("c", round), gone).ok());
    if (round < 2) {
      EXPECT_TRUE(s.store->TakeSnapshot().ok());
    }
  }
  EXPECT_TRUE(s.Durable().ok());
  return Dump(*s.engine, *s.log);
}

TEST_F(DurableStoreTest, ADamagedNewestSnapshotFallsBackToThePreviousOneLosingNoWrite) {
  std::string before;
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    before = WriteSnapshotWriteSnapshotWrite(s);
  }
  const std::vector<std::string> snapshots = Snapshots(dir_);
  ASSERT_EQ(snapshots.size(), 2u);
  Damage(dir_, snapshots[1]);
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_EQ(again.recovered->snapshot, snapshots[0]);
  EXPECT_THAT(again.recovered->damaged_snapshots, HasSubstr(snapshots[1]));
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

TEST_F(DurableStoreTest, ADamagedOnlySnapshotFallsBackToTheWholeLog) {
  std::string before;
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    MakeHistory(s, clock_);
    ASSERT_TRUE(s.store->TakeSnapshot().ok());
    ASSERT_TRUE(Put(*s.engine, "after", "a", "1").ok());
    ASSERT_TRUE(s.Durable().ok());
    before = Dump(*s.engine, *s.log);
  }
  const std::vector<std::string> snapshots = Snapshots(dir_);
  ASSERT_EQ(snapshots.size(), 1u);
  Damage(dir_, snapshots[0]);
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_EQ(again.recovered->snapshot, "");
  EXPECT_THAT(again.recovered->damaged_snapshots, HasSubstr(snapshots[0]));
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

TEST_F(DurableStoreTest, WithNoUsableSnapshotNorWholeLogStartUpRefusesNamingTheFiles) {
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    WriteSnapshotWriteSnapshotWrite(s);
    ASSERT_TRUE(s.store->TakeSnapshot().ok());
  }
  const std::vector<std::string> snapshots = Snapshots(dir_);
  ASSERT_EQ(snapshots.size(), 2u);
  for (const std::string& name : snapshots) Damage(dir_, name);
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  EXPECT_EQ(again.recovered.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(again.recovered.status().message(), HasSubstr(snapshots[0]));
  EXPECT_THAT(again.recovered.status().message(), HasSubstr(snapshots[1]));
  EXPECT_THAT(again.recovered.status().message(), HasSubstr(Segments(dir_).front()));
}

TEST_F(DurableStoreTest, ASnapshotWithoutRoomIsSkippedAndTheLogKeepsWorking) {
  DurableStore::Options options = WithoutAutomaticSnapshots();
  options.free_bytes_for_testing = [] { return uint64_t{4096}; };
  std::string before;
  {
    Server s(dir_, &clock_, options);
    ASSERT_TRUE(s.recovered.ok());
    MakeHistory(s, clock_);
    const std::vector<std::string> names = Names(dir_);
    absl::StatusOr<SnapshotStats> snap = s.store->TakeSnapshot();
    EXPECT_EQ(snap.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(snap.status().message(), HasSubstr(dir_));
    EXPECT_EQ(s.store->snapshots_skipped_for_space(), 1u);
    EXPECT_EQ(Names(dir_), names) << "no snapshot, no temporary file, no new segment";
    ASSERT_TRUE(Put(*s.engine, "after", "a", "1").ok());
    ASSERT_TRUE(s.Durable().ok());
    before = Dump(*s.engine, *s.log);
  }
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

// Under always the log fills the 4 MiB ahead of its writes with zeros; the
// first snapshot's estimate counts what the log wrote, a few KiB here.
TEST_F(DurableStoreTest, TheFirstSnapshotsRoomCountsTheLogsBytesNotTheZerosAheadOfThem) {
  DurableStore::Options options = WithoutAutomaticSnapshots();
  options.fsync = FsyncPolicy::kAlways;
  options.free_bytes_for_testing = [&] { return options.segment_bytes + (uint64_t{1} << 20); };
  Server s(dir_, &clock_, options);
  ASSERT_TRUE(s.recovered.ok());
  MakeHistory(s, clock_);
  absl::StatusOr<uint64_t> segment =
      files::FileSize(absl::StrCat(dir_, "/", Segments(dir_).back()));
  ASSERT_TRUE(segment.ok()) << segment.status();
  ASSERT_GT(*segment, uint64_t{1} << 20) << "the zeros ahead of the writes";
  absl::StatusOr<SnapshotStats> snap = s.store->TakeSnapshot();
  EXPECT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(s.store->snapshots_skipped_for_space(), 0u);
}

// What the log held before a restart counts too.
TEST_F(DurableStoreTest, TheFirstSnapshotsRoomCountsTheLogReplayedAtTheStart) {
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    MakeHistory(s, clock_);
  }
  uint64_t log_bytes = 0;
  for (const std::string& name : Segments(dir_)) {
    absl::StatusOr<uint64_t> size = files::FileSize(absl::StrCat(dir_, "/", name));
    ASSERT_TRUE(size.ok()) << size.status();
    log_bytes += *size;
  }
  DurableStore::Options options = WithoutAutomaticSnapshots();
  options.free_bytes_for_testing = [&] { return options.segment_bytes + log_bytes / 2; };
  Server again(dir_, &clock_, options);
  ASSERT_TRUE(again.recovered.ok());
  EXPECT_EQ(again.store->TakeSnapshot().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(again.store->snapshots_skipped_for_space(), 1u);
}

TEST_F(DurableStoreTest, ASnapshotSkippedForLackOfRoomIsRetried) {
  Mutex mu;
  int checks = 0;
  DurableStore::Options options;
  options.snapshot_after_bytes = 1;
  options.snapshot_retry_after = absl::ZeroDuration();
  options.free_bytes_for_testing = [&] {
    MutexLock lock(&mu);
    return ++checks == 1 ? uint64_t{0} : uint64_t{1} << 40;
  };
  Server s(dir_, &clock_, options);
  ASSERT_TRUE(s.recovered.ok());
  ASSERT_TRUE(Put(*s.engine, "c", "k", "v").ok());
  ASSERT_TRUE(s.Durable().ok());
  EXPECT_TRUE(s.store->AwaitSnapshotsForTesting(1, ::lapse::testing::kPatience));
  EXPECT_EQ(s.store->snapshots_skipped_for_space(), 1u);
}

TEST_F(DurableStoreTest, AutomaticSnapshotsKeepTheLogShort) {
  std::string before;
  {
    DurableStore::Options options;
    options.segment_bytes = 4096;
    options.snapshot_after_bytes = 16384;
    Server s(dir_, &clock_, options);
    ASSERT_TRUE(s.recovered.ok());
    for (int i = 0; i < 3000; ++i) {
      ASSERT_TRUE(Put(*s.engine, "c", absl::StrCat("k", i % 100), std::string(40, 'v')).ok());
    }
    ASSERT_TRUE(s.Durable().ok());
    ASSERT_TRUE(s.store->AwaitSnapshotsForTesting(1, absl::Seconds(30)));
    before = Dump(*s.engine, *s.log);
  }
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok());
  EXPECT_EQ(Dump(*again.engine, *again.log), before);
}

// Expires `n` members of collection "c" (keys k<first>...), durably, so
// that their events are visible.
void ExpireDurably(Server& s, FakeClock& clock, int first, int n) {
  for (int i = first; i < first + n; ++i) {
    ASSERT_TRUE(Put(*s.engine, "c", absl::StrCat("k", i), "v", absl::Seconds(1)).ok());
  }
  clock.Advance(absl::Seconds(1));
  ASSERT_EQ(s.engine->ExpireDue(), static_cast<size_t>(n));
  ASSERT_TRUE(s.Durable().ok());
}

std::vector<LeaseRef> Leased(Server& s, absl::string_view consumer, size_t max) {
  absl::StatusOr<PollResult> got = s.groups->Poll("g", consumer, max);
  EXPECT_TRUE(got.ok()) << got.status();
  std::vector<LeaseRef> refs;
  if (got.ok()) {
    for (const Delivery& d : got->deliveries) refs.push_back({d.event.sequence, d.delivery_count});
  }
  return refs;
}

// Group "g" (dead letters after two deliveries) over five events: one
// acked, one dead-lettered, three leased (one to w1, two to w2). Returns w1's
// lease.
LeaseRef MakeGroupHistory(Server& s, FakeClock& clock) {
  EXPECT_TRUE(s.groups->Create("g", {.max_deliveries = 2}, {}).ok());
  ExpireDurably(s, clock, 0, 5);
  std::vector<LeaseRef> w1 = Leased(s, "w1", 3);
  EXPECT_EQ(w1.size(), 3u);
  EXPECT_TRUE(s.groups->Ack("g", "w1", {w1[0]}).ok());
  EXPECT_TRUE(s.groups->Nack("g", "w1", {w1[1]}).ok());
  std::vector<LeaseRef> second = Leased(s, "w1", 1);
  EXPECT_EQ(second.size(), 1u);
  EXPECT_TRUE(s.groups->Nack("g", "w1", second).ok());
  EXPECT_EQ(Leased(s, "w2", 2).size(), 2u);
  EXPECT_TRUE(s.Durable().ok());
  return w1[2];
}

// After MakeGroupHistory and a restart: nothing acked comes back, nothing
// unacknowledged is lost, and the consumers keep their leases.
void ExpectGroupHistoryRestored(Server& s, FakeClock& clock, LeaseRef w1_lease) {
  absl::StatusOr<ConsumerGroupInfo> info = s.groups->Get("g", 10);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->position, s.log->last_sequence());
  EXPECT_EQ(info->pending, 3u);
  EXPECT_EQ(info->dead_lettered, 1u);
  ASSERT_EQ(info->leases.size(), 3u);
  EXPECT_EQ(info->leases[0].consumer, "w1");
  EXPECT_EQ(info->leases[1].consumer, "w2");
  absl::StatusOr<std::vector<absl::Status>> acked = s.groups->Ack("g", "w1", {w1_lease});
  ASSERT_TRUE(acked.ok());
  EXPECT_TRUE((*acked)[0].ok()) << (*acked)[0];
  EXPECT_TRUE(Leased(s, "w3", 10).empty());
  clock.Advance(absl::Seconds(30));
  std::vector<LeaseRef> redelivered = Leased(s, "w3", 10);
  ASSERT_EQ(redelivered.size(), 2u);
  EXPECT_EQ(redelivered[0].delivery_count, 2u);
}

TEST_F(DurableStoreTest, ConsumerGroupsTheirPositionsLeasesAndDeadLettersSurviveARestart) {
  LeaseRef w1_lease;
  {
    Server s(dir_, &clock_);
    ASSERT_TRUE(s.recovered.ok()) << s.recovered.status();
    w1_lease = MakeGroupHistory(s, clock_);
  }
  Server again(dir_, &clock_);
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  ExpectGroupHistoryRestored(again, clock_, w1_lease);
}

TEST_F(DurableStoreTest, ConsumerGroupsAreRestoredFromASnapshotAndTheLogAfterIt) {
  LeaseRef w1_lease;
  {
    Server s(dir_, &clock_, WithoutAutomaticSnapshots());
    ASSERT_TRUE(s.recovered.ok());
    ASSERT_TRUE(s.groups->Create("deleted-after-the-snapshot", {}, {}).ok());
    ASSERT_TRUE(s.groups->Create("g", {}, {}).ok());
    ExpireDurably(s, clock_, 100, 2);
    std::vector<LeaseRef> before = Leased(s, "w0", 2);
    ASSERT_TRUE(s.groups->Delete("g").ok());
    absl::StatusOr<SnapshotStats> snap = s.store->TakeSnapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    EXPECT_EQ(snap->group_records, 1u);
    ASSERT_TRUE(s.groups->Delete("deleted-after-the-snapshot").ok());
    w1_lease = MakeGroupHistory(s, clock_);
    ASSERT_TRUE(s.store->TakeSnapshot().ok());
    // After the second snapshot: replayed from the log.
    ExpireDurably(s, clock_, 200, 1);
    ASSERT_EQ(Leased(s, "w4", 1).size(), 1u);
    ASSERT_TRUE(s.Durable().ok());
  }
  Server again(dir_, &clock_, WithoutAutomaticSnapshots());
  ASSERT_TRUE(again.recovered.ok()) << again.recovered.status();
  EXPECT_GT(again.recovered->snapshot_group_records, 0u);
  EXPECT_EQ(again.groups->Get("deleted-after-the-snapshot").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<ConsumerGroupInfo> info = again.groups->Get("g", 10);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->pending, 4u);
  ASSERT_TRUE(again.groups->Ack("g", "w4", {{info->leases.back().sequence, 1}}).ok());
  ExpectGroupHistoryRestored(again, clock_, w1_lease);
}

TEST_F(DurableStoreTest, AGroupChangeWhoseLogWriteFailedIsUndoneBeforeItsClientIsTold) {
  lapse::testing::DiskFault disk;
  DurableStore::Options options;
  options.disk_fault_for_testing = disk.Hook();
  Server s(dir_, &clock_, options);
  ASSERT_TRUE(s.recovered.ok());
  ASSERT_TRUE(s.groups->Create("g", {}, {}).ok());
  ExpireDurably(s, clock_, 0, 1);
  std::vector<LeaseRef> leased = Leased(s, "w1", 1);
  ASSERT_TRUE(s.Durable().ok());
  disk.Fail(EIO, {DiskOp::kWrite});
  CommitTicket ticket = 0;
  absl::StatusOr<std::vector<absl::Status>> acked = s.groups->Ack("g", "w1", leased, &ticket);
  ASSERT_TRUE(acked.ok());
  ASSERT_NE(ticket, 0u);
  Mutex mu;
  CondVar cv;
  std::optional<absl::Status> told;
  s.store->WhenDurable(ticket, [&](absl::Status status) {
    MutexLock lock(&mu);
    // The ack was undone before this runs: the event is leased again.
    absl::StatusOr<ConsumerGroupInfo> info = s.groups->Get("g", 10);
    EXPECT_TRUE(info.ok() && info->pending == 1 && info->leases.size() == 1);
    told = status;
    cv.SignalAll();
  });
  MutexLock lock(&mu);
  ASSERT_TRUE(lapse::testing::WaitWithPatience(mu, cv, [&] { return told.has_value(); }));
  EXPECT_FALSE(told->ok());
}

}  // namespace
}  // namespace lapse

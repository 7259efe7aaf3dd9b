#include "server/storage/snapshot.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/clock.h"
#include "server/base/coding.h"
#include "server/storage/files.h"
#include "server/storage/frame.h"
#include "testing/temp_dir.h"

namespace lapse {
namespace {

using ::lapse::testing::TempDir;
using ::testing::HasSubstr;

constexpr uint64_t kLsn = 7;

// An engine with 3000 members of 1000-byte values and 500 expiry events: a
// snapshot of about 3 MB, more than one piece of the file as it is read.
class SnapshotTest : public ::testing::Test {
 protected:
  SnapshotTest() {
    for (int i = 0; i < 3000; ++i) {
      const std::string key = absl::StrCat("k", i);
      const std::string value(1000, static_cast<char>('a' + i % 26));
      const MemberWrite write{key, value,
                              i < 500 ? Expiration::Ttl(absl::Seconds(1)) : Expiration::None()};
      EXPECT_TRUE(engine_.Put(absl::StrCat("c", i % 7), {write}, {}).ok());
    }
    clock_.Advance(absl::Seconds(2));
    EXPECT_EQ(engine_.ExpireDue(), 500u);
  }

  const std::string& path() const { return path_; }

  // LoadSnapshot of the file, counting the records it hands out.
  absl::StatusOr<SnapshotContents> Load() {
    return LoadSnapshot(path_, [this](const JournalRecord&) { ++records_seen_; });
  }

  const TempDir temp_dir_;
  const std::string& dir_ = temp_dir_.path();
  const std::string path_ = absl::StrCat(dir_, "/", SnapshotName(kLsn));
  FakeClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  EventFeed log_{EventFeed::Options{}};
  Engine engine_{Engine::Options{.shards = 4}, &clock_, &log_};
  uint64_t records_seen_ = 0;
};

TEST_F(SnapshotTest, ASnapshotReadsBackWithEveryMemberAndEvent) {
  absl::StatusOr<SnapshotStats> written = WriteSnapshot(dir_, kLsn, &engine_, log_, nullptr);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->members, 2500u);
  EXPECT_EQ(written->events, 500u);
  EXPECT_GT(written->bytes, uint64_t{2} << 20);
  EXPECT_EQ(*files::List(dir_), std::vector<std::string>{SnapshotName(kLsn)})
      << "no temporary file is left";

  absl::StatusOr<SnapshotContents> loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->replay_from_lsn, kLsn);
  EXPECT_EQ(loaded->members, 2500u);
  EXPECT_EQ(loaded->events, 500u);
  EXPECT_EQ(loaded->bytes, written->bytes);
  EXPECT_EQ(loaded->next_event_sequence, log_.last_sequence() + 1);
  EXPECT_EQ(records_seen_, 3000u);
}

TEST_F(SnapshotTest, ASnapshotRefusedBeforeItIsPublishedLeavesNoFile) {
  bool asked = false;
  absl::StatusOr<SnapshotStats> written =
      WriteSnapshot(dir_, kLsn, &engine_, log_, nullptr, [&asked]() -> absl::Status {
        asked = true;
        return absl::AbortedError("a write failed");
      });
  EXPECT_TRUE(asked);
  EXPECT_EQ(written.status(), absl::AbortedError("a write failed"));
  EXPECT_THAT(*files::List(dir_), ::testing::IsEmpty())
      << "neither the snapshot nor its temporary file";
}

TEST_F(SnapshotTest, DamageAnywhereIsDataLossAndNothingOfItIsLoaded) {
  ASSERT_TRUE(WriteSnapshot(dir_, kLsn, &engine_, log_, nullptr).ok());
  const std::string original = *files::ReadAll(path_);
  std::vector<std::pair<std::string, std::string>> damaged;  // What, contents.
  for (const size_t at :
       {size_t{3}, size_t{30}, original.size() / 3, original.size() * 2 / 3, original.size() - 3}) {
    std::string flipped = original;
    flipped[at] ^= 0x10;
    damaged.emplace_back(absl::StrCat("a bit flipped at ", at), flipped);
  }
  damaged.emplace_back("cut short", original.substr(0, original.size() - 1));
  damaged.emplace_back("cut in half", original.substr(0, original.size() / 2));
  damaged.emplace_back("a byte after its end", original + "x");
  for (const auto& [what, contents] : damaged) {
    ASSERT_TRUE(files::WriteAtomically(dir_, SnapshotName(kLsn), contents).ok());
    absl::StatusOr<SnapshotContents> loaded = Load();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << what;
    EXPECT_THAT(loaded.status().message(), HasSubstr(path_)) << what;
    EXPECT_EQ(records_seen_, 0u) << what << ": records of a damaged snapshot were handed out";
  }
}

TEST_F(SnapshotTest, ASnapshotWithConsumerGroupsReadsBackWithTheirRecords) {
  ConsumerGroups groups({}, &clock_, &log_);
  ASSERT_TRUE(groups.Create("g", {}, {.kind = GroupStart::Kind::kOldest}).ok());
  ASSERT_TRUE(groups.Poll("g", "w", 3).ok());
  absl::StatusOr<SnapshotStats> written = WriteSnapshot(dir_, kLsn, &engine_, log_, &groups);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->group_records, 4u);  // The group and its three pending events.
  ConsumerGroups loaded({}, &clock_, &log_);
  absl::StatusOr<SnapshotContents> contents =
      LoadSnapshot(path(), [&](const JournalRecord& r) { EXPECT_TRUE(loaded.Apply(r).ok()); });
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->group_records, 4u);
  EXPECT_EQ(loaded.Get("g")->pending, 3u);
}

TEST_F(SnapshotTest, ASnapshotFromBeforeConsumerGroupsStillLoads) {
  // Its footer ends after next_event_sequence.
  std::string file;
  std::string header = "lapse-snapshot-1";
  PutFixed64(&header, kLsn);
  AppendFrame(&file, 0, header);
  std::string footer = "end";
  PutFixed64(&footer, 0);
  PutFixed64(&footer, 0);
  PutFixed64(&footer, 42);
  AppendFrame(&file, 1, footer);
  ASSERT_TRUE(files::WriteAtomically(dir_, SnapshotName(kLsn), file).ok());
  absl::StatusOr<SnapshotContents> contents = Load();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->next_event_sequence, 42u);
  EXPECT_EQ(contents->group_records, 0u);
}

}  // namespace
}  // namespace lapse

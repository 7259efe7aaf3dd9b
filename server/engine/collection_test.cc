#include "server/engine/collection.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/deadline.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> KeysOf(const std::vector<const StoredMember*>& members) {
  std::vector<std::string> keys;
  for (const StoredMember* m : members) keys.emplace_back(m->key());
  return keys;
}

TEST(StoredMemberTest, KeepsKeysValuesAndDeadlinesOfEverySize) {
  const std::string long_key(300, 'k');
  const std::string long_value(70'000, 'v');
  struct Case {
    std::string key;
    std::string value;
    int64_t deadline_ms;
  };
  const std::vector<Case> cases = {
      {"", "", kNoDeadlineMs},
      {"k", "", kEarliestDeadlineMs},
      {std::string(254, 'a'), std::string(254, 'b'), kLatestDeadlineMs},
      {std::string(255, 'a'), "v", 0},
      {"k", std::string(255, 'b'), -1},
      {long_key, long_value, 1'700'000'000'000},
  };
  for (const Case& c : cases) {
    StoredMember::Ptr m = StoredMember::Create(c.key, c.value, c.deadline_ms);
    EXPECT_EQ(m->key(), c.key);
    EXPECT_EQ(m->value(), c.value);
    EXPECT_EQ(m->deadline_ms(), c.deadline_ms);
    EXPECT_EQ(m->has_deadline(), c.deadline_ms != kNoDeadlineMs);
  }
}

// Runs each test on a small collection and on one in the indexed form: one
// that grew past kSmallMax and was emptied keeps its indexes.
class CollectionTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) return;
    for (size_t i = 0; i <= Collection::kSmallMax; ++i) c.Insert(Filler(i), "", kNoDeadlineMs);
    for (size_t i = 0; i <= Collection::kSmallMax; ++i) c.Erase(c.Find(Filler(i)));
  }
  static std::string Filler(size_t i) { return "~" + std::to_string(i); }

  Collection::Ptr collection = Collection::Create("c");
  Collection& c = *collection;
};

INSTANTIATE_TEST_SUITE_P(SmallAndIndexed, CollectionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Indexed" : "Small";
                         });

TEST_P(CollectionTest, ReplaceKeepsTheKeyAndMovesTheDeadlineOfEverySize) {
  c.Insert(std::string(300, 'k'), "small", 10);
  const StoredMember* m = c.Find(std::string(300, 'k'));
  ASSERT_NE(m, nullptr);
  c.Replace(m, "SMALL", 5);  // Same size: in place.
  m = c.Find(std::string(300, 'k'));
  EXPECT_EQ(m->value(), "SMALL");
  EXPECT_EQ(m->deadline_ms(), 5);
  c.Replace(m, std::string(1000, 'v'), kNoDeadlineMs);
  m = c.Find(std::string(300, 'k'));
  EXPECT_EQ(m->key(), std::string(300, 'k'));
  EXPECT_EQ(m->value(), std::string(1000, 'v'));
  EXPECT_FALSE(m->has_deadline());
  EXPECT_EQ(c.expiring_count(), 0u);
}

TEST_P(CollectionTest, DeadlineOrderFollowsEveryChange) {
  c.Insert("a", "1", 30);
  c.Insert("b", "2", 10);
  c.Insert("c", "3", 20);
  c.Insert("d", "4", 10);
  c.Insert("e", "5", kNoDeadlineMs);
  bool more = true;
  EXPECT_THAT(KeysOf(c.PageByDeadline(nullptr, 10, &more)), ElementsAre("b", "d", "c", "a", "e"));
  EXPECT_FALSE(more);
  EXPECT_EQ(c.next_deadline_ms(), 10);

  c.SetDeadline(c.Find("b"), 25);  // The earliest moves back.
  c.Erase(c.Find("c"));            // One in the middle goes.
  c.SetDeadline(c.Find("e"), 5);   // A persistent member gets the earliest deadline.
  EXPECT_THAT(KeysOf(c.PageByDeadline(nullptr, 10, &more)), ElementsAre("e", "d", "b", "a"));
  EXPECT_EQ(c.EarliestExpiring()->key(), "e");

  c.Erase(c.EarliestExpiring());
  c.SetDeadline(c.Find("a"), kNoDeadlineMs);
  const DeadlinePosition after{10, "d"};
  EXPECT_THAT(KeysOf(c.PageByDeadline(&after, 10, &more)), ElementsAre("b", "a"));
  EXPECT_EQ(c.expiring_count(), 2u);
  EXPECT_EQ(c.next_deadline_ms(), 10);
}

TEST_P(CollectionTest, KeepsBothOrdersAsItGrowsPastTheSmallForm) {
  // Deadlines fall as keys rise; every third member is persistent.
  std::vector<std::string> by_key;
  std::vector<std::string> by_deadline;
  std::vector<std::string> persistent;
  for (int i = 0; i < 40; ++i) {
    const std::string key = absl::StrFormat("k%02d", i);
    const bool expires = i % 3 != 0;
    c.Insert(key, "v", expires ? 1000 - i : kNoDeadlineMs);
    by_key.push_back(key);
    (expires ? by_deadline : persistent).push_back(key);
    EXPECT_EQ(c.size(), by_key.size());
    EXPECT_EQ(c.Find(key)->key(), key);
    const StoredMember* earliest = c.EarliestExpiring();
    ASSERT_EQ(earliest == nullptr, by_deadline.empty());
    if (earliest != nullptr) {
      EXPECT_EQ(earliest->key(), by_deadline.back());
    }
  }
  std::reverse(by_deadline.begin(), by_deadline.end());
  by_deadline.insert(by_deadline.end(), persistent.begin(), persistent.end());
  bool more = true;
  EXPECT_EQ(KeysOf(c.PageByKey(nullptr, 100, &more)), by_key);
  EXPECT_FALSE(more);
  EXPECT_EQ(KeysOf(c.PageByDeadline(nullptr, 100, &more)), by_deadline);
  EXPECT_FALSE(more);
  EXPECT_EQ(c.expiring_count(), 26u);
  const absl::string_view after_key = "k09";
  EXPECT_THAT(KeysOf(c.PageByKey(&after_key, 2, &more)), ElementsAre("k10", "k11"));
  EXPECT_TRUE(more);
  const DeadlinePosition after{kNoDeadlineMs, "k03"};
  EXPECT_THAT(KeysOf(c.PageByDeadline(&after, 2, &more)), ElementsAre("k06", "k09"));
  EXPECT_TRUE(more);
}

// What EraseDue's callback saw: "key=value@deadline" per member, in order.
struct Expired {
  std::vector<std::string> seen;
  void operator()(const StoredMember& m) {
    seen.push_back(absl::StrFormat("%s=%s@%d", m.key(), m.value(), m.deadline_ms()));
  }
};

std::vector<std::string> EraseDue(Collection& c, int64_t now_ms, size_t limit) {
  Expired expired;
  const size_t erased = c.EraseDue(now_ms, limit, std::ref(expired));
  EXPECT_EQ(erased, expired.seen.size());
  return expired.seen;
}

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

TEST_P(CollectionTest, EraseDueTakesTheDueMembersInDeadlineOrderAndKeepsTheRest) {
  EXPECT_THAT(EraseDue(c, 100, kNoLimit), ElementsAre());  // Empty.
  c.Insert("a", "1", 30);
  c.Insert("b", "2", 10);
  c.Insert("c", "3", 20);
  c.Insert("d", "4", 10);
  c.Insert("e", "5", kNoDeadlineMs);
  c.Insert("f", "6", 31);
  EXPECT_THAT(EraseDue(c, 9, kNoLimit), ElementsAre());
  EXPECT_THAT(EraseDue(c, 30, 3), ElementsAre("b=2@10", "d=4@10", "c=3@20"));
  EXPECT_EQ(c.Find("b"), nullptr);
  EXPECT_EQ(c.Find("c"), nullptr);
  EXPECT_EQ(c.Find("a")->value(), "1");
  EXPECT_EQ(c.next_deadline_ms(), 30);
  EXPECT_THAT(EraseDue(c, 30, kNoLimit), ElementsAre("a=1@30"));
  bool more = true;
  EXPECT_THAT(KeysOf(c.PageByKey(nullptr, 10, &more)), ElementsAre("e", "f"));
  EXPECT_THAT(KeysOf(c.PageByDeadline(nullptr, 10, &more)), ElementsAre("f", "e"));
  EXPECT_EQ(c.expiring_count(), 1u);
  EXPECT_EQ(c.EarliestExpiring()->key(), "f");
}

TEST_P(CollectionTest, EraseDueOfEveryMemberEmptiesTheCollection) {
  // In key order the deadlines fall, so the events' order is not the key
  // order.
  for (int i = 0; i < 12; ++i) c.Insert(absl::StrFormat("k%02d", i), "v", 100 - i % 5);
  std::vector<std::string> want;
  for (int d = 96; d <= 100; ++d) {
    for (int i = 0; i < 12; ++i) {
      if (100 - i % 5 == d) want.push_back(absl::StrFormat("k%02d=v@%d", i, d));
    }
  }
  EXPECT_EQ(EraseDue(c, 100, kNoLimit), want);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.EarliestExpiring(), nullptr);
  EXPECT_EQ(c.Find("k00"), nullptr);
  c.Insert("k00", "again", 5);
  EXPECT_EQ(c.Find("k00")->value(), "again");
  EXPECT_EQ(c.next_deadline_ms(), 5);
}

TEST(CollectionEraseDueTest, ErasingPartOfALargeCollectionKeepsItsKeyIndex) {
  // Members sharing one deadline (the key index's next member is the next to
  // go) among members due later and persistent ones (it is not).
  Collection::Ptr collection = Collection::Create("c");
  Collection& c = *collection;
  std::vector<std::string> shared;
  std::vector<std::string> later;
  std::vector<std::string> persistent;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = absl::StrFormat("k%04d", i);
    const int64_t deadline = i % 5 == 4 ? kNoDeadlineMs : i % 5 == 3 ? 20 + i % 11 : 10;
    c.Insert(key, key, deadline);
    (deadline == 10 ? shared : deadline == kNoDeadlineMs ? persistent : later).push_back(key);
  }
  std::vector<std::string> gone;
  while (gone.size() < shared.size()) {
    for (const std::string& event : EraseDue(c, 19, 250)) {
      gone.push_back(event.substr(0, 5));
      EXPECT_EQ(event, absl::StrFormat("%s=%s@10", gone.back(), gone.back()));
    }
    ASSERT_LE(gone.size(), shared.size());
    EXPECT_TRUE(std::equal(gone.begin(), gone.end(), shared.begin()));
    std::vector<std::string> left(shared.begin() + gone.size(), shared.end());
    left.insert(left.end(), later.begin(), later.end());
    left.insert(left.end(), persistent.begin(), persistent.end());
    std::sort(left.begin(), left.end());
    bool more = true;
    EXPECT_EQ(KeysOf(c.PageByKey(nullptr, 1000, &more)), left);
    for (const std::string& key : left) EXPECT_EQ(c.Find(key)->key(), key);
    for (const std::string& key : gone) EXPECT_EQ(c.Find(key), nullptr);
  }
  EXPECT_THAT(EraseDue(c, 19, kNoLimit), ElementsAre());
  EXPECT_EQ(EraseDue(c, 30, kNoLimit).size(), later.size());
  bool more = true;
  EXPECT_EQ(KeysOf(c.PageByKey(nullptr, 1000, &more)), persistent);
  EXPECT_EQ(c.EarliestExpiring(), nullptr);
}

}  // namespace
}  // namespace lapse

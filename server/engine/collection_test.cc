#include "server/engine/collection.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
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

// Puts with no interest in the member replaced.
void Put(Collection& c, absl::string_view key, absl::string_view value, int64_t deadline_ms) {
  c.Put(key, value, deadline_ms, [](const StoredMember&) {});
}

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
      {std::string(126, 'a'), std::string(254, 'b'), kLatestDeadlineMs},
      {std::string(127, 'a'), std::string(126, 'b'), 1},
      {std::string(255, 'a'), "v", 0},
      {"k", std::string(255, 'b'), -1},
      {long_key, long_value, 1'700'000'000'000},
  };
  for (const Case& c : cases) {
    StoredMember::Ptr m = StoredMember::Create(c.key, c.value, c.deadline_ms);
    EXPECT_EQ(m->key(), c.key);
    EXPECT_EQ(m->value(), c.value);
    EXPECT_EQ(m->deadline_ms(/*small_base_ms=*/0), c.deadline_ms);
    EXPECT_EQ(m->has_deadline(), c.deadline_ms != kNoDeadlineMs);
  }
}

// Runs each test on a small collection and on one in the indexed form: one
// that grew past kSmallMax and was emptied keeps its indexes.
class CollectionTest : public ::testing::TestWithParam<bool> {
 protected:
  static Collection::Ptr MakeCollection(bool indexed) {
    Collection::Ptr made = Collection::Create("c");
    if (!indexed) return made;
    for (size_t i = 0; i <= Collection::kSmallMax; ++i) Put(*made, Filler(i), "", kNoDeadlineMs);
    for (size_t i = 0; i <= Collection::kSmallMax; ++i) made->Erase(made->Find(Filler(i)));
    return made;
  }
  static std::string Filler(size_t i) { return "~" + std::to_string(i); }

  Collection::Ptr collection = MakeCollection(GetParam());
  Collection& c = *collection;
};

INSTANTIATE_TEST_SUITE_P(SmallAndIndexed, CollectionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Indexed" : "Small";
                         });

TEST_P(CollectionTest, PutReplacesAMemberShowingItFirstAndKeepsItsKey) {
  const std::string key(300, 'k');
  std::vector<std::string> replaced;
  const auto put = [&](absl::string_view value, int64_t deadline_ms) {
    return c.Put(key, value, deadline_ms, [&](const StoredMember& m) {
      replaced.push_back(absl::StrFormat("%s@%d", m.value(), c.DeadlineOf(m)));
    });
  };
  EXPECT_TRUE(put("small", 10));
  EXPECT_FALSE(put("SMALL", 5));  // Same size: in place.
  const StoredMember* m = c.Find(key);
  EXPECT_EQ(m->value(), "SMALL");
  EXPECT_EQ(c.DeadlineOf(*m), 5);
  EXPECT_FALSE(put(std::string(1000, 'v'), kNoDeadlineMs));
  m = c.Find(key);
  EXPECT_EQ(m->key(), key);
  EXPECT_EQ(m->value(), std::string(1000, 'v'));
  EXPECT_FALSE(m->has_deadline());
  EXPECT_EQ(c.expiring_count(), 0u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_THAT(replaced, ElementsAre("small@10", "SMALL@5"));
}

TEST_P(CollectionTest, DeadlineOrderFollowsEveryChange) {
  Put(c, "a", "1", 30);
  Put(c, "b", "2", 10);
  Put(c, "c", "3", 20);
  Put(c, "d", "4", 10);
  Put(c, "e", "5", kNoDeadlineMs);
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
    Put(c, key, "v", expires ? 1000 - i : kNoDeadlineMs);
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
  const Collection* c;
  std::vector<std::string> seen;
  void operator()(const StoredMember& m) {
    seen.push_back(absl::StrFormat("%s=%s@%d", m.key(), m.value(), c->DeadlineOf(m)));
  }
};

std::vector<std::string> EraseDue(Collection& c, int64_t now_ms, size_t limit) {
  Expired expired{&c, {}};
  const size_t erased = c.EraseDue(now_ms, limit, std::ref(expired));
  EXPECT_EQ(erased, expired.seen.size());
  return expired.seen;
}

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

// Every member as "key=value@deadline", in key order, read through Find as
// well as through the key page.
std::vector<std::string> Members(const Collection& c) {
  std::vector<std::string> out;
  bool more = true;
  for (const StoredMember* m : c.PageByKey(nullptr, 1000, &more)) {
    out.push_back(absl::StrFormat("%s=%s@%d", m->key(), m->value(), c.DeadlineOf(*m)));
    const StoredMember* found = c.Find(m->key());
    EXPECT_EQ(found, m) << m->key();
  }
  EXPECT_FALSE(more);
  EXPECT_EQ(out.size(), c.size());
  return out;
}

std::string Member(absl::string_view key, absl::string_view value, int64_t deadline_ms) {
  return absl::StrFormat("%s=%s@%d", key, value, deadline_ms);
}

TEST_P(CollectionTest, ReplacesBetweenEverySizeKeepTheMemberAndItsNeighbours) {
  // Sizes either side of the size escapes (127 for keys, 255 for values).
  const std::vector<size_t> sizes = {0, 1, 126, 127, 254, 255, 700};
  for (size_t key_size : {1, 126, 127, 128, 254, 255, 700}) {
    for (size_t from : sizes) {
      for (size_t to : sizes) {
        const std::string key = "m" + std::string(key_size - 1, 'k');
        Put(c, "a", "before", 1);
        Put(c, key, std::string(from, 'f'), 2);
        Put(c, "n", "after", kNoDeadlineMs);
        Put(c, key, std::string(to, 't'), 3);
        EXPECT_THAT(Members(c),
                    ElementsAre(Member("a", "before", 1), Member(key, std::string(to, 't'), 3),
                                Member("n", "after", kNoDeadlineMs)))
            << key_size << " " << from << " -> " << to;
        EXPECT_EQ(c.next_deadline_ms(), 1);
        c.Erase(c.Find("a"));
        EXPECT_EQ(c.next_deadline_ms(), 3);
        c.Erase(c.Find(key));
        c.Erase(c.Find("n"));
        ASSERT_TRUE(c.empty());
      }
    }
  }
}

TEST_P(CollectionTest, AMemberTooLargeForTheSmallFormKeepsEveryMember) {
  // Larger than the small form's sizes can count, too.
  const std::string large(70'000, 'L');
  Put(c, "a", "1", 5);
  Put(c, "c", "3", 7);
  Put(c, "b", "2", 6);
  Put(c, "b", large, 4);  // Replaced by one too large.
  EXPECT_THAT(Members(c),
              ElementsAre(Member("a", "1", 5), Member("b", large, 4), Member("c", "3", 7)));
  Put(c, "d", large, 8);  // Inserted too large.
  Put(c, "b", "2", 9);
  EXPECT_THAT(Members(c), ElementsAre(Member("a", "1", 5), Member("b", "2", 9), Member("c", "3", 7),
                                      Member("d", large, 8)));
  EXPECT_EQ(c.next_deadline_ms(), 5);
}

TEST(CollectionSmallFormTest, AnInsertTooLargeForTheSmallFormKeepsEveryMember) {
  Collection::Ptr collection = Collection::Create("c");
  Collection& c = *collection;
  const std::string large(70'000, 'L');
  Put(c, "b", "2", 6);
  Put(c, "a", large, 5);
  EXPECT_THAT(Members(c), ElementsAre(Member("a", large, 5), Member("b", "2", 6)));
  EXPECT_EQ(c.next_deadline_ms(), 5);
}

TEST_P(CollectionTest, DeadlinesAtTheLimitsKeepTheirOrder) {
  Put(c, "a", "latest", kLatestDeadlineMs);
  Put(c, "b", "none", kNoDeadlineMs);
  Put(c, "c", "earliest", kEarliestDeadlineMs);
  Put(c, "d", "zero", 0);
  Put(c, "e", "minus one", -1);
  EXPECT_EQ(c.next_deadline_ms(), kEarliestDeadlineMs);
  EXPECT_EQ(c.expiring_count(), 4u);
  bool more = true;
  EXPECT_THAT(KeysOf(c.PageByDeadline(nullptr, 10, &more)), ElementsAre("c", "e", "d", "a", "b"));
  EXPECT_THAT(EraseDue(c, -1, kNoLimit), ElementsAre(Member("c", "earliest", kEarliestDeadlineMs),
                                                     Member("e", "minus one", -1)));
  EXPECT_EQ(c.next_deadline_ms(), 0);
  c.SetDeadline(c.Find("d"), kLatestDeadlineMs);
  EXPECT_EQ(c.next_deadline_ms(), kLatestDeadlineMs);
  EXPECT_THAT(EraseDue(c, kLatestDeadlineMs, kNoLimit),
              ElementsAre(Member("a", "latest", kLatestDeadlineMs),
                          Member("d", "zero", kLatestDeadlineMs)));
  EXPECT_EQ(c.next_deadline_ms(), kNoDeadlineMs);
  EXPECT_EQ(c.EarliestExpiring(), nullptr);
  EXPECT_THAT(Members(c), ElementsAre(Member("b", "none", kNoDeadlineMs)));
}

TEST_P(CollectionTest, ErasingInTheMiddleKeepsTheNeighbours) {
  // Deadlines 10, 20, 10, 20, ... by key: the due ones alternate with the rest.
  std::vector<std::string> want;
  for (int i = 0; i < 10; ++i) {
    const std::string key = absl::StrFormat("k%d", i);
    const std::string value(i * 30, static_cast<char>('a' + i));
    Put(c, key, value, i % 2 == 0 ? 10 : 20);
    if (i % 2 == 1) want.push_back(Member(key, value, 20));
  }
  c.Erase(c.Find("k4"));
  EXPECT_EQ(c.size(), 9u);
  std::vector<std::string> expired = EraseDue(c, 10, 2);
  EXPECT_THAT(expired, ElementsAre(Member("k0", "", 10), Member("k2", std::string(60, 'c'), 10)));
  EXPECT_EQ(c.next_deadline_ms(), 10);
  expired = EraseDue(c, 10, kNoLimit);
  EXPECT_THAT(expired, ElementsAre(Member("k6", std::string(180, 'g'), 10),
                                   Member("k8", std::string(240, 'i'), 10)));
  EXPECT_EQ(Members(c), want);
  EXPECT_EQ(c.next_deadline_ms(), 20);
}

TEST_P(CollectionTest, GrowsPastTheSmallFormAndShrinksBack) {
  // Twice: up past kSmallMax one member at a time, then down to empty,
  // erasing from the middle, the ends and the earliest in turn.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> keys;
    for (size_t i = 0; i < 2 * Collection::kSmallMax + 1; ++i) {
      const std::string key = absl::StrFormat("k%03d", (i * 7) % 50);
      Put(c, key, key, 1000 - static_cast<int64_t>(i));
      keys.insert(std::lower_bound(keys.begin(), keys.end(), key), key);
      ASSERT_EQ(c.size(), keys.size());
      EXPECT_EQ(c.next_deadline_ms(), 1000 - static_cast<int64_t>(i));
    }
    std::vector<std::string> want;
    for (const std::string& key : keys)
      want.push_back(Member(key, key, c.DeadlineOf(*c.Find(key))));
    EXPECT_EQ(Members(c), want);
    for (size_t step = 0; !keys.empty(); ++step) {
      size_t at = step % 3 == 0 ? keys.size() / 2 : step % 3 == 1 ? keys.size() - 1 : 0;
      if (step % 4 == 3) {
        at = std::find(keys.begin(), keys.end(), std::string(c.EarliestExpiring()->key())) -
             keys.begin();
      }
      c.Erase(c.Find(keys[at]));
      keys.erase(keys.begin() + at);
      want.erase(want.begin() + at);
      ASSERT_EQ(Members(c), want) << step;
      int64_t earliest = kNoDeadlineMs;
      for (const std::string& key : keys) {
        earliest = std::min(earliest, c.DeadlineOf(*c.Find(key)));
      }
      EXPECT_EQ(c.next_deadline_ms(), earliest);
    }
  }
}

TEST_P(CollectionTest, CountsMoreTinyMembersThanTheSmallFormHolds) {
  // 300 members of 12 bytes would fit the small form's bytes.
  for (int i = 0; i < 300; ++i) Put(c, absl::StrFormat("%03d", i), "v", kNoDeadlineMs);
  EXPECT_EQ(c.size(), 300u);
  EXPECT_EQ(Members(c).size(), 300u);
}

TEST_P(CollectionTest, SetDeadlineWithinFortyNineDaysMovesNoMember) {
  for (int i = 0; i < 10; ++i) Put(c, absl::StrFormat("k%d", i), "v", 100 + i);
  std::vector<const StoredMember*> found;
  for (int i = 0; i < 10; ++i) found.push_back(c.Find(absl::StrFormat("k%d", i)));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c.SetDeadline(found[i], i % 2 == 0 ? kNoDeadlineMs : 50 - i), found[i]);
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c.Find(absl::StrFormat("k%d", i)), found[i]);
    EXPECT_EQ(c.DeadlineOf(*found[i]), i % 2 == 0 ? kNoDeadlineMs : 50 - i);
  }
  EXPECT_EQ(c.next_deadline_ms(), 41);
  EXPECT_EQ(c.expiring_count(), 5u);
}

TEST_P(CollectionTest, EraseDueTakesTheDueMembersInDeadlineOrderAndKeepsTheRest) {
  EXPECT_THAT(EraseDue(c, 100, kNoLimit), ElementsAre());  // Empty.
  Put(c, "a", "1", 30);
  Put(c, "b", "2", 10);
  Put(c, "c", "3", 20);
  Put(c, "d", "4", 10);
  Put(c, "e", "5", kNoDeadlineMs);
  Put(c, "f", "6", 31);
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
  for (int i = 0; i < 12; ++i) Put(c, absl::StrFormat("k%02d", i), "v", 100 - i % 5);
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
  Put(c, "k00", "again", 5);
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
    Put(c, key, key, deadline);
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

TEST_P(CollectionTest, DeadlinesFurtherApartThanTheSmallFormHoldsKeepEveryMember) {
  // The small form holds deadlines up to 2^32 - 2 ms after its earliest.
  const int64_t t = 1'700'000'000'000;
  const int64_t span = (int64_t{1} << 32) - 2;
  // Each case on a fresh collection of three members as far apart as the
  // small form holds.
  const auto fresh = [&] {
    Collection::Ptr made = MakeCollection(GetParam());
    Put(*made, "a", "1", t);
    Put(*made, "b", "2", t + span);
    Put(*made, "c", "3", kNoDeadlineMs);
    EXPECT_THAT(Members(*made), ElementsAre(Member("a", "1", t), Member("b", "2", t + span),
                                            Member("c", "3", kNoDeadlineMs)));
    return made;
  };
  Collection::Ptr later = fresh();
  Put(*later, "d", "4", t + span + 1);  // Too far after "a".
  EXPECT_THAT(Members(*later),
              ElementsAre(Member("a", "1", t), Member("b", "2", t + span),
                          Member("c", "3", kNoDeadlineMs), Member("d", "4", t + span + 1)));
  EXPECT_EQ(later->next_deadline_ms(), t);

  Collection::Ptr earlier = fresh();
  Put(*earlier, "e", "5", t - 1);  // Too far before "b".
  EXPECT_THAT(Members(*earlier),
              ElementsAre(Member("a", "1", t), Member("b", "2", t + span),
                          Member("c", "3", kNoDeadlineMs), Member("e", "5", t - 1)));
  EXPECT_EQ(earlier->next_deadline_ms(), t - 1);
  EXPECT_THAT(
      EraseDue(*earlier, t + span, kNoLimit),
      ElementsAre(Member("e", "5", t - 1), Member("a", "1", t), Member("b", "2", t + span)));
  EXPECT_THAT(Members(*earlier), ElementsAre(Member("c", "3", kNoDeadlineMs)));

  Collection::Ptr moved = fresh();
  const StoredMember* c_member = moved->SetDeadline(moved->Find("c"), kLatestDeadlineMs);
  EXPECT_EQ(c_member, moved->Find("c"));
  EXPECT_EQ(moved->DeadlineOf(*c_member), kLatestDeadlineMs);
  EXPECT_THAT(Members(*moved), ElementsAre(Member("a", "1", t), Member("b", "2", t + span),
                                           Member("c", "3", kLatestDeadlineMs)));

  Collection::Ptr replaced = fresh();
  Put(*replaced, "b", "two", t - 1);         // Within reach of "a", not of itself before.
  Put(*replaced, "a", "one", t - span - 2);  // Too far before "b".
  EXPECT_THAT(Members(*replaced),
              ElementsAre(Member("a", "one", t - span - 2), Member("b", "two", t - 1),
                          Member("c", "3", kNoDeadlineMs)));
  EXPECT_EQ(replaced->next_deadline_ms(), t - span - 2);
}

TEST(CollectionSmallFormTest, TheEarliestDeadlineLeavingKeepsTheOthers) {
  // Each member's deadline is kept relative to the earliest: erasing,
  // expiring or moving the earliest keeps every other deadline.
  Collection::Ptr collection = Collection::Create("c");
  Collection& c = *collection;
  Put(c, "a", "1", 100);
  Put(c, "b", "2", 50);
  Put(c, "c", "3", 70);
  Put(c, "d", "4", kNoDeadlineMs);
  c.Erase(c.Find("b"));
  EXPECT_THAT(Members(c), ElementsAre(Member("a", "1", 100), Member("c", "3", 70),
                                      Member("d", "4", kNoDeadlineMs)));
  c.SetDeadline(c.Find("c"), 90);
  EXPECT_THAT(Members(c), ElementsAre(Member("a", "1", 100), Member("c", "3", 90),
                                      Member("d", "4", kNoDeadlineMs)));
  EXPECT_THAT(EraseDue(c, 95, kNoLimit), ElementsAre(Member("c", "3", 90)));
  EXPECT_THAT(Members(c), ElementsAre(Member("a", "1", 100), Member("d", "4", kNoDeadlineMs)));
  Put(c, "a", "one", 10);
  EXPECT_THAT(Members(c), ElementsAre(Member("a", "one", 10), Member("d", "4", kNoDeadlineMs)));
  EXPECT_EQ(c.next_deadline_ms(), 10);
  EXPECT_EQ(c.EarliestExpiring()->key(), "a");
}

// The shape of a run of random changes against a plain map.
struct ModelRun {
  // Keys in use (up to 256), collections made afresh, and changes to each.
  size_t keys;
  int collections;
  int changes_per_collection;
  // Deadlines other than the few special ones are t + [0, close_deadlines).
  int close_deadlines;
  // EraseDue's limit is 1 + [0, max_limit).
  size_t max_limit;
};

// Random changes of every kind on `collection` (made by `make`), each
// followed by a comparison with a plain map: keys, values and deadlines of
// every size and spread, across the small form's limits; the deadline order
// read whole and in pages from random positions.
void AgreesWithAPlainMap(const std::function<Collection::Ptr()>& make, const ModelRun& run,
                         uint32_t seed) {
  struct Stored {
    std::string value;
    int64_t deadline_ms;
  };
  Collection::Ptr collection;
  std::map<std::string, Stored> model;
  std::mt19937 random(seed);
  const auto pick = [&](size_t n) { return static_cast<size_t>(random() % n); };
  const int64_t t = 1'700'000'000'000;
  const int64_t span = (int64_t{1} << 32) - 2;
  const std::vector<int64_t> deadlines = {kNoDeadlineMs,
                                          t,
                                          t + 1,
                                          t + 2,
                                          t + 1000,
                                          t + span,
                                          t + span + 1,
                                          t - span,
                                          t - span - 1,
                                          kEarliestDeadlineMs,
                                          kLatestDeadlineMs};
  const std::vector<size_t> key_sizes = {1, 2, 16, 126, 127, 300};
  const std::vector<size_t> value_sizes = {0, 16, 254, 255, 1000};
  const auto key_of = [&](size_t i) {
    // The last byte tells up to 256 keys apart.
    return std::string(key_sizes[i % key_sizes.size()] - 1, 'k') + static_cast<char>('a' + i);
  };
  const auto expected = [&] {
    std::vector<std::string> out;
    for (const auto& [key, stored] : model) {
      out.push_back(Member(key, stored.value, stored.deadline_ms));
    }
    return out;
  };
  for (int step = 0; step < run.collections * run.changes_per_collection; ++step) {
    if (step % run.changes_per_collection == 0) {
      collection = make();
      model.clear();
    }
    Collection& c = *collection;
    // Mostly deadlines close together, so that collections stay small or
    // members share them.
    const int64_t deadline = pick(4) == 0 ? deadlines[pick(deadlines.size())]
                                          : t + static_cast<int64_t>(pick(run.close_deadlines));
    const std::string key = key_of(pick(run.keys));
    auto it = model.find(key);
    const int op = static_cast<int>(pick(10));
    if (op < 5) {
      const std::string value(value_sizes[pick(value_sizes.size())], 'v');
      std::string replaced = "none";
      // Half the puts write where Locate found the key, as a lone write does.
      const Collection::Place place = c.Locate(key);
      EXPECT_EQ(place.member == nullptr ? "none"
                                        : Member(place.member->key(), place.member->value(),
                                                 c.DeadlineOf(*place.member)),
                it == model.end() ? "none" : Member(key, it->second.value, it->second.deadline_ms));
      const bool inserted = c.Put(
          key, value, deadline,
          [&](const StoredMember& m) {
            replaced = Member(m.key(), m.value(), collection->DeadlineOf(m));
          },
          pick(2) == 0 ? &place : nullptr);
      EXPECT_EQ(inserted, it == model.end());
      if (it != model.end()) {
        EXPECT_EQ(replaced, Member(key, it->second.value, it->second.deadline_ms));
      }
      model[key] = {value, deadline};
    } else if (op < 7 && it != model.end()) {
      const StoredMember* m = c.SetDeadline(c.Find(key), deadline);
      EXPECT_EQ(m, c.Find(key));
      it->second.deadline_ms = deadline;
    } else if (op < 9 && it != model.end()) {
      c.Erase(c.Find(key));
      model.erase(it);
    } else if (op == 9) {
      // Around a deadline of the list, or one of the close ones; never as
      // late as kNoDeadlineMs, which no member reaches.
      const int64_t near = pick(2) == 0 ? deadlines[pick(deadlines.size())]
                                        : t + static_cast<int64_t>(pick(run.close_deadlines));
      const int64_t now_ms =
          near == kNoDeadlineMs ? kNoDeadlineMs - 1 : near - 1 + static_cast<int64_t>(pick(3));
      const size_t limit = 1 + pick(run.max_limit);
      std::vector<std::pair<int64_t, std::string>> due;
      for (const auto& [k, stored] : model) {
        if (stored.deadline_ms <= now_ms) due.emplace_back(stored.deadline_ms, k);
      }
      std::sort(due.begin(), due.end());
      if (due.size() > limit) due.resize(limit);
      std::vector<std::string> want;
      for (const auto& [d, k] : due) {
        want.push_back(Member(k, model[k].value, d));
        model.erase(k);
      }
      ASSERT_EQ(EraseDue(c, now_ms, limit), want) << step;
    }
    ASSERT_EQ(Members(c), expected()) << step;
    int64_t earliest = kNoDeadlineMs;
    size_t expiring = 0;
    std::vector<std::pair<int64_t, std::string>> by_deadline;
    for (const auto& [k, stored] : model) {
      earliest = std::min(earliest, stored.deadline_ms);
      expiring += stored.deadline_ms != kNoDeadlineMs ? 1 : 0;
      by_deadline.emplace_back(stored.deadline_ms, k);
    }
    std::sort(by_deadline.begin(), by_deadline.end());
    std::vector<std::string> want_order;
    for (const auto& [d, k] : by_deadline) want_order.push_back(k);
    ASSERT_EQ(c.next_deadline_ms(), earliest) << step;
    ASSERT_EQ(c.expiring_count(), expiring) << step;
    bool more = true;
    ASSERT_EQ(KeysOf(c.PageByDeadline(nullptr, 1000, &more)), want_order) << step;
    ASSERT_FALSE(more) << step;
    const StoredMember* first = c.EarliestExpiring();
    ASSERT_EQ(first == nullptr ? "" : std::string(first->key()),
              earliest == kNoDeadlineMs ? "" : by_deadline.front().second)
        << step;
    // A page after a position a member holds, or held, or never held.
    const std::pair<int64_t, std::string> after =
        !by_deadline.empty() && pick(2) == 0
            ? by_deadline[pick(by_deadline.size())]
            : std::make_pair(pick(2) == 0 ? deadlines[pick(deadlines.size())]
                                          : t + static_cast<int64_t>(pick(run.close_deadlines)),
                             key_of(pick(run.keys)));
    const size_t page_size = 1 + pick(run.keys / 2);
    const auto from = std::upper_bound(by_deadline.begin(), by_deadline.end(), after);
    std::vector<std::string> want_page;
    for (auto i = from; i != by_deadline.end() && want_page.size() < page_size; ++i) {
      want_page.push_back(i->second);
    }
    const DeadlinePosition position{after.first, after.second};
    ASSERT_EQ(KeysOf(c.PageByDeadline(&position, page_size, &more)), want_page)
        << step << " after " << after.first << " " << after.second;
    ASSERT_EQ(more, static_cast<size_t>(by_deadline.end() - from) > page_size) << step;
  }
}

TEST_P(CollectionTest, EveryChangeAgreesWithAPlainMap) {
  AgreesWithAPlainMap([&] { return MakeCollection(GetParam()); },
                      ModelRun{/*keys=*/20, /*collections=*/100, /*changes_per_collection=*/40,
                               /*close_deadlines=*/5, /*max_limit=*/8},
                      13);
}

// Large collections whose members mostly share a few deadlines, so that runs
// of members sharing one form, split and join; drains of whole and cut runs.
TEST(CollectionRunsTest, EveryChangeToRunsAgreesWithAPlainMap) {
  for (uint32_t seed : {1, 2, 3}) {
    AgreesWithAPlainMap([] { return Collection::Create("c"); },
                        ModelRun{/*keys=*/200, /*collections=*/4, /*changes_per_collection=*/1500,
                                 /*close_deadlines=*/3, /*max_limit=*/120},
                        seed);
  }
}

}  // namespace
}  // namespace lapse

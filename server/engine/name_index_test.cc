#include "server/engine/name_index.h"

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

using ::testing::ElementsAre;

struct Named {
  explicit Named(std::string n) : n(std::move(n)) {}
  absl::string_view name() const { return n; }
  std::string n;
};
using Index = NameIndex<std::unique_ptr<Named>>;

void Insert(Index& index, absl::string_view name) {
  index.Insert(std::make_unique<Named>(std::string(name)));
}

std::vector<std::string> NamesOf(const Index& index) {
  std::vector<std::string> out;
  for (const auto& e : index) out.emplace_back(e.get()->name());
  return out;
}

std::string NameAt(Index::const_iterator it, const Index& index) {
  return it == index.end() ? "(end)" : std::string(it->get()->name());
}

TEST(NameIndexTest, NamesSharingLongPrefixesAreFoundInOrder) {
  Index index;
  Insert(index, "user-42:orders");
  Insert(index, "user-42:cart");
  Insert(index, "user-43:orders");
  Insert(index, "user-4");
  EXPECT_THAT(NamesOf(index),
              ElementsAre("user-4", "user-42:cart", "user-42:orders", "user-43:orders"));
  EXPECT_EQ(index.Find("user-42:orders")->name(), "user-42:orders");
  EXPECT_EQ(index.Find("user-42:order"), nullptr);
  EXPECT_EQ(index.Find("user-42:ordersx"), nullptr);
  EXPECT_EQ(NameAt(index.LowerBound("user-42:d"), index), "user-42:orders");
  EXPECT_EQ(NameAt(index.UpperBound("user-42:orders"), index), "user-43:orders");
}

TEST(NameIndexTest, ANameWithAnotherPrefixReordersNothing) {
  Index index;
  for (const char* name : {"c000000000000002", "c000000000000010", "c000000000000001"}) {
    Insert(index, name);
  }
  // Shortens the shared prefix from 14 bytes to none.
  Insert(index, "b");
  Insert(index, "d");
  EXPECT_THAT(NamesOf(index),
              ElementsAre("b", "c000000000000001", "c000000000000002", "c000000000000010", "d"));
  for (const char* name : {"b", "c000000000000001", "c000000000000002", "c000000000000010"}) {
    ASSERT_NE(index.Find(name), nullptr) << name;
  }
  // A probe outside every prefix, before and after them all.
  EXPECT_EQ(NameAt(index.LowerBound("a"), index), "b");
  EXPECT_EQ(NameAt(index.UpperBound("z"), index), "(end)");
}

TEST(NameIndexTest, BytesAboveSevenBitsSortAfterTheOthers) {
  Index index;
  Insert(index, std::string("p\xff", 2));
  Insert(index, std::string("p\x01", 2));
  Insert(index, std::string("p\0", 2));
  Insert(index, "p");
  EXPECT_THAT(NamesOf(index), ElementsAre("p", std::string("p\0", 2), std::string("p\x01", 2),
                                          std::string("p\xff", 2)));
  EXPECT_NE(index.Find(std::string("p\0", 2)), nullptr);
  EXPECT_NE(index.Find("p"), nullptr);
}

TEST(NameIndexTest, AnEmptiedIndexTakesNamesOfAnyPrefix) {
  Index index;
  Insert(index, "aaaa1");
  Insert(index, "aaaa2");
  index.Erase(index.Find("aaaa1"));
  index.Erase(index.Find("aaaa2"));
  EXPECT_TRUE(index.empty());
  Insert(index, "zz2");
  Insert(index, "zz1");
  EXPECT_THAT(NamesOf(index), ElementsAre("zz1", "zz2"));
  EXPECT_EQ(index.Find("aaaa1"), nullptr);
}

// Random inserts, erases and searches, each compared with a std::set: names
// of every length sharing long prefixes, a few with other prefixes, so that
// the shared prefix shortens while the index is full.
TEST(NameIndexTest, EveryChangeAgreesWithAnOrderedSet) {
  std::mt19937 random(13);
  const auto pick = [&](size_t n) { return static_cast<size_t>(random() % n); };
  const std::vector<std::string> stems = {
      "user-42:", "user-4", "c0000000000", "", "u", std::string("user\0", 5), "\xfe\xff"};
  const auto random_name = [&] {
    std::string name = stems[pick(stems.size())];
    const size_t tail = pick(12);
    for (size_t i = 0; i < tail; ++i) name += "09az\xff"[pick(5)];
    return name.empty() ? std::string("x") : name;
  };
  for (int round = 0; round < 20; ++round) {
    Index index;
    std::set<std::string> model;
    for (int step = 0; step < 500; ++step) {
      const std::string name = random_name();
      const bool present = model.count(name) > 0;
      ASSERT_EQ(index.Find(name) != nullptr, present) << round << " " << step;
      if (!present && pick(3) > 0) {
        Insert(index, name);
        model.insert(name);
      } else if (present) {
        index.Erase(index.Find(name));
        model.erase(name);
      }
      const std::string probe = random_name();
      auto lower = model.lower_bound(probe);
      EXPECT_EQ(NameAt(index.LowerBound(probe), index), lower == model.end() ? "(end)" : *lower);
      auto upper = model.upper_bound(probe);
      EXPECT_EQ(NameAt(index.UpperBound(probe), index), upper == model.end() ? "(end)" : *upper);
      ASSERT_EQ(NamesOf(index), std::vector<std::string>(model.begin(), model.end()))
          << round << " " << step;
      ASSERT_EQ(index.size(), model.size());
    }
    for (const std::string& name : model) ASSERT_NE(index.Find(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace lapse

#include "server/engine/event_block.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

ExpiryEventView View(absl::string_view collection, absl::string_view key, absl::string_view value) {
  return {.collection = collection,
          .key = key,
          .value = value,
          .expire_time = absl::FromUnixMillis(1000),
          .expired_at = absl::FromUnixMillis(1005)};
}

void ExpectEvent(const ExpiryEventView& e, absl::string_view collection, absl::string_view key,
                 absl::string_view value) {
  EXPECT_EQ(e.collection, collection);
  EXPECT_EQ(e.key, key);
  EXPECT_EQ(e.value, value);
}

TEST(EventBlockTest, EventsReadBackWithTheirCollectionKeyValueAndTimes) {
  EventBlock block;
  block.Add(View("orders", "k1", "v1"));
  block.Add(View("orders", "k2", ""));
  block.Add(View("carts", "k3", "v3"));
  block.Add(View("orders", "k4", "v4"));
  ASSERT_EQ(block.size(), 4u);
  ExpectEvent(block[0], "orders", "k1", "v1");
  ExpectEvent(block[1], "orders", "k2", "");
  ExpectEvent(block[2], "carts", "k3", "v3");
  ExpectEvent(block[3], "orders", "k4", "v4");
  EXPECT_EQ(block[3].expire_time, absl::FromUnixMillis(1000));
  EXPECT_EQ(block[3].expired_at, absl::FromUnixMillis(1005));
}

TEST(EventBlockTest, PrefixCopiesTheFirstEventsAndLaterAddsReadBackWhole) {
  EventBlock block;
  block.Add(View("a", "k1", "v1"));
  block.Add(View("a", "k2", "v2"));
  block.Add(View("b", "k3", "v3"));
  EventBlock prefix = block.Prefix(1);
  prefix.Add(View("c", "k4", "v4"));
  prefix.Add(View("c", "k5", "v5"));
  ASSERT_EQ(prefix.size(), 3u);
  ExpectEvent(prefix[0], "a", "k1", "v1");
  ExpectEvent(prefix[1], "c", "k4", "v4");
  ExpectEvent(prefix[2], "c", "k5", "v5");
  ASSERT_EQ(block.size(), 3u);
  ExpectEvent(block[2], "b", "k3", "v3");
  EXPECT_TRUE(block.Prefix(0).empty());
}

TEST(EventBlockTest, AddEventStartsANewBlockOnceTheLastIsFull) {
  std::vector<EventBlock> blocks;
  std::vector<std::string> keys;
  for (size_t i = 0; i < EventBlock::kMaxEvents + 1; ++i) keys.push_back(absl::StrCat("k", i));
  for (const std::string& key : keys) AddEvent(blocks, View("c", key, "v"));
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].size(), EventBlock::kMaxEvents);
  ASSERT_EQ(blocks[1].size(), 1u);
  ExpectEvent(blocks[1][0], "c", keys.back(), "v");
}

TEST(EventBlockTest, ABlockIsFullOnceItHoldsTheByteBound) {
  std::vector<EventBlock> blocks;
  const std::string value(EventBlock::kMaxBytes / 2, 'x');
  for (int i = 0; i < 3; ++i) AddEvent(blocks, View("c", "k", value));
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].size(), 2u);
  EXPECT_EQ(blocks[1].size(), 1u);
}

}  // namespace
}  // namespace lapse

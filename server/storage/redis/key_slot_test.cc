#include "server/storage/redis/key_slot.h"

#include "gtest/gtest.h"

namespace lapse::redis {
namespace {

// Values from CLUSTER KEYSLOT on Redis 7.0.
TEST(KeySlotTest, MatchesRedisClusterKeyslot) {
  EXPECT_EQ(KeySlot("123456789"), 12739);
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot(""), 0);
}

TEST(KeySlotTest, HashesOnlyTheTagWhenThereIsOne) {
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("a{user1000}b{x}"), KeySlot("user1000"));
}

TEST(KeySlotTest, HashesTheWholeKeyWhenTheTagIsEmptyOrUnclosed) {
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363);
  EXPECT_EQ(KeySlot("foo{bar"), 15278);
}

}  // namespace
}  // namespace lapse::redis

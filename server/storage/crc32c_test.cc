#include "server/storage/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace lapse {
namespace {

TEST(Crc32cTest, MatchesTheStandardCheckValues) {
  // RFC 3720, appendix B.4.
  EXPECT_EQ(crc32c::Value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc32c::Value(std::string(32, '\xff')), 0x62a8ab43u);
  EXPECT_EQ(crc32c::Value("123456789"), 0xe3069283u);
}

TEST(Crc32cTest, ExtendEqualsOneShot) {
  const std::string s = "hello, expiring world";
  EXPECT_EQ(crc32c::Extend(crc32c::Value(s.substr(0, 7)), s.data() + 7, s.size() - 7),
            crc32c::Value(s));
}

TEST(Crc32cTest, MaskRoundTrips) {
  const uint32_t crc = crc32c::Value("abc");
  EXPECT_NE(crc32c::Mask(crc), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
}

}  // namespace
}  // namespace lapse

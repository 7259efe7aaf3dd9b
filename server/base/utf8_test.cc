#include "server/base/utf8.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace lapse {
namespace {

TEST(Utf8Test, DecodesOneCodePointOfEachLength) {
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("a", &cp), 1u);
  EXPECT_EQ(cp, 0x61u);
  EXPECT_EQ(DecodeUtf8("\xc3\xbc!", &cp), 2u);
  EXPECT_EQ(cp, 0xFCu);
  EXPECT_EQ(DecodeUtf8("\xe2\x82\xac", &cp), 3u);
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(DecodeUtf8("\xf0\x9f\x98\x80", &cp), 4u);
  EXPECT_EQ(cp, 0x1F600u);
}

TEST(Utf8Test, RejectsMalformedOverlongAndSurrogateSequences) {
  EXPECT_TRUE(IsValidUtf8("plain, \xc3\xbc, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation byte
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

TEST(Utf8Test, PrintableAsciiPrefixStopsAtTheFirstOtherByte) {
  EXPECT_EQ(PrintableAsciiPrefix(""), 0u);
  EXPECT_EQ(PrintableAsciiPrefix(" ~"), 2u);
  EXPECT_EQ(PrintableAsciiPrefix("k000000000000001"), 16u);
  // Each byte that is not printable ASCII, at every offset of 17 bytes (two
  // words and a tail), and beside every printable neighbour.
  for (int bad = 0; bad < 256; ++bad) {
    if (bad >= 0x20 && bad < 0x7f) continue;
    for (size_t at = 0; at < 17; ++at) {
      std::string text(17, '~');
      text[at] = static_cast<char>(bad);
      EXPECT_EQ(PrintableAsciiPrefix(text), at) << bad << " at " << at;
      for (int good = 0x20; good < 0x7f; ++good) {
        std::fill(text.begin(), text.end(), static_cast<char>(good));
        text[at] = static_cast<char>(bad);
        ASSERT_EQ(PrintableAsciiPrefix(text), at) << bad << " at " << at << " among " << good;
      }
    }
  }
}

}  // namespace
}  // namespace lapse

#include "server/base/coding.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lapse {
namespace {

std::vector<uint32_t> Boundaries32() {
  std::vector<uint32_t> values = {0, 1, std::numeric_limits<uint32_t>::max()};
  for (int bits = 7; bits < 32; bits += 7) {
    const uint32_t power = uint32_t{1} << bits;
    values.insert(values.end(), {power - 1, power, power + 1});
  }
  return values;
}

std::vector<uint64_t> Boundaries64() {
  std::vector<uint64_t> values = {0, 1, std::numeric_limits<uint64_t>::max()};
  for (int bits = 7; bits < 64; bits += 7) {
    const uint64_t power = uint64_t{1} << bits;
    values.insert(values.end(), {power - 1, power, power + 1});
  }
  values.push_back(uint64_t{1} << 63);
  return values;
}

TEST(CodingTest, FixedIsLittleEndian) {
  std::string out;
  PutFixed32(&out, 0x04030201);
  PutFixed64(&out, 0x0c0b0a0908070605);
  EXPECT_EQ(out, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12));
}

TEST(CodingTest, Fixed32RoundTrips) {
  std::string out;
  for (uint32_t v : Boundaries32()) PutFixed32(&out, v);
  absl::string_view in = out;
  for (uint32_t v : Boundaries32()) {
    uint32_t got;
    ASSERT_TRUE(GetFixed32(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, Fixed64RoundTrips) {
  std::string out;
  for (uint64_t v : Boundaries64()) PutFixed64(&out, v);
  absl::string_view in = out;
  for (uint64_t v : Boundaries64()) {
    uint64_t got;
    ASSERT_TRUE(GetFixed64(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, EncodeFixedMatchesPutFixed) {
  char buf[12];
  EncodeFixed32(buf, 0xdeadbeef);
  EncodeFixed64(buf + 4, 0x0123456789abcdef);
  std::string out;
  PutFixed32(&out, 0xdeadbeef);
  PutFixed64(&out, 0x0123456789abcdef);
  EXPECT_EQ(std::string(buf, sizeof(buf)), out);
  EXPECT_EQ(DecodeFixed32(buf), 0xdeadbeef);
  EXPECT_EQ(DecodeFixed64(buf + 4), 0x0123456789abcdef);
}

TEST(CodingTest, VarintTakesSevenBitsPerByte) {
  std::string out;
  PutVarint32(&out, 0x7f);
  EXPECT_EQ(out, "\x7f");
  out.clear();
  PutVarint32(&out, 300);
  EXPECT_EQ(out, "\xac\x02");
  out.clear();
  PutVarint32(&out, std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(out.size(), kMaxVarint32Bytes);
  out.clear();
  PutVarint64(&out, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(out.size(), kMaxVarint64Bytes);
}

TEST(CodingTest, Varint32RoundTrips) {
  std::string out;
  for (uint32_t v : Boundaries32()) PutVarint32(&out, v);
  absl::string_view in = out;
  for (uint32_t v : Boundaries32()) {
    uint32_t got;
    ASSERT_TRUE(GetVarint32(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, Varint64RoundTrips) {
  std::string out;
  for (uint64_t v : Boundaries64()) PutVarint64(&out, v);
  absl::string_view in = out;
  for (uint64_t v : Boundaries64()) {
    uint64_t got;
    ASSERT_TRUE(GetVarint64(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, Varint32AndVarint64AgreeOn32BitValues) {
  for (uint32_t v : Boundaries32()) {
    std::string narrow;
    std::string wide;
    PutVarint32(&narrow, v);
    PutVarint64(&wide, v);
    EXPECT_EQ(narrow, wide) << v;
  }
}

TEST(CodingTest, LengthPrefixedRoundTrips) {
  const std::string big(300, 'x');
  const std::vector<absl::string_view> values = {"", "a", absl::string_view("\0\xff", 2), big};
  std::string out;
  for (absl::string_view v : values) PutLengthPrefixed(&out, v);
  absl::string_view in = out;
  for (absl::string_view v : values) {
    absl::string_view got;
    ASSERT_TRUE(GetLengthPrefixed(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

// Every proper prefix of an encoding is rejected, and leaves the input and
// the output as they were.
TEST(CodingTest, TruncatedInputIsRejectedAndNotConsumed) {
  std::string fixed32;
  PutFixed32(&fixed32, 0x01020304);
  std::string fixed64;
  PutFixed64(&fixed64, 0x0102030405060708);
  std::string varint32;
  PutVarint32(&varint32, std::numeric_limits<uint32_t>::max());
  std::string varint64;
  PutVarint64(&varint64, std::numeric_limits<uint64_t>::max());
  std::string prefixed;
  PutLengthPrefixed(&prefixed, std::string(200, 'y'));

  for (size_t n = 0; n < fixed32.size(); ++n) {
    absl::string_view in(fixed32.data(), n);
    uint32_t v = 7;
    EXPECT_FALSE(GetFixed32(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, 7u);
  }
  for (size_t n = 0; n < fixed64.size(); ++n) {
    absl::string_view in(fixed64.data(), n);
    uint64_t v = 7;
    EXPECT_FALSE(GetFixed64(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, 7u);
  }
  for (size_t n = 0; n < varint32.size(); ++n) {
    absl::string_view in(varint32.data(), n);
    uint32_t v = 7;
    EXPECT_FALSE(GetVarint32(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, 7u);
  }
  for (size_t n = 0; n < varint64.size(); ++n) {
    absl::string_view in(varint64.data(), n);
    uint64_t v = 7;
    EXPECT_FALSE(GetVarint64(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, 7u);
  }
  for (size_t n = 0; n < prefixed.size(); ++n) {
    absl::string_view in(prefixed.data(), n);
    absl::string_view v = "unchanged";
    EXPECT_FALSE(GetLengthPrefixed(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, "unchanged");
  }
}

TEST(CodingTest, VarintLongerThanItsWidthIsRejected) {
  const std::string six_bytes("\x80\x80\x80\x80\x80\x00", 6);
  absl::string_view in = six_bytes;
  uint32_t v32;
  EXPECT_FALSE(GetVarint32(&in, &v32));
  EXPECT_EQ(in.size(), six_bytes.size());

  const std::string eleven_bytes("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11);
  in = eleven_bytes;
  uint64_t v64;
  EXPECT_FALSE(GetVarint64(&in, &v64));
  EXPECT_EQ(in.size(), eleven_bytes.size());
}

TEST(CodingTest, GetByteTakesOneByte) {
  absl::string_view in("\xffz", 2);
  uint8_t v;
  ASSERT_TRUE(GetByte(&in, &v));
  EXPECT_EQ(v, 0xff);
  EXPECT_EQ(in, "z");
  in = "";
  v = 7;
  EXPECT_FALSE(GetByte(&in, &v));
  EXPECT_EQ(v, 7);
}

TEST(CodingTest, ReadsOnlyTheFrontOfTheInput) {
  std::string out;
  PutVarint32(&out, 300);
  out.append("rest");
  absl::string_view in = out;
  uint32_t v;
  ASSERT_TRUE(GetVarint32(&in, &v));
  EXPECT_EQ(v, 300u);
  EXPECT_EQ(in, "rest");
}

}  // namespace
}  // namespace lapse

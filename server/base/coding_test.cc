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

template <typename T>
using PutFn = void (*)(std::string*, T);
template <typename T>
using GetFn = bool (*)(absl::string_view*, T*);

// Puts every value, then gets them back in order with nothing left over.
template <typename T>
void ExpectRoundTrips(PutFn<T> put, GetFn<T> get, const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) put(&out, v);
  absl::string_view in = out;
  for (const T& v : values) {
    T got;
    ASSERT_TRUE(get(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
}

// Every proper prefix of `value`'s encoding is rejected, and leaves the input
// and the output (`untouched`) as they were.
template <typename T>
void ExpectTruncationsRejected(PutFn<T> put, GetFn<T> get, T value, T untouched) {
  std::string encoded;
  put(&encoded, value);
  for (size_t n = 0; n < encoded.size(); ++n) {
    absl::string_view in(encoded.data(), n);
    T v = untouched;
    EXPECT_FALSE(get(&in, &v)) << n;
    EXPECT_EQ(in.size(), n);
    EXPECT_EQ(v, untouched);
  }
}

TEST(CodingTest, FixedIsLittleEndian) {
  std::string out;
  PutFixed32(&out, 0x04030201);
  PutFixed64(&out, 0x0c0b0a0908070605);
  EXPECT_EQ(out, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12));
}

TEST(CodingTest, Fixed32RoundTrips) { ExpectRoundTrips(&PutFixed32, &GetFixed32, Boundaries32()); }

TEST(CodingTest, Fixed64RoundTrips) { ExpectRoundTrips(&PutFixed64, &GetFixed64, Boundaries64()); }

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
  ExpectRoundTrips(&PutVarint32, &GetVarint32, Boundaries32());
}

TEST(CodingTest, Varint64RoundTrips) {
  ExpectRoundTrips(&PutVarint64, &GetVarint64, Boundaries64());
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

TEST(CodingTest, EncodeInPlaceWritesWhatPutAppendsInTheLengthItSays) {
  for (uint64_t v : Boundaries64()) {
    std::string put;
    PutVarint64(&put, v);
    char buf[kMaxVarint64Bytes];
    EXPECT_EQ(VarintLength(v), put.size()) << v;
    EXPECT_EQ(std::string(buf, EncodeVarint64(buf, v)), put) << v;
  }
  for (const std::string& value : {std::string(), std::string("a"), std::string(127, 'x'),
                                   std::string(128, 'y'), std::string(20000, 'z')}) {
    std::string put;
    PutLengthPrefixed(&put, value);
    std::string buf(LengthPrefixedLength(value), '\0');
    EXPECT_EQ(EncodeLengthPrefixed(buf.data(), value), buf.data() + buf.size()) << value.size();
    EXPECT_EQ(buf, put) << value.size();
  }
  // A view with no data at all (UBSan refuses memcpy from null).
  char buf[1];
  EXPECT_EQ(EncodeLengthPrefixed(buf, absl::string_view()), buf + 1);
  EXPECT_EQ(buf[0], '\0');
}

TEST(CodingTest, LengthPrefixedRoundTrips) {
  const std::string big(300, 'x');
  const std::vector<absl::string_view> values = {"", "a", absl::string_view("\0\xff", 2), big};
  ExpectRoundTrips(&PutLengthPrefixed, &GetLengthPrefixed, values);
}

TEST(CodingTest, TruncatedInputIsRejectedAndNotConsumed) {
  ExpectTruncationsRejected<uint32_t>(&PutFixed32, &GetFixed32, 0x01020304, 7);
  ExpectTruncationsRejected<uint64_t>(&PutFixed64, &GetFixed64, 0x0102030405060708, 7);
  ExpectTruncationsRejected<uint32_t>(&PutVarint32, &GetVarint32,
                                      std::numeric_limits<uint32_t>::max(), 7);
  ExpectTruncationsRejected<uint64_t>(&PutVarint64, &GetVarint64,
                                      std::numeric_limits<uint64_t>::max(), 7);
  ExpectTruncationsRejected<absl::string_view>(&PutLengthPrefixed, &GetLengthPrefixed,
                                               std::string(200, 'y'), "unchanged");
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

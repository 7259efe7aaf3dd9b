#include "server/base/wire_format.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace lapse::wire {
namespace {

std::string Varint(uint64_t value) {
  std::string out(VarintSize(value), '\0');
  uint8_t* end = WriteVarint(value, reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_EQ(reinterpret_cast<char*>(end), out.data() + out.size()) << value;
  return out;
}

TEST(WireFormatTest, VarintsAreLeb128InAsFewBytesAsTheyNeed) {
  EXPECT_EQ(Varint(0), std::string("\x00", 1));
  EXPECT_EQ(Varint(1), "\x01");
  EXPECT_EQ(Varint(127), "\x7f");
  EXPECT_EQ(Varint(128), "\x80\x01");
  EXPECT_EQ(Varint(300), "\xac\x02");
  EXPECT_EQ(Varint(std::numeric_limits<uint64_t>::max()),
            "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
  // A negative int32 or int64 is sign-extended: ten bytes.
  EXPECT_EQ(Varint(Signed(-1)).size(), 10u);
}

TEST(WireFormatTest, FieldsLeaveOutZerosAndEmptyStringsAndWriteWhatTheySize) {
  const std::string key = "k1";
  const size_t size = VarintFieldSize(0) + StringFieldSize("") + StringFieldSize(key) +
                      VarintFieldSize(150) + DelimitedSize(0);
  std::string out(size, '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  p = WriteVarintField(1, 0, p);
  p = WriteStringField(2, "", p);
  p = WriteStringField(3, key, p);
  p = WriteVarintField(4, 150, p);
  p = WriteDelimitedHeader(15, 0, p);
  EXPECT_EQ(reinterpret_cast<char*>(p), out.data() + out.size());
  EXPECT_EQ(out, std::string("\x1a\x02k1\x20\x96\x01\x7a\x00", 9));
}

TEST(WireFormatTest, TheReaderReadsWhatTheWritersWrite) {
  std::string out(StringFieldSize("value") + VarintFieldSize(1u << 20), '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  p = WriteStringField(2, "value", p);
  WriteVarintField(5, 1u << 20, p);
  Reader in(out);
  int field;
  WireType type;
  absl::string_view body;
  uint64_t value;
  ASSERT_TRUE(in.OneByteTag(&field, &type));
  EXPECT_EQ(field, 2);
  EXPECT_EQ(type, WireType::kLengthDelimited);
  ASSERT_TRUE(in.Delimited(&body));
  EXPECT_EQ(body, "value");
  ASSERT_TRUE(in.OneByteTag(&field, &type));
  EXPECT_EQ(field, 5);
  EXPECT_EQ(type, WireType::kVarint);
  ASSERT_TRUE(in.Varint(&value));
  EXPECT_EQ(value, 1u << 20);
  EXPECT_TRUE(in.done());
}

// What protobuf might read otherwise is refused, for its callers to hand to
// protobuf.
TEST(WireFormatTest, TheReaderRefusesVarintsAndLengthsProtobufMightReadOtherwise) {
  uint64_t value;
  absl::string_view body;
  int field;
  WireType type;
  // Eleven bytes; ten whose last has bits past the 64th; one cut short.
  EXPECT_FALSE(Reader(std::string(10, '\x80') + "\x01").Varint(&value));
  EXPECT_FALSE(Reader(std::string(9, '\xff') + "\x02").Varint(&value));
  EXPECT_TRUE(Reader(std::string(9, '\xff') + "\x01").Varint(&value));
  EXPECT_FALSE(Reader("\x80").Varint(&value));
  // A length in five bytes (however small), and one past the end.
  EXPECT_FALSE(Reader(std::string("\x81\x80\x80\x80\x00x", 6)).Delimited(&body));
  EXPECT_TRUE(Reader(std::string("\x81\x80\x80\x00x", 5)).Delimited(&body));
  EXPECT_FALSE(Reader("\x02x").Delimited(&body));
  // A tag of two bytes (field 16 or more), and field 0.
  EXPECT_FALSE(Reader("\x80\x01").OneByteTag(&field, &type));
  EXPECT_FALSE(Reader(std::string("\x00", 1)).OneByteTag(&field, &type));
  EXPECT_FALSE(Reader("").OneByteTag(&field, &type));
}

}  // namespace
}  // namespace lapse::wire

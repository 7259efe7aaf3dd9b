// WireFormat: protobuf's wire format by hand, for the messages lapse writes
// and reads without a protobuf message in between (the server's watch events,
// write-stream requests and answers; the C++ client's write stream).
// https://protobuf.dev/programming-guides/encoding/
//
// Writers size a field first, then write it into a buffer that has room:
//
//   const size_t size = wire::StringFieldSize(key) + wire::VarintFieldSize(n);
//   out->resize(start + size);
//   uint8_t* p = reinterpret_cast<uint8_t*>(out->data() + start);
//   p = wire::WriteStringField(1, key, p);
//   p = wire::WriteVarintField(2, n, p);
//
// They write what protobuf serializes for proto3 fields: a zero varint and an
// empty string are left out, and every field number is below 16, so each tag
// is one byte.
//
// wire::Reader reads varints and length-delimited fields off the front of a
// buffer, and refuses (returns false) wherever protobuf might read otherwise:
// a varint longer than 10 bytes or with bits past the 64th, a length in more
// than 4 bytes or past the end. Its callers hand what it refuses to protobuf.
//
// Header-only and free of protobuf and gRPC: the server and the C++ client
// both use it. Pure functions; a Reader is not thread-safe.
#ifndef LAPSE_SERVER_BASE_WIRE_FORMAT_H_
#define LAPSE_SERVER_BASE_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"

namespace lapse::wire {

enum class WireType : uint8_t { kVarint = 0, kLengthDelimited = 2 };

// A one-byte tag. REQUIRES: 0 < field < 16.
constexpr uint8_t Tag(int field, WireType type) {
  return static_cast<uint8_t>(field << 3 | static_cast<uint8_t>(type));
}

// int32, int64 and enum fields are varints of the value sign-extended to 64
// bits.
constexpr uint64_t Signed(int64_t value) { return static_cast<uint64_t>(value); }

inline size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Bytes of a varint field; a zero is left out.
inline size_t VarintFieldSize(uint64_t value) { return value == 0 ? 0 : 1 + VarintSize(value); }

// Bytes of a length-delimited field holding `size` bytes, written even when
// empty (a message field that is set).
inline size_t DelimitedSize(size_t size) { return 1 + VarintSize(size) + size; }

// Bytes of a string field; an empty one is left out.
inline size_t StringFieldSize(absl::string_view s) {
  return s.empty() ? 0 : DelimitedSize(s.size());
}

inline uint8_t* WriteVarint(uint64_t value, uint8_t* p) {
  while (value >= 0x80) {
    *p++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<uint8_t>(value);
  return p;
}

inline uint8_t* WriteVarintField(int field, uint64_t value, uint8_t* p) {
  if (value == 0) return p;
  *p++ = Tag(field, WireType::kVarint);
  return WriteVarint(value, p);
}

// A length-delimited field's tag and length; its `size` bytes follow.
inline uint8_t* WriteDelimitedHeader(int field, size_t size, uint8_t* p) {
  *p++ = Tag(field, WireType::kLengthDelimited);
  return WriteVarint(size, p);
}

inline uint8_t* WriteStringField(int field, absl::string_view s, uint8_t* p) {
  if (s.empty()) return p;
  p = WriteDelimitedHeader(field, s.size(), p);
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

class Reader {
 public:
  static constexpr int kMaxVarintBytes = 10;
  // Protobuf reads a length in at most 5 bytes, up to INT_MAX less some:
  // four (256 MiB) are within that.
  static constexpr int kMaxLengthBytes = 4;

  explicit Reader(absl::string_view in)
      : p_(reinterpret_cast<const uint8_t*>(in.data())), end_(p_ + in.size()) {}

  bool done() const { return p_ == end_; }

  // Inlined: tags, lengths and most values are one byte, and every field
  // goes through here.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Varint(uint64_t* value) {
    if (p_ != end_ && *p_ < 0x80) {
      *value = *p_++;
      return true;
    }
    return LongVarint(value);
  }

  // A tag of one byte: a field below 16 (those longer are refused).
  bool OneByteTag(int* field, WireType* wire_type) {
    if (p_ == end_ || *p_ >= 0x80) return false;
    const uint8_t tag = *p_++;
    *field = tag >> 3;
    *wire_type = static_cast<WireType>(tag & 7);
    return *field > 0;
  }

  // A length, and the bytes it covers.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Delimited(absl::string_view* body) {
    const uint8_t* start = p_;
    uint64_t size;
    if (!Varint(&size) || p_ - start > kMaxLengthBytes || size > static_cast<uint64_t>(end_ - p_)) {
      return false;
    }
    *body = absl::string_view(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return true;
  }

 private:
  bool LongVarint(uint64_t* value) {
    uint64_t v = 0;
    for (int i = 0; i < kMaxVarintBytes; ++i) {
      if (p_ == end_) return false;
      const uint8_t byte = *p_++;
      // The tenth byte holds only the 64th bit.
      if (i == kMaxVarintBytes - 1 && byte > 1) return false;
      v |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *value = v;
        return true;
      }
    }
    return false;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace lapse::wire

#endif  // LAPSE_SERVER_BASE_WIRE_FORMAT_H_

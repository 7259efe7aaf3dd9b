// Coding: the one place lapse turns integers into bytes and back, for the
// journal's batches, the log's frames, snapshots and page tokens.
//
// Fixed-width integers are little-endian. Varints are LEB128 (7 bits a byte,
// low group first, high bit set on all but the last byte), as in LevelDB's
// util/coding.h and protobuf. A length-prefixed string is a varint32 length
// followed by the bytes.
//
//   std::string out;
//   lapse::PutFixed64(&out, lsn);
//   lapse::PutLengthPrefixed(&out, key);
//
//   absl::string_view in = out;
//   uint64_t lsn;
//   absl::string_view key;
//   if (!lapse::GetFixed64(&in, &lsn) || !lapse::GetLengthPrefixed(&in, &key)) {
//     ... truncated or malformed ...
//   }
//
// The Get* functions read from the front of `*input` and advance it past what
// they read. They return false, leaving `*input` and the output unchanged,
// when the input is too short or malformed.
//
// Pure functions; safe to call from any thread.
#ifndef LAPSE_SERVER_BASE_CODING_H_
#define LAPSE_SERVER_BASE_CODING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace lapse {

// Longest varint encodings.
inline constexpr size_t kMaxVarint32Bytes = 5;
inline constexpr size_t kMaxVarint64Bytes = 10;

void PutFixed32(std::string* dst, uint32_t value);
void PutFixed64(std::string* dst, uint64_t value);
void PutVarint32(std::string* dst, uint32_t value);
void PutVarint64(std::string* dst, uint64_t value);
// REQUIRES: value.size() < 2^32.
void PutLengthPrefixed(std::string* dst, absl::string_view value);

bool GetByte(absl::string_view* input, uint8_t* value);
bool GetFixed32(absl::string_view* input, uint32_t* value);
bool GetFixed64(absl::string_view* input, uint64_t* value);
// As in LevelDB, bits beyond the value's width in the last byte are ignored.
bool GetVarint32(absl::string_view* input, uint32_t* value);
bool GetVarint64(absl::string_view* input, uint64_t* value);
// `value` points into the input.
bool GetLengthPrefixed(absl::string_view* input, absl::string_view* value);

// Varints and length-prefixed strings written straight into a buffer that
// has room for them, for records sized before they are written.
inline size_t VarintLength(uint64_t value) {
  size_t length = 1;
  for (; value >= 0x80; value >>= 7) ++length;
  return length;
}
inline size_t LengthPrefixedLength(absl::string_view value) {
  return VarintLength(value.size()) + value.size();
}
// Each returns the byte past what it wrote.
inline char* EncodeVarint64(char* dst, uint64_t value) {
  for (; value >= 0x80; value >>= 7) *dst++ = static_cast<char>((value & 0x7f) | 0x80);
  *dst++ = static_cast<char>(value);
  return dst;
}
// REQUIRES: value.size() < 2^32.
inline char* EncodeLengthPrefixed(char* dst, absl::string_view value) {
  dst = EncodeVarint64(dst, value.size());
  // An empty view may have no data at all, which memcpy must not be given.
  if (!value.empty()) std::memcpy(dst, value.data(), value.size());
  return dst + value.size();
}

// Fixed-width integers at a known place in a buffer, for headers written
// before their fields are known, or read once their size has been checked:
// `dst` and `ptr` must have room for 4 (32) or 8 (64) bytes.
inline void EncodeFixed32(char* dst, uint32_t value) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}
inline void EncodeFixed64(char* dst, uint64_t value) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}
inline uint32_t DecodeFixed32(const char* ptr) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(ptr[i])) << (8 * i);
  }
  return value;
}
inline uint64_t DecodeFixed64(const char* ptr) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(ptr[i])) << (8 * i);
  }
  return value;
}

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_CODING_H_

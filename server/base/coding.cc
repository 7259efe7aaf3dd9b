#include "server/base/coding.h"

#include <cassert>
#include <cstdint>

namespace lapse {
namespace {

// Reads a varint of at most `max_bytes` bytes from the front of `*input`;
// bits past 64 are dropped.
bool GetVarint(absl::string_view* input, size_t max_bytes, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < max_bytes && i < input->size(); ++i) {
    const uint8_t byte = static_cast<uint8_t>((*input)[i]);
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *value = result;
      input->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

void PutFixed32(std::string* dst, uint32_t value) {
  char buf[4];
  EncodeFixed32(buf, value);
  dst->append(buf, sizeof(buf));
}

void PutFixed64(std::string* dst, uint64_t value) {
  char buf[8];
  EncodeFixed64(buf, value);
  dst->append(buf, sizeof(buf));
}

void PutVarint32(std::string* dst, uint32_t value) { PutVarint64(dst, value); }

void PutVarint64(std::string* dst, uint64_t value) {
  char buf[kMaxVarint64Bytes];
  dst->append(buf, static_cast<size_t>(EncodeVarint64(buf, value) - buf));
}

void PutLengthPrefixed(std::string* dst, absl::string_view value) {
  assert(value.size() <= UINT32_MAX);
  PutVarint32(dst, static_cast<uint32_t>(value.size()));
  dst->append(value.data(), value.size());
}

bool GetByte(absl::string_view* input, uint8_t* value) {
  if (input->empty()) return false;
  *value = static_cast<uint8_t>(input->front());
  input->remove_prefix(1);
  return true;
}

bool GetFixed32(absl::string_view* input, uint32_t* value) {
  if (input->size() < 4) return false;
  *value = DecodeFixed32(input->data());
  input->remove_prefix(4);
  return true;
}

bool GetFixed64(absl::string_view* input, uint64_t* value) {
  if (input->size() < 8) return false;
  *value = DecodeFixed64(input->data());
  input->remove_prefix(8);
  return true;
}

bool GetVarint32(absl::string_view* input, uint32_t* value) {
  uint64_t v;
  if (!GetVarint(input, kMaxVarint32Bytes, &v)) return false;
  *value = static_cast<uint32_t>(v);
  return true;
}

bool GetVarint64(absl::string_view* input, uint64_t* value) {
  return GetVarint(input, kMaxVarint64Bytes, value);
}

bool GetLengthPrefixed(absl::string_view* input, absl::string_view* value) {
  absl::string_view rest = *input;
  uint32_t size;
  if (!GetVarint32(&rest, &size) || rest.size() < size) return false;
  *value = rest.substr(0, size);
  rest.remove_prefix(size);
  *input = rest;
  return true;
}

}  // namespace lapse

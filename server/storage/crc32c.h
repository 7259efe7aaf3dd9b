// CRC32C (Castagnoli): the checksum of every write-ahead log record and
// snapshot block. Uses the SSE4.2 instruction when the CPU has it.
#ifndef LAPSE_SERVER_STORAGE_CRC32C_H_
#define LAPSE_SERVER_STORAGE_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace lapse {
namespace crc32c {

// The CRC32C of `data`, continuing from `crc` (0 to start).
uint32_t Extend(uint32_t crc, const char* data, size_t n);
inline uint32_t Value(absl::string_view data) { return Extend(0, data.data(), data.size()); }

// A stored checksum is masked (as LevelDB does) so that the CRC of data that
// itself contains CRCs does not degenerate.
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_CRC32C_H_

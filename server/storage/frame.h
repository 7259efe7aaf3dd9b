// Frame: how records are laid out in write-ahead log and snapshot files.
//
//   lsn u64 | payload_len u32 | payload_crc u32 | header_crc u32 | payload
//
// Little-endian; both CRCs are masked CRC32C (crc32c.h), header_crc over the
// 16 bytes before it. The header's own checksum means a damaged length is
// detected rather than believed, so damage is never mistaken for the end of a
// file: after a failed frame, a reader looks for any valid frame further on
// (AnyValidFrameAfter) to tell a torn tail from damage in the middle. A log
// may fill a file with zeros ahead of its frames (wal.h): where the rest of a
// file is zeros (OnlyZerosFrom), it ends.
#ifndef LAPSE_SERVER_STORAGE_FRAME_H_
#define LAPSE_SERVER_STORAGE_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace lapse {

inline constexpr size_t kFrameHeaderSize = 20;
// Larger payloads are treated as damage.
inline constexpr uint32_t kMaxFramePayload = 1u << 30;

void AppendFrame(std::string* out, uint64_t lsn, absl::string_view payload);

struct Frame {
  uint64_t lsn = 0;
  absl::string_view payload;
  // Bytes the frame occupies, header included.
  size_t size = 0;
};

enum class FrameStatus {
  kOk,
  // No bytes left: a clean end.
  kEnd,
  // Fewer bytes than the frame needs: a torn write, or damage.
  kTruncated,
  // A checksum does not match.
  kCorrupt,
};

// Parses the frame starting at `offset` of `data`.
FrameStatus ParseFrame(absl::string_view data, size_t offset, Frame* frame);

// Whether a complete, valid frame starts anywhere after `offset`.
bool AnyValidFrameAfter(absl::string_view data, size_t offset);

// Whether `data` holds only zero bytes from `offset` to its end (true when
// nothing is left).
bool OnlyZerosFrom(absl::string_view data, size_t offset);

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_FRAME_H_

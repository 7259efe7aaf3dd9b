#include "server/storage/frame.h"

#include <algorithm>

#include "server/base/coding.h"
#include "server/storage/crc32c.h"

namespace lapse {
void AppendFrame(std::string* out, uint64_t lsn, absl::string_view payload) {
  char header[kFrameHeaderSize];
  EncodeFixed64(header, lsn);
  EncodeFixed32(header + 8, static_cast<uint32_t>(payload.size()));
  EncodeFixed32(header + 12, crc32c::Mask(crc32c::Value(payload)));
  EncodeFixed32(header + 16, crc32c::Mask(crc32c::Extend(0, header, 16)));
  out->append(header, kFrameHeaderSize);
  out->append(payload.data(), payload.size());
}

FrameStatus ParseFrame(absl::string_view data, size_t offset, Frame* frame) {
  if (offset >= data.size()) return FrameStatus::kEnd;
  if (data.size() - offset < kFrameHeaderSize) return FrameStatus::kTruncated;
  const char* h = data.data() + offset;
  if (crc32c::Unmask(DecodeFixed32(h + 16)) != crc32c::Extend(0, h, 16)) {
    return FrameStatus::kCorrupt;
  }
  const uint32_t len = DecodeFixed32(h + 8);
  if (len > kMaxFramePayload) return FrameStatus::kCorrupt;
  if (data.size() - offset - kFrameHeaderSize < len) return FrameStatus::kTruncated;
  const absl::string_view payload = data.substr(offset + kFrameHeaderSize, len);
  if (crc32c::Unmask(DecodeFixed32(h + 12)) != crc32c::Value(payload)) {
    return FrameStatus::kCorrupt;
  }
  frame->lsn = DecodeFixed64(h);
  frame->payload = payload;
  frame->size = kFrameHeaderSize + len;
  return FrameStatus::kOk;
}

bool AnyValidFrameAfter(absl::string_view data, size_t offset) {
  Frame frame;
  for (size_t p = offset + 1; p + kFrameHeaderSize <= data.size(); ++p) {
    if (ParseFrame(data, p, &frame) == FrameStatus::kOk) return true;
  }
  return false;
}

bool OnlyZerosFrom(absl::string_view data, size_t offset) {
  if (offset >= data.size()) return true;
  return std::all_of(data.begin() + offset, data.end(), [](char c) { return c == 0; });
}

}  // namespace lapse

#include "server/storage/frame.h"

#include "server/storage/crc32c.h"

namespace lapse {
namespace {

void PutFixed32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutFixed64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

void AppendFrame(std::string* out, uint64_t lsn, absl::string_view payload) {
  char header[kFrameHeaderSize];
  PutFixed64(header, lsn);
  PutFixed32(header + 8, static_cast<uint32_t>(payload.size()));
  PutFixed32(header + 12, crc32c::Mask(crc32c::Value(payload)));
  PutFixed32(header + 16, crc32c::Mask(crc32c::Extend(0, header, 16)));
  out->append(header, kFrameHeaderSize);
  out->append(payload.data(), payload.size());
}

FrameStatus ParseFrame(absl::string_view data, size_t offset, Frame* frame) {
  if (offset >= data.size()) return FrameStatus::kEnd;
  if (data.size() - offset < kFrameHeaderSize) return FrameStatus::kTruncated;
  const char* h = data.data() + offset;
  if (crc32c::Unmask(GetFixed32(h + 16)) != crc32c::Extend(0, h, 16)) {
    return FrameStatus::kCorrupt;
  }
  const uint32_t len = GetFixed32(h + 8);
  if (len > kMaxFramePayload) return FrameStatus::kCorrupt;
  if (data.size() - offset - kFrameHeaderSize < len) return FrameStatus::kTruncated;
  const absl::string_view payload = data.substr(offset + kFrameHeaderSize, len);
  if (crc32c::Unmask(GetFixed32(h + 12)) != crc32c::Value(payload)) {
    return FrameStatus::kCorrupt;
  }
  frame->lsn = GetFixed64(h);
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

}  // namespace lapse

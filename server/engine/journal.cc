#include "server/engine/journal.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace lapse {
namespace {

constexpr size_t kHeaderSize = 12;  // first_event_sequence u64 + count u32

void EncodeFixed64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void EncodeFixed32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t DecodeFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint32_t DecodeFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  bool done() const { return in_.empty(); }

  bool Byte(uint8_t* v) {
    if (in_.empty()) return false;
    *v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool Fixed64(uint64_t* v) {
    if (in_.size() < 8) return false;
    *v = DecodeFixed64(in_.data());
    in_.remove_prefix(8);
    return true;
  }
  bool Signed64(int64_t* v) {
    uint64_t u;
    if (!Fixed64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool String(absl::string_view* s) {
    uint32_t len = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      len |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        if (in_.size() < len) return false;
        *s = in_.substr(0, len);
        in_.remove_prefix(len);
        return true;
      }
    }
    return false;
  }

 private:
  absl::string_view in_;
};

}  // namespace

BatchEncoder::BatchEncoder() : buffer_(kHeaderSize, '\0') {}

void BatchEncoder::PutString(absl::string_view s) {
  uint32_t len = static_cast<uint32_t>(s.size());
  while (len >= 0x80) {
    buffer_.push_back(static_cast<char>((len & 0x7f) | 0x80));
    len >>= 7;
  }
  buffer_.push_back(static_cast<char>(len));
  buffer_.append(s.data(), s.size());
}

void BatchEncoder::PutFixed64(uint64_t v) {
  char b[8];
  EncodeFixed64(b, v);
  buffer_.append(b, 8);
}

void BatchEncoder::Put(absl::string_view collection, absl::string_view key,
                       absl::string_view value, int64_t deadline_ms) {
  buffer_.push_back(static_cast<char>(RecordType::kPut));
  PutString(collection);
  PutString(key);
  PutString(value);
  PutFixed64(static_cast<uint64_t>(deadline_ms));
  ++count_;
}

void BatchEncoder::Remove(absl::string_view collection, absl::string_view key) {
  buffer_.push_back(static_cast<char>(RecordType::kRemove));
  PutString(collection);
  PutString(key);
  ++count_;
}

void BatchEncoder::SetDeadline(absl::string_view collection, absl::string_view key,
                               int64_t deadline_ms) {
  buffer_.push_back(static_cast<char>(RecordType::kSetDeadline));
  PutString(collection);
  PutString(key);
  PutFixed64(static_cast<uint64_t>(deadline_ms));
  ++count_;
}

void BatchEncoder::DeleteCollection(absl::string_view collection) {
  buffer_.push_back(static_cast<char>(RecordType::kDeleteCollection));
  PutString(collection);
  ++count_;
}

void BatchEncoder::Expiry(absl::string_view collection, absl::string_view key,
                          absl::string_view value, int64_t deadline_ms,
                          int64_t expired_at_ns) {
  buffer_.push_back(static_cast<char>(RecordType::kExpiry));
  PutString(collection);
  PutString(key);
  PutString(value);
  PutFixed64(static_cast<uint64_t>(deadline_ms));
  PutFixed64(static_cast<uint64_t>(expired_at_ns));
  ++count_;
}

void BatchEncoder::Event(const ExpiryEvent& e) {
  buffer_.push_back(static_cast<char>(RecordType::kEvent));
  PutFixed64(e.sequence);
  PutString(e.collection);
  PutString(e.key);
  PutString(e.value);
  PutFixed64(static_cast<uint64_t>(FloorMillis(e.expire_time)));
  PutFixed64(static_cast<uint64_t>(absl::ToUnixNanos(e.expired_at)));
  ++count_;
}

void BatchEncoder::NextSequence(uint64_t sequence) {
  buffer_.push_back(static_cast<char>(RecordType::kNextSequence));
  PutFixed64(sequence);
  ++count_;
}

std::string BatchEncoder::Finish(uint64_t first_event_sequence) {
  EncodeFixed64(&buffer_[0], first_event_sequence);
  EncodeFixed32(&buffer_[8], count_);
  std::string out = std::move(buffer_);
  buffer_.assign(kHeaderSize, '\0');
  count_ = 0;
  return out;
}

absl::Status DecodeBatch(absl::string_view batch,
                         const std::function<absl::Status(const JournalRecord&)>& fn) {
  if (batch.size() < kHeaderSize) return absl::DataLossError("batch shorter than its header");
  uint64_t next_sequence = DecodeFixed64(batch.data());
  const uint32_t count = DecodeFixed32(batch.data() + 8);
  Reader in(batch.substr(kHeaderSize));
  for (uint32_t i = 0; i < count; ++i) {
    JournalRecord r;
    uint8_t type = 0;
    bool ok = in.Byte(&type);
    r.type = static_cast<RecordType>(type);
    if (ok) {
      switch (r.type) {
        case RecordType::kPut:
          ok = in.String(&r.collection) && in.String(&r.key) && in.String(&r.value) &&
               in.Signed64(&r.deadline_ms);
          break;
        case RecordType::kRemove:
          ok = in.String(&r.collection) && in.String(&r.key);
          break;
        case RecordType::kSetDeadline:
          ok = in.String(&r.collection) && in.String(&r.key) && in.Signed64(&r.deadline_ms);
          break;
        case RecordType::kDeleteCollection:
          ok = in.String(&r.collection);
          break;
        case RecordType::kExpiry:
          ok = in.String(&r.collection) && in.String(&r.key) && in.String(&r.value) &&
               in.Signed64(&r.deadline_ms) && in.Signed64(&r.expired_at_ns);
          r.sequence = next_sequence++;
          break;
        case RecordType::kEvent:
          ok = in.Fixed64(&r.sequence) && in.String(&r.collection) && in.String(&r.key) &&
               in.String(&r.value) && in.Signed64(&r.deadline_ms) &&
               in.Signed64(&r.expired_at_ns);
          break;
        case RecordType::kNextSequence:
          ok = in.Fixed64(&r.sequence);
          break;
        default:
          return absl::DataLossError(absl::StrCat("unknown record type ", type));
      }
    }
    if (!ok) return absl::DataLossError(absl::StrCat("record ", i, " is truncated"));
    if (absl::Status s = fn(r); !s.ok()) return s;
  }
  if (!in.done()) return absl::DataLossError("bytes after the last record");
  return absl::OkStatus();
}

}  // namespace lapse

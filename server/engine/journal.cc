#include "server/engine/journal.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/base/coding.h"

namespace lapse {
namespace {

constexpr size_t kHeaderSize = 12;  // first_event_sequence u64 + count u32

bool GetSigned64(absl::string_view* in, int64_t* v) {
  uint64_t u;
  if (!GetFixed64(in, &u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

}  // namespace

ExpiryEvent EventOf(const JournalRecord& r) {
  ExpiryEvent e;
  e.sequence = r.sequence;
  e.collection = std::string(r.collection);
  e.key = std::string(r.key);
  e.value = std::string(r.value);
  e.expire_time = TimeOfDeadline(r.deadline_ms);
  e.expired_at = absl::FromUnixNanos(r.expired_at_ns);
  return e;
}

void SetEvent(const ExpiryEvent& e, JournalRecord* r) {
  r->sequence = e.sequence;
  r->collection = e.collection;
  r->key = e.key;
  r->value = e.value;
  r->deadline_ms = FloorMillis(e.expire_time);
  r->expired_at_ns = absl::ToUnixNanos(e.expired_at);
}

BatchEncoder::BatchEncoder() : BatchEncoder(&own_) {}

BatchEncoder::BatchEncoder(std::string* buffer) : buffer_(buffer), size_(kHeaderSize) {
  if (buffer_->size() < kHeaderSize) buffer_->resize(kHeaderSize);
}

void BatchEncoder::Open() {
  if (finished_) {
    size_ = kHeaderSize;
    finished_ = false;
  }
}

void BatchEncoder::Reserve(size_t bytes) {
  Open();
  if (buffer_->size() < size_ + bytes) buffer_->reserve(size_ + bytes);
}

size_t BatchEncoder::size() const { return finished_ ? kHeaderSize : size_; }

char* BatchEncoder::Extend(RecordType type, size_t size) {
  Open();
  const size_t at = size_;
  size_ = at + 1 + size;
  if (buffer_->size() < size_) buffer_->resize(std::max(size_, buffer_->capacity()));
  char* const record = &(*buffer_)[at];
  record[0] = static_cast<char>(type);
  ++count_;
  return record + 1;
}

void BatchEncoder::Put(absl::string_view collection, absl::string_view key, absl::string_view value,
                       int64_t deadline_ms) {
  char* p = Extend(RecordType::kPut, LengthPrefixedLength(collection) + LengthPrefixedLength(key) +
                                         LengthPrefixedLength(value) + 8);
  p = EncodeLengthPrefixed(p, collection);
  p = EncodeLengthPrefixed(p, key);
  p = EncodeLengthPrefixed(p, value);
  EncodeFixed64(p, static_cast<uint64_t>(deadline_ms));
}

void BatchEncoder::Remove(absl::string_view collection, absl::string_view key) {
  char* p =
      Extend(RecordType::kRemove, LengthPrefixedLength(collection) + LengthPrefixedLength(key));
  p = EncodeLengthPrefixed(p, collection);
  EncodeLengthPrefixed(p, key);
}

void BatchEncoder::SetDeadline(absl::string_view collection, absl::string_view key,
                               int64_t deadline_ms) {
  char* p = Extend(RecordType::kSetDeadline,
                   LengthPrefixedLength(collection) + LengthPrefixedLength(key) + 8);
  p = EncodeLengthPrefixed(p, collection);
  p = EncodeLengthPrefixed(p, key);
  EncodeFixed64(p, static_cast<uint64_t>(deadline_ms));
}

void BatchEncoder::DeleteCollection(absl::string_view collection) {
  EncodeLengthPrefixed(Extend(RecordType::kDeleteCollection, LengthPrefixedLength(collection)),
                       collection);
}

void BatchEncoder::Expiry(absl::string_view collection, absl::string_view key,
                          absl::string_view value, int64_t deadline_ms, int64_t expired_at_ns) {
  char* p =
      Extend(RecordType::kExpiry, LengthPrefixedLength(collection) + LengthPrefixedLength(key) +
                                      LengthPrefixedLength(value) + 16);
  p = EncodeLengthPrefixed(p, collection);
  p = EncodeLengthPrefixed(p, key);
  p = EncodeLengthPrefixed(p, value);
  EncodeFixed64(p, static_cast<uint64_t>(deadline_ms));
  EncodeFixed64(p + 8, static_cast<uint64_t>(expired_at_ns));
}

void BatchEncoder::Event(const ExpiryEvent& e) {
  char* p = Extend(RecordType::kEvent, 8 + LengthPrefixedLength(e.collection) +
                                           LengthPrefixedLength(e.key) +
                                           LengthPrefixedLength(e.value) + 16);
  EncodeFixed64(p, e.sequence);
  p = EncodeLengthPrefixed(p + 8, e.collection);
  p = EncodeLengthPrefixed(p, e.key);
  p = EncodeLengthPrefixed(p, e.value);
  EncodeFixed64(p, static_cast<uint64_t>(FloorMillis(e.expire_time)));
  EncodeFixed64(p + 8, static_cast<uint64_t>(absl::ToUnixNanos(e.expired_at)));
}

void BatchEncoder::NextSequence(uint64_t sequence) {
  EncodeFixed64(Extend(RecordType::kNextSequence, 8), sequence);
}

void BatchEncoder::GroupRecord(const JournalRecord& r) {
  Open();
  // Rare and of many shapes: appended field by field to the batch alone.
  std::string* const buffer = buffer_;
  buffer->resize(size_);
  buffer->push_back(static_cast<char>(r.type));
  PutLengthPrefixed(buffer, r.group);
  switch (r.type) {
    case RecordType::kGroupCreate:
      PutLengthPrefixed(buffer, r.options);
      PutFixed64(buffer, r.position);
      break;
    case RecordType::kGroupReset:
    case RecordType::kGroupPosition:
      PutFixed64(buffer, r.position);
      break;
    case RecordType::kGroupEvent:
    case RecordType::kGroupDeadLetter:
      PutFixed64(buffer, r.sequence);
      PutLengthPrefixed(buffer, r.collection);
      PutLengthPrefixed(buffer, r.key);
      PutLengthPrefixed(buffer, r.value);
      PutFixed64(buffer, static_cast<uint64_t>(r.deadline_ms));
      PutFixed64(buffer, static_cast<uint64_t>(r.expired_at_ns));
      PutFixed32(buffer, r.delivery_count);
      PutLengthPrefixed(buffer, r.consumer);
      PutFixed64(buffer, static_cast<uint64_t>(r.at_ms));
      break;
    case RecordType::kGroupLease:
      PutFixed64(buffer, r.sequence);
      PutFixed32(buffer, r.delivery_count);
      PutLengthPrefixed(buffer, r.consumer);
      PutFixed64(buffer, static_cast<uint64_t>(r.at_ms));
      break;
    case RecordType::kGroupAck:
      PutFixed64(buffer, r.sequence);
      break;
    default:  // kGroupDelete: the name alone.
      break;
  }
  size_ = buffer->size();
  ++count_;
}

absl::string_view BatchEncoder::Finish(uint64_t first_event_sequence) {
  Open();
  char* const header = &(*buffer_)[0];
  EncodeFixed64(header, first_event_sequence);
  EncodeFixed32(header + 8, count_);
  count_ = 0;
  finished_ = true;
  return absl::string_view(header, size_);
}

absl::Status DecodeBatch(absl::string_view batch,
                         const std::function<absl::Status(const JournalRecord&)>& fn) {
  if (batch.size() < kHeaderSize) return absl::DataLossError("batch shorter than its header");
  uint64_t next_sequence = DecodeFixed64(batch.data());
  const uint32_t count = DecodeFixed32(batch.data() + 8);
  absl::string_view in = batch.substr(kHeaderSize);
  for (uint32_t i = 0; i < count; ++i) {
    JournalRecord r;
    uint8_t type = 0;
    bool ok = GetByte(&in, &type);
    r.type = static_cast<RecordType>(type);
    if (ok) {
      switch (r.type) {
        case RecordType::kPut:
          ok = GetLengthPrefixed(&in, &r.collection) && GetLengthPrefixed(&in, &r.key) &&
               GetLengthPrefixed(&in, &r.value) && GetSigned64(&in, &r.deadline_ms);
          break;
        case RecordType::kRemove:
          ok = GetLengthPrefixed(&in, &r.collection) && GetLengthPrefixed(&in, &r.key);
          break;
        case RecordType::kSetDeadline:
          ok = GetLengthPrefixed(&in, &r.collection) && GetLengthPrefixed(&in, &r.key) &&
               GetSigned64(&in, &r.deadline_ms);
          break;
        case RecordType::kDeleteCollection:
          ok = GetLengthPrefixed(&in, &r.collection);
          break;
        case RecordType::kExpiry:
          ok = GetLengthPrefixed(&in, &r.collection) && GetLengthPrefixed(&in, &r.key) &&
               GetLengthPrefixed(&in, &r.value) && GetSigned64(&in, &r.deadline_ms) &&
               GetSigned64(&in, &r.expired_at_ns);
          r.sequence = next_sequence++;
          break;
        case RecordType::kEvent:
          ok = GetFixed64(&in, &r.sequence) && GetLengthPrefixed(&in, &r.collection) &&
               GetLengthPrefixed(&in, &r.key) && GetLengthPrefixed(&in, &r.value) &&
               GetSigned64(&in, &r.deadline_ms) && GetSigned64(&in, &r.expired_at_ns);
          break;
        case RecordType::kNextSequence:
          ok = GetFixed64(&in, &r.sequence);
          break;
        case RecordType::kGroupCreate:
          ok = GetLengthPrefixed(&in, &r.group) && GetLengthPrefixed(&in, &r.options) &&
               GetFixed64(&in, &r.position);
          break;
        case RecordType::kGroupDelete:
          ok = GetLengthPrefixed(&in, &r.group);
          break;
        case RecordType::kGroupReset:
        case RecordType::kGroupPosition:
          ok = GetLengthPrefixed(&in, &r.group) && GetFixed64(&in, &r.position);
          break;
        case RecordType::kGroupEvent:
        case RecordType::kGroupDeadLetter:
          ok = GetLengthPrefixed(&in, &r.group) && GetFixed64(&in, &r.sequence) &&
               GetLengthPrefixed(&in, &r.collection) && GetLengthPrefixed(&in, &r.key) &&
               GetLengthPrefixed(&in, &r.value) && GetSigned64(&in, &r.deadline_ms) &&
               GetSigned64(&in, &r.expired_at_ns) && GetFixed32(&in, &r.delivery_count) &&
               GetLengthPrefixed(&in, &r.consumer) && GetSigned64(&in, &r.at_ms);
          break;
        case RecordType::kGroupLease:
          ok = GetLengthPrefixed(&in, &r.group) && GetFixed64(&in, &r.sequence) &&
               GetFixed32(&in, &r.delivery_count) && GetLengthPrefixed(&in, &r.consumer) &&
               GetSigned64(&in, &r.at_ms);
          break;
        case RecordType::kGroupAck:
          ok = GetLengthPrefixed(&in, &r.group) && GetFixed64(&in, &r.sequence);
          break;
        default:
          return absl::DataLossError(absl::StrCat("unknown record type ", type));
      }
    }
    if (!ok) return absl::DataLossError(absl::StrCat("record ", i, " is truncated"));
    if (absl::Status s = fn(r); !s.ok()) return s;
  }
  if (!in.empty()) return absl::DataLossError("bytes after the last record");
  return absl::OkStatus();
}

}  // namespace lapse

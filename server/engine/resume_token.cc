#include "server/engine/resume_token.h"

#include <cassert>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/base/coding.h"

namespace lapse {

StoreId StoreId::Random() {
  absl::BitGen random;
  return {.high = absl::Uniform<uint64_t>(random), .low = absl::Uniform<uint64_t>(random)};
}

std::string StoreId::ToString() const { return absl::StrFormat("%016x%016x", high, low); }

std::string EncodeResumeToken(const ResumePosition& position) {
  assert(!position.partitions.empty() && position.partitions.size() <= kMaxTokenPartitions);
  std::string token;
  token.push_back(static_cast<char>(kResumeTokenVersion));
  PutFixed64(&token, position.store.high);
  PutFixed64(&token, position.store.low);
  PutVarint32(&token, static_cast<uint32_t>(position.partitions.size()));
  for (const PartitionPosition& p : position.partitions) {
    PutVarint32(&token, p.partition);
    PutVarint64(&token, p.sequence);
  }
  return token;
}

absl::StatusOr<ResumePosition> DecodeResumeToken(absl::string_view token) {
  constexpr absl::string_view kWhatToDo =
      "pass a resume_token exactly as a WatchExpirationsResponse carried it";
  absl::string_view in = token;
  uint8_t version;
  if (!GetByte(&in, &version)) {
    return absl::InvalidArgumentError(absl::StrCat("resume_token: empty; ", kWhatToDo));
  }
  if (version != kResumeTokenVersion) {
    return absl::InvalidArgumentError(absl::StrCat("resume_token: format version ", version,
                                                   " is not known to this server (", "it knows ",
                                                   kResumeTokenVersion, "); ", kWhatToDo));
  }
  ResumePosition position;
  uint32_t count;
  if (!GetFixed64(&in, &position.store.high) || !GetFixed64(&in, &position.store.low) ||
      !GetVarint32(&in, &count)) {
    return absl::InvalidArgumentError(absl::StrCat("resume_token: truncated; ", kWhatToDo));
  }
  if (count == 0 || count > kMaxTokenPartitions) {
    return absl::InvalidArgumentError(absl::StrCat("resume_token: names ", count,
                                                   " partitions, not 1 to ", kMaxTokenPartitions,
                                                   "; ", kWhatToDo));
  }
  for (uint32_t i = 0; i < count; ++i) {
    PartitionPosition p;
    if (!GetVarint32(&in, &p.partition) || !GetVarint64(&in, &p.sequence)) {
      return absl::InvalidArgumentError(absl::StrCat("resume_token: truncated; ", kWhatToDo));
    }
    if (!position.partitions.empty() && p.partition <= position.partitions.back().partition) {
      return absl::InvalidArgumentError(
          absl::StrCat("resume_token: partitions out of order; ", kWhatToDo));
    }
    position.partitions.push_back(p);
  }
  if (!in.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resume_token: ", in.size(), " bytes after its end; ", kWhatToDo));
  }
  return position;
}

}  // namespace lapse

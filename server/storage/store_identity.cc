#include "server/storage/store_identity.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/base/coding.h"
#include "server/storage/crc32c.h"
#include "server/storage/files.h"
#include "server/storage/snapshot.h"
#include "server/storage/wal.h"

namespace lapse {
namespace {

constexpr uint32_t kMagic = 0x4449504c;  // "LPID", little-endian.
constexpr uint8_t kVersion = 1;

std::string Encode(const StoreIdentity& identity) {
  std::string out;
  PutFixed32(&out, kMagic);
  out.push_back(static_cast<char>(kVersion));
  PutFixed64(&out, identity.id.high);
  PutFixed64(&out, identity.id.low);
  PutFixed64(&out, identity.first_sequence);
  PutFixed32(&out, crc32c::Mask(crc32c::Value(out)));
  return out;
}

absl::StatusOr<StoreIdentity> Decode(absl::string_view contents, const std::string& path) {
  absl::string_view in = contents;
  uint32_t magic, crc;
  uint8_t version;
  StoreIdentity identity;
  const bool whole = GetFixed32(&in, &magic) && GetByte(&in, &version) &&
                     GetFixed64(&in, &identity.id.high) && GetFixed64(&in, &identity.id.low) &&
                     GetFixed64(&in, &identity.first_sequence) && GetFixed32(&in, &crc) &&
                     in.empty();
  if (!whole || magic != kMagic || version != kVersion ||
      crc32c::Unmask(crc) != crc32c::Value(contents.substr(0, contents.size() - 4))) {
    return absl::DataLossError(absl::StrCat(
        path, " is damaged (", contents.size(),
        " bytes that are not a lapse store identity); the store cannot open. Restore it "
        "from a backup, or delete it to give the directory a new identity (watchers' resume "
        "tokens from before then are refused)"));
  }
  return identity;
}

// Whether `dir` holds a log segment or a snapshot.
absl::StatusOr<bool> HoldsHistory(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (Wal::ParseSegmentName(name, &lsn) || ParseSnapshotName(name, &lsn)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<StoreIdentity> LoadOrCreateIdentity(const std::string& dir,
                                                   uint64_t fresh_first_sequence) {
  const std::string path = absl::StrCat(dir, "/", kIdentityFileName);
  absl::StatusOr<std::string> contents = files::ReadAll(path);
  if (contents.ok()) return Decode(*contents, path);
  if (!absl::IsNotFound(contents.status())) return contents.status();
  absl::StatusOr<bool> holds_history = HoldsHistory(dir);
  if (!holds_history.ok()) return holds_history.status();
  const StoreIdentity identity{.id = StoreId::Random(),
                               .first_sequence = *holds_history ? 1 : fresh_first_sequence};
  if (absl::Status s = files::WriteAtomically(dir, kIdentityFileName, Encode(identity)); !s.ok()) {
    return s;
  }
  return identity;
}

}  // namespace lapse

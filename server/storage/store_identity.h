// StoreIdentity: who a data directory's history belongs to, recorded in the
// directory's IDENTITY file so that it survives restarts.
//
// The id is made (128 random bits) when the directory is first initialised,
// with the sequence its first event gets; watchers' resume tokens carry the id
// (server/engine/resume_token.h), so a token from another directory, or from
// before the directory was replaced, is told apart from a position in this
// one. A directory that already holds a log or snapshots but no IDENTITY (made
// by a lapsed that did not write one, or the file was deleted) gets a new id
// and first sequence 1: where its history began is unknown, so a position
// before its oldest retained event counts as discarded, never as "nothing
// missed".
//
// File format, written with files::WriteAtomically (a crash leaves the whole
// file or none):
//   fixed32 magic "LPID"; byte version (1); fixed64 id high; fixed64 id low;
//   fixed64 first sequence; fixed32 masked crc32c of everything before it.
//
//   absl::StatusOr<lapse::StoreIdentity> identity =
//       lapse::LoadOrCreateIdentity(dir, /*fresh_first_sequence=*/now_ns);
//
// Call with the directory locked (files::DirLock). Thread-compatible.
#ifndef LAPSE_SERVER_STORAGE_STORE_IDENTITY_H_
#define LAPSE_SERVER_STORAGE_STORE_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine/resume_token.h"

namespace lapse {

inline constexpr char kIdentityFileName[] = "IDENTITY";

struct StoreIdentity {
  StoreId id;
  // The sequence of the store's first event (EventFeed::Options).
  uint64_t first_sequence = 1;
};

// Reads DIR/IDENTITY. When there is none, writes a new identity first: with
// `fresh_first_sequence` when the directory holds no log segment and no
// snapshot, with 1 otherwise (see above). DATA_LOSS naming the file when it
// is damaged.
absl::StatusOr<StoreIdentity> LoadOrCreateIdentity(const std::string& dir,
                                                   uint64_t fresh_first_sequence);

}  // namespace lapse

#endif  // LAPSE_SERVER_STORAGE_STORE_IDENTITY_H_

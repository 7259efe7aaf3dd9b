// Expiration: when a request says a member expires (Google AIP-214): never,
// after a duration (ttl), or at a time (expire_time). The engine turns it into
// a deadline in whole milliseconds (server/base/deadline.h) after validating
// it (validate.h).
//
//   lapse::Expiration in_30_minutes = lapse::Expiration::Ttl(absl::Minutes(30));
//
// A plain value type.
#ifndef LAPSE_SERVER_ENGINE_EXPIRATION_H_
#define LAPSE_SERVER_ENGINE_EXPIRATION_H_

#include "absl/time/time.h"

namespace lapse {

struct Expiration {
  enum class Kind { kNone, kTtl, kTime };
  Kind kind = Kind::kNone;
  absl::Duration ttl;
  absl::Time time;

  static Expiration None() { return {}; }
  static Expiration Ttl(absl::Duration d) { return {Kind::kTtl, d, {}}; }
  static Expiration At(absl::Time t) { return {Kind::kTime, {}, t}; }
};

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_EXPIRATION_H_

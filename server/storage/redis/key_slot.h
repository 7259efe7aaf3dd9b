// KeySlot: the Redis Cluster slot (0..16383) of a key — CRC16 (XMODEM) of the
// key, or of its hash tag: the part between the first '{' and the next '}'
// when that part is not empty, so "{orders}:a" and "{orders}:b" share a slot.
//
//   uint16_t slot = KeySlot("lapse:{p7}:values:orders");
//
// Pure function; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_KEY_SLOT_H_
#define LAPSE_SERVER_STORAGE_REDIS_KEY_SLOT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace lapse::redis {

inline constexpr int kClusterSlots = 16384;

uint16_t KeySlot(absl::string_view key);

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_KEY_SLOT_H_

// DecodeUtf8: the one UTF-8 decoder, for the server's key validation and for
// lapsectl's output. Header-only and free of server code, so the client may
// include it (scripts/check_layers.sh allows it).
//
//   uint32_t code_point;
//   size_t length = lapse::DecodeUtf8(text.substr(i), &code_point);
//   if (length == 0) ... invalid at i ...
//
// Thread-safe (pure functions).
#ifndef LAPSE_SERVER_BASE_UTF8_H_
#define LAPSE_SERVER_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace lapse {

// Decodes the code point at the start of `text` (non-empty) into
// `*code_point` and returns how many bytes it took, 1 to 4. Returns 0 when
// `text` does not start with a valid UTF-8 sequence: a stray continuation
// byte, a truncated sequence, an overlong form, a surrogate or a value beyond
// U+10FFFF.
inline size_t DecodeUtf8(absl::string_view text, uint32_t* code_point) {
  const unsigned char c = static_cast<unsigned char>(text[0]);
  size_t length;
  uint32_t code;
  if (c < 0x80) {
    *code_point = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    length = 2;
    code = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    length = 3;
    code = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    length = 4;
    code = c & 0x07;
  } else {
    return 0;
  }
  if (length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = static_cast<unsigned char>(text[k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMin[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  *code_point = code;
  return length;
}

// Whether all of `text` is valid UTF-8.
inline bool IsValidUtf8(absl::string_view text) {
  uint32_t ignored;
  for (size_t i = 0; i < text.size();) {
    const size_t length = DecodeUtf8(text.substr(i), &ignored);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

// How many bytes at the start of `text` are in [`lowest`, 0x7e] (`lowest`
// in [1, 0x7f]; by default printable ASCII: valid one-byte UTF-8 and no
// control character, as nearly every name and key is). Eight bytes a step
// while they are, then one by one.
inline size_t PrintableAsciiPrefix(absl::string_view text, unsigned char lowest = 0x20) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighBits = 0x8080808080808080;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, sizeof(word));
    // Flags a byte of 0x80 or more (its own high bit); below `lowest` (the
    // subtraction borrows into its high bit; a borrow passed on can flag
    // only bytes after one already flagged); or 0x7f (adding one carries
    // into its high bit, and no byte below 0x80 carries further).
    if (((word | (word - kOnes * lowest) | (word + kOnes)) & kHighBits) != 0) break;
  }
  for (; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if (c < lowest || c > 0x7e) break;
  }
  return i;
}

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_UTF8_H_

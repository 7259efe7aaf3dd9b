// One table of names for the values of an enum, read both ways: a value's
// name (for messages, logs and flags) and the value a name stands for (for
// parsing the same flags and files), so that the two cannot disagree.
//
//   constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, ...};
//   NameOf(kColorNames, Color::kRed, "unknown")  // "red"
//   ParseName(kColorNames, "red", &color)        // true, color = kRed
//
// Thread-compatible: the tables are constant.
#ifndef LAPSE_SERVER_BASE_ENUM_NAMES_H_
#define LAPSE_SERVER_BASE_ENUM_NAMES_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace lapse {

template <typename Enum>
struct EnumName {
  Enum value;
  absl::string_view name;
};

// The name of `value` in `names`; `fallback` for a value the table lacks.
template <typename Enum, size_t N>
constexpr absl::string_view NameOf(const EnumName<Enum> (&names)[N], Enum value,
                                   absl::string_view fallback) {
  for (const EnumName<Enum>& entry : names) {
    if (entry.value == value) return entry.name;
  }
  return fallback;
}

// Sets *value to the value `name` (compared exactly) stands for in `names`;
// false, leaving *value alone, for a name the table lacks.
template <typename Enum, size_t N>
bool ParseName(const EnumName<Enum> (&names)[N], absl::string_view name, Enum* value) {
  for (const EnumName<Enum>& entry : names) {
    if (entry.name == name) {
      *value = entry.value;
      return true;
    }
  }
  return false;
}

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_ENUM_NAMES_H_

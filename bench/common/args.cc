#include "bench/common/args.h"

#include <algorithm>

namespace lapse {
namespace load {

std::vector<char*> DashesToUnderscores(int argc, char** argv, std::vector<std::string>* storage) {
  storage->clear();
  storage->reserve(static_cast<size_t>(argc));
  bool flags_ended = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") flags_ended = true;
    if (i > 0 && !flags_ended && arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
    }
    storage->push_back(std::move(arg));
  }
  std::vector<char*> out;
  out.reserve(storage->size());
  for (std::string& s : *storage) out.push_back(s.data());
  return out;
}

}  // namespace load
}  // namespace lapse

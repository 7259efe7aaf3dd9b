#include "client/lapsectl/cli_args.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace lapse::cli {
namespace {

const FlagSpec* Find(const std::vector<FlagSpec>& flags, absl::string_view name) {
  for (const FlagSpec& flag : flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// "--Name_x=v" -> {"name-x", "v"}; the value is nullopt without '='.
std::pair<std::string, std::optional<std::string>> SplitFlag(absl::string_view arg) {
  arg.remove_prefix(2);
  std::optional<std::string> value;
  const size_t eq = arg.find('=');
  if (eq != absl::string_view::npos) {
    value = std::string(arg.substr(eq + 1));
    arg = arg.substr(0, eq);
  }
  return {absl::StrReplaceAll(arg, {{"_", "-"}}), std::move(value)};
}

bool IsFlag(absl::string_view arg) { return absl::StartsWith(arg, "--") && arg.size() > 2; }

std::string FlagUsage(const FlagSpec& flag) {
  return flag.value_name.empty() ? absl::StrCat("--", flag.name)
                                 : absl::StrCat("--", flag.name, "=", flag.value_name);
}

}  // namespace

bool ParsedArgs::Has(absl::string_view flag) const { return flags_.find(flag) != flags_.end(); }

std::optional<std::string> ParsedArgs::Value(absl::string_view flag) const {
  auto it = flags_.find(flag);
  if (it == flags_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& command,
                                     const std::vector<FlagSpec>& global,
                                     const std::vector<std::string>& args) {
  ParsedArgs parsed;
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_ended || !absl::StartsWith(arg, "-") || arg == "-") {
      parsed.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    if (arg == "-h") {
      parsed.flags_["help"] = "";
      continue;
    }
    if (!IsFlag(arg)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg, " (flags are written --name)"));
    }
    auto [name, value] = SplitFlag(arg);
    const FlagSpec* flag = Find(command.flags, name);
    if (flag == nullptr) flag = Find(global, name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " for '", command.name, "'"));
    }
    if (flag->value_name.empty()) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      parsed.flags_[name] = "";
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 == args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value: ", FlagUsage(*flag)));
      }
      value = args[++i];
    }
    parsed.flags_[name] = *std::move(value);
  }
  if (parsed.Has("help")) return parsed;
  const int count = static_cast<int>(parsed.positional_.size());
  if (count < command.min_args || (command.max_args >= 0 && count > command.max_args)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", command.name, "' takes ", command.args.empty() ? "no arguments" : command.args,
        count < command.min_args ? "; some are missing" : "; there are too many"));
  }
  return parsed;
}

std::pair<std::string, std::vector<std::string>> SplitCommand(
    const std::vector<FlagSpec>& global, const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!IsFlag(arg) && arg != "-h") break;
    rest.push_back(arg);
    if (arg == "-h") continue;
    auto [name, value] = SplitFlag(arg);
    const FlagSpec* flag = Find(global, name);
    if (flag != nullptr && !flag->value_name.empty() && !value.has_value() && i + 1 < args.size()) {
      rest.push_back(args[++i]);
    }
  }
  if (i == args.size()) return {"", rest};
  std::string command = args[i];
  rest.insert(rest.end(), args.begin() + static_cast<long>(i) + 1, args.end());
  return {command, rest};
}

std::string FlagsHelp(const std::vector<FlagSpec>& flags) {
  size_t width = 0;
  for (const FlagSpec& flag : flags) {
    width = std::max(width, FlagUsage(flag).size());
  }
  std::string out;
  for (const FlagSpec& flag : flags) {
    const std::string usage = FlagUsage(flag);
    absl::StrAppend(&out, "  ", usage, std::string(width - usage.size() + 2, ' '), flag.help, "\n");
  }
  return out;
}

std::string CommandHelp(absl::string_view program, const CommandSpec& command,
                        const std::vector<FlagSpec>& global) {
  std::string out =
      absl::StrCat("Usage: ", program, " ", command.name, command.flags.empty() ? "" : " [FLAGS]",
                   command.args.empty() ? "" : " ", command.args, "\n\n", command.summary, ".\n");
  if (!command.details.empty()) absl::StrAppend(&out, "\n", command.details);
  if (!command.flags.empty()) {
    absl::StrAppend(&out, "\nFlags:\n", FlagsHelp(command.flags));
  }
  absl::StrAppend(&out, "\nGlobal flags:\n", FlagsHelp(global));
  return out;
}

}  // namespace lapse::cli

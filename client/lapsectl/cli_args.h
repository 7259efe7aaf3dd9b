// Command-line parsing for lapsectl: subcommands, each with its own flags and
// --help text, plus global flags accepted anywhere on the line.
//
//   const CommandSpec put = {"put", "COLLECTION KEY [VALUE]", "Write a member",
//                            "...", {{"ttl", "DURATION", "Time to live"}}, 2, 3};
//   absl::StatusOr<ParsedArgs> args = ParseArgs(put, GlobalFlags(), argv_rest);
//   if (args->Has("ttl")) ... *args->Value("ttl") ...
//
// Flags are written --name=value or --name value (switches: --name); an
// underscore in a name is read as a dash, "--" ends the flags, and "-" is an
// argument. Errors are INVALID_ARGUMENT with a message fit for the user. All
// functions are pure and thread-safe.
#ifndef LAPSE_CLIENT_LAPSECTL_CLI_ARGS_H_
#define LAPSE_CLIENT_LAPSECTL_CLI_ARGS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lapse::cli {

struct FlagSpec {
  std::string name;
  // What the value looks like ("DURATION"); empty for a switch.
  std::string value_name;
  std::string help;
};

struct CommandSpec {
  std::string name;
  // The arguments after the command, for the usage line.
  std::string args;
  // One line for the command list.
  std::string summary;
  // More text for the command's --help; may be empty.
  std::string details;
  std::vector<FlagSpec> flags;
  int min_args = 0;
  // -1: no limit.
  int max_args = -1;
};

class ParsedArgs {
 public:
  bool Has(absl::string_view flag) const;
  // The flag's value; nullopt when absent (or a switch).
  std::optional<std::string> Value(absl::string_view flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec&, const std::vector<FlagSpec>&,
                                              const std::vector<std::string>&);

  std::map<std::string, std::string, std::less<>> flags_;
  std::vector<std::string> positional_;
};

// Parses `args` (what follows the command name) against the command's flags
// and `global` flags. --help is not special here: declare it among `global`.
absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& command,
                                     const std::vector<FlagSpec>& global,
                                     const std::vector<std::string>& args);

// Splits a whole command line (without the program name) into the command
// name and everything else, skipping global flags (and their values) that
// come before the command. "" when there is no command.
std::pair<std::string, std::vector<std::string>> SplitCommand(const std::vector<FlagSpec>& global,
                                                              const std::vector<std::string>& args);

// "Usage: lapsectl put [FLAGS] COLLECTION KEY [VALUE]", the details, the
// command's flags and the global flags.
std::string CommandHelp(absl::string_view program, const CommandSpec& command,
                        const std::vector<FlagSpec>& global);

// The flags' lines of a help text, aligned.
std::string FlagsHelp(const std::vector<FlagSpec>& flags);

}  // namespace lapse::cli

#endif  // LAPSE_CLIENT_LAPSECTL_CLI_ARGS_H_

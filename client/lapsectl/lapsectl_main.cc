// lapsectl: the command-line client of lapse.
//
//   lapsectl put unpaid:user-42 order-17 '{"total":12}' --ttl=30m
//   lapsectl ttl unpaid:user-42 order-17
//   lapsectl watch --prefix=unpaid: --json
//   lapsectl consume --group=cancellers --consumer=worker-1
//
// One subcommand per RPC (plus ttl, watch, health and consume; the consumer
// group commands are "group create", "group ls", ...), each with --help.
// Output is a table for people or, with --json, one JSON object per line.
// Exit status: 0 ok; 1 not found, condition not met or skipped; 2 error (bad
// usage, RPC failure). The server is --addr, else $LAPSE_ADDR, else
// 127.0.0.1:50051; plaintext unless --tls or a --tls-* flag is given, e.g.
// for mTLS:
//   lapsectl --addr=lapse.prod:50051 --tls-ca=ca.crt --tls-cert=me.crt
//            --tls-key=me.key ls
// A server with --auth_file needs a bearer token: the file --token-file, else
// $LAPSE_TOKEN_FILE, names it (never the command line, which every user sees
// in ps).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"

namespace lapse::cli {
namespace {

constexpr char kDefaultAddress[] = "127.0.0.1:50051";

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const flags = new std::vector<FlagSpec>{
      {"addr", "HOST:PORT",
       absl::StrCat("Server address (default $LAPSE_ADDR, else ", kDefaultAddress, ")")},
      {"timeout", "DURATION", "Deadline of each call, retries included (10s)"},
      {"token-file", "FILE",
       "File holding the bearer token for a server with --auth_file (default "
       "$LAPSE_TOKEN_FILE)"},
      {"json", "", "One JSON object per line instead of a table"},
      {"tls", "", "TLS, verifying the server against the system's CAs (implied by --tls-*)"},
      {"tls-ca", "FILE", "TLS: PEM CA certificates that verify the server"},
      {"tls-cert", "FILE", "mTLS: this client's PEM certificate (with --tls-key)"},
      {"tls-key", "FILE", "mTLS: its PEM private key"},
      {"tls-server-name", "NAME",
       "TLS: the name the server's certificate carries, if not --addr's"},
      {"help", "", "Show help"},
  };
  return *flags;
}

// ---- The command table ------------------------------------------------------

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = [] {
    auto* all = new std::vector<Command>(MemberCommands());
    for (Command& command : CollectionCommands()) all->push_back(std::move(command));
    all->push_back(WatchCommand());
    for (Command& command : GroupCommands()) all->push_back(std::move(command));
    all->push_back(ConsumeCommand());
    all->push_back(HealthCommand());
    return all;
  }();
  return *commands;
}

std::string ToolHelp() {
  std::string out = absl::StrCat(
      "lapsectl: the command-line client of lapse (expiring collections over gRPC).\n\n"
      "Usage: ",
      kProgram, " [GLOBAL FLAGS] COMMAND [FLAGS] [ARGS...]\n\nCommands:\n");
  for (const Command& command : Commands()) {
    absl::StrAppend(&out, "  ", command.spec.name, std::string(13 - command.spec.name.size(), ' '),
                    command.spec.summary, "\n");
  }
  absl::StrAppend(&out,
                  "  help         Show this help, or a command's (help COMMAND)\n\n"
                  "Global flags:\n",
                  FlagsHelp(GlobalFlags()),
                  "\nDurations: 1500ms, 30s, 30m, 1h30m. Times: RFC 3339 "
                  "(2025-01-02T15:04:05Z).\n"
                  "Exit status: 0 ok; 1 not found, condition not met or skipped; 2 error "
                  "(bad usage,\nRPC failure).\nRun 'lapsectl COMMAND --help' for a "
                  "command's flags.\n");
  return out;
}

// --tls and the --tls-* flags; nullopt without any (plaintext).
absl::StatusOr<std::optional<client::TlsOptions>> TlsFlags(const ParsedArgs& args) {
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both, or neither");
  }
  if (!args.Has("tls") && !args.Has("tls-ca") && !args.Has("tls-cert") &&
      !args.Has("tls-server-name")) {
    return std::nullopt;
  }
  client::TlsOptions tls;
  tls.ca_file = args.Value("tls-ca").value_or("");
  tls.cert_file = args.Value("tls-cert").value_or("");
  tls.key_file = args.Value("tls-key").value_or("");
  tls.server_name = args.Value("tls-server-name").value_or("");
  return tls;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.spec.name == name) return &command;
  }
  return nullptr;
}

// "group" and its subcommand name one command ("group create"); global flags
// may come before either.
void JoinSubcommand(std::string* name, std::vector<std::string>* rest) {
  if (*name != "group") return;
  auto [subcommand, after] = SplitCommand(GlobalFlags(), *rest);
  if (subcommand.empty()) return;
  absl::StrAppend(name, " ", subcommand);
  *rest = std::move(after);
}

int Main(const std::vector<std::string>& argv) {
  auto [name, rest] = SplitCommand(GlobalFlags(), argv);
  JoinSubcommand(&name, &rest);
  if (name == "help") {
    auto [topic, topic_rest] = SplitCommand(GlobalFlags(), rest);
    JoinSubcommand(&topic, &topic_rest);
    if (topic.empty()) {
      WriteStdout(ToolHelp());
      return kOk;
    }
    const Command* command = FindCommand(topic);
    if (command == nullptr) {
      return UsageError("help", absl::StrCat("unknown command '", topic, "'"));
    }
    WriteStdout(CommandHelp(kProgram, command->spec, GlobalFlags()));
    return kOk;
  }
  if (name.empty()) {
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
      WriteStdout(ToolHelp());
      return kOk;
    }
    std::fprintf(stderr, "%s: no command given\n\n%s", kProgram, ToolHelp().c_str());
    return kError;
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "%s: unknown command '%s'\nRun '%s --help' for usage.\n", kProgram,
                 name.c_str(), kProgram);
    return kError;
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(command->spec, GlobalFlags(), rest);
  if (!args.ok()) return UsageError(name, args.status().message());
  if (args->Has("help")) {
    WriteStdout(CommandHelp(kProgram, command->spec, GlobalFlags()));
    return kOk;
  }
  std::string address = kDefaultAddress;
  if (const char* env = std::getenv("LAPSE_ADDR"); env != nullptr && *env != '\0') {
    address = env;
  }
  address = args->Value("addr").value_or(address);
  absl::Duration timeout = absl::Seconds(10);
  if (const std::optional<std::string> text = args->Value("timeout")) {
    absl::StatusOr<absl::Duration> parsed = ParseDurationFlag("timeout", *text);
    if (!parsed.ok()) return UsageError(name, parsed.status().message());
    timeout = *parsed;
  }
  absl::StatusOr<std::optional<client::TlsOptions>> tls = TlsFlags(*args);
  if (!tls.ok()) return UsageError(name, tls.status().message());
  std::string token_file;
  if (const char* env = std::getenv("LAPSE_TOKEN_FILE"); env != nullptr) token_file = env;
  token_file = args->Value("token-file").value_or(token_file);
  const Invocation invocation{*args, address, timeout, args->Has("json"), *tls, token_file};
  return command->run(invocation);
}

}  // namespace
}  // namespace lapse::cli

int main(int argc, char** argv) {
  return lapse::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}

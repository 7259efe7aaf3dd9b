// What every lapsectl command is built from: the Command table entry (its
// name, arguments, help text and flags, next to the function that runs it),
// the Invocation it runs with, and the helpers that keep their output and exit
// statuses alike.
//
//   int RunInfo(const Invocation& in) {
//     absl::StatusOr<client::CollectionInfo> info =
//         in.NewClient()->GetCollection(in.positional()[0]);
//     if (!info.ok()) return Fail("info", info.status());
//     ...
//   }
//   Command InfoCommand() {
//     return {{"info", "COLLECTION", "Show a collection's counts", "", {}, 1, 1},
//             &RunInfo};
//   }
//
// Each command group lives in its own file and hands its commands to the
// table in lapsectl_main.cc. Not thread-safe: lapsectl runs one command on its
// main thread (watch's handlers aside, which only write output).
#ifndef LAPSE_CLIENT_LAPSECTL_COMMAND_H_
#define LAPSE_CLIENT_LAPSECTL_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "lapse/client.h"

namespace lapse::cli {

inline constexpr char kProgram[] = "lapsectl";

enum ExitCode { kOk = 0, kUnmet = 1, kError = 2 };

// What a command runs with.
struct Invocation {
  const ParsedArgs& args;
  std::string address;
  absl::Duration timeout;
  bool json = false;
  // --tls-ca, --tls-cert, --tls-key, --tls-server-name; unset: plaintext.
  std::optional<client::TlsOptions> tls;
  // Empty: no bearer token.
  std::string token_file;

  const std::vector<std::string>& positional() const { return args.positional(); }
  client::ClientOptions Options() const {
    client::ClientOptions options;
    options.default_timeout = timeout;
    options.tls = tls;
    options.bearer_token_file = token_file;
    return options;
  }
  std::unique_ptr<client::Client> NewClient() const {
    return std::make_unique<client::Client>(address, Options());
  }
};

// A subcommand: how it is called and described, and what runs it.
struct Command {
  CommandSpec spec;
  int (*run)(const Invocation&);
};

// The command groups, each in its own file, in the order of lapsectl --help.
std::vector<Command> MemberCommands();
std::vector<Command> CollectionCommands();
Command WatchCommand();
std::vector<Command> GroupCommands();
Command ConsumeCommand();
Command HealthCommand();

// Reports bad usage of `command` on stderr; returns kError.
int UsageError(absl::string_view command, absl::string_view message);

// Reports a failed call; NOT_FOUND and FAILED_PRECONDITION are "not found or
// condition not met", anything else an error.
int Fail(absl::string_view command, const absl::Status& status);

void WriteStdout(absl::string_view text);

// --collections=A,B and --prefix=P, at most one of them, as `collections`
// and `prefix`; INVALID_ARGUMENT for the user otherwise.
absl::Status FilterFlags(const ParsedArgs& args, std::vector<std::string>* collections,
                         std::string* prefix);

// An event as watch and consume print it: a line of the table whose header
// is EventHeader(values), or with `json` one JSON object (the sequence as a
// string, as in protobuf's JSON: sequences exceed 2^53).
std::string EventHeader(bool values);
std::string EventLine(const client::ExpiryEvent& event, bool json, bool values);

// The flags of a listing command.
struct Paging {
  // --limit, or "no limit".
  uint64_t limit = UINT64_MAX;
  // --page-size, or 0 (the server's default).
  int page_size = 0;
};
absl::StatusOr<Paging> PagingFlags(const ParsedArgs& args);

// The rows of an answer: a table for people, JSON lines for scripts.
class Answer final {
 public:
  Answer(bool json, std::vector<std::string> header) : json_(json), table_(std::move(header)) {}

  void Row(std::vector<std::string> cells, const JsonObject& object) {
    if (json_) {
      absl::StrAppend(&json_lines_, object.str(), "\n");
    } else {
      table_.AddRow(std::move(cells));
    }
  }

  void Print() const { WriteStdout(json_ ? json_lines_ : table_.Render()); }

 private:
  const bool json_;
  Table table_;
  std::string json_lines_;
};

// Shows a listing page by page until `limit` items were shown or no page is
// left: `fetch()` returns the page at *page_token, `show(item)` adds an
// item's row to `answer`, which is printed at the end. Returns kOk, or what
// Fail(command, ...) returns for a page that could not be fetched (and then
// prints nothing).
template <typename Page, typename Item, typename Fetch, typename Show>
int ShowPages(absl::string_view command, uint64_t limit, std::string* page_token,
              std::vector<Item> Page::*items, Fetch fetch, Show show, const Answer& answer) {
  uint64_t listed = 0;
  do {
    absl::StatusOr<Page> page = fetch();
    if (!page.ok()) return Fail(command, page.status());
    for (const Item& item : (*page).*items) {
      if (listed == limit) break;
      ++listed;
      show(item);
    }
    *page_token = page->next_page_token;
  } while (!page_token->empty() && listed < limit);
  answer.Print();
  return kOk;
}

}  // namespace lapse::cli

#endif  // LAPSE_CLIENT_LAPSECTL_COMMAND_H_

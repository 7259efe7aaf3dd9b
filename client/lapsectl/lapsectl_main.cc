// lapsectl: the command-line client of lapse.
//
//   lapsectl put unpaid:user-42 order-17 '{"total":12}' --ttl=30m
//   lapsectl ttl unpaid:user-42 order-17
//   lapsectl watch --prefix=unpaid: --json
//
// One subcommand per RPC (plus ttl, watch and health), each with --help.
// Output is a table for people or, with --json, one JSON object per line.
// Exit status: 0 ok; 1 not found, condition not met or skipped; 2 error (bad
// usage, RPC failure). The server is --addr, else $LAPSE_ADDR, else
// 127.0.0.1:50051.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

using client::Client;
using client::ClientOptions;
using client::Expiration;

constexpr char kProgram[] = "lapsectl";
constexpr char kDefaultAddress[] = "127.0.0.1:50051";

enum ExitCode { kOk = 0, kUnmet = 1, kError = 2 };

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const flags = new std::vector<FlagSpec>{
      {"addr", "HOST:PORT",
       absl::StrCat("Server address (default $LAPSE_ADDR, else ",
                    kDefaultAddress, ")")},
      {"timeout", "DURATION", "Deadline of each call, retries included (10s)"},
      {"json", "", "One JSON object per line instead of a table"},
      {"help", "", "Show help"},
  };
  return *flags;
}

// What a command runs with.
struct Invocation {
  const ParsedArgs& args;
  std::string address;
  absl::Duration timeout;
  bool json = false;

  const std::vector<std::string>& positional() const {
    return args.positional();
  }
  std::unique_ptr<Client> NewClient() const {
    ClientOptions options;
    options.default_timeout = timeout;
    return std::make_unique<Client>(address, options);
  }
};

int UsageError(absl::string_view command, absl::string_view message) {
  std::fprintf(stderr, "%s %s: %s\nRun '%s %s --help' for usage.\n", kProgram,
               std::string(command).c_str(), std::string(message).c_str(),
               kProgram, std::string(command).c_str());
  return kError;
}

// Reports a failed call; NOT_FOUND and FAILED_PRECONDITION are "not found or
// condition not met", anything else an error.
int Fail(absl::string_view command, const absl::Status& status) {
  std::fprintf(stderr, "%s %s: %s: %s\n", kProgram,
               std::string(command).c_str(),
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kNotFound ||
                 status.code() == absl::StatusCode::kFailedPrecondition
             ? kUnmet
             : kError;
}

void WriteStdout(absl::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

// The rows of an answer: a table for people, JSON lines for scripts.
class Answer final {
 public:
  Answer(bool json, std::vector<std::string> header)
      : json_(json), table_(std::move(header)) {}

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

// --ttl / --at (or --refresh-ttl / --refresh-at): at most one.
absl::StatusOr<Expiration> ExpirationFlags(const ParsedArgs& args,
                                           absl::string_view ttl_flag,
                                           absl::string_view at_flag) {
  const std::optional<std::string> ttl = args.Value(ttl_flag);
  const std::optional<std::string> at = args.Value(at_flag);
  if (ttl.has_value() && at.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", ttl_flag, " and --", at_flag, " cannot be used together"));
  }
  if (ttl.has_value()) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag(ttl_flag, *ttl);
    if (!d.ok()) return d.status();
    return Expiration::Ttl(*d);
  }
  if (at.has_value()) {
    absl::StatusOr<absl::Time> t = ParseTimeFlag(at_flag, *at);
    if (!t.ok()) return t.status();
    return Expiration::At(*t);
  }
  return Expiration::None();
}

absl::StatusOr<std::string> ReadValueFile(const std::string& path) {
  if (path == "-") {
    std::string value((std::istreambuf_iterator<char>(std::cin)),
                      std::istreambuf_iterator<char>());
    if (std::cin.bad()) {
      return absl::InvalidArgumentError("--value-file=-: cannot read stdin");
    }
    return value;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--value-file=", path, ": cannot open: ", std::strerror(errno)));
  }
  return std::string((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>());
}

std::vector<std::string> Keys(const Invocation& in) {
  return std::vector<std::string>(in.positional().begin() + 1,
                                  in.positional().end());
}

// ---- Commands ---------------------------------------------------------------

const char* PutOutcomeName(client::PutOutcome outcome) {
  switch (outcome) {
    case client::PutOutcome::kCreated:
      return "created";
    case client::PutOutcome::kReplaced:
      return "replaced";
    case client::PutOutcome::kSkipped:
      break;
  }
  return "skipped";
}

int RunPut(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::MemberWrite write;
  write.key = in.positional()[1];
  if (args.Has("value-file")) {
    if (in.positional().size() == 3) {
      return UsageError("put", "give VALUE or --value-file, not both");
    }
    absl::StatusOr<std::string> value = ReadValueFile(*args.Value("value-file"));
    if (!value.ok()) return UsageError("put", value.status().message());
    write.value = *std::move(value);
  } else if (in.positional().size() == 3) {
    write.value = in.positional()[2];
  }
  absl::StatusOr<Expiration> expiration = ExpirationFlags(args, "ttl", "at");
  if (!expiration.ok()) return UsageError("put", expiration.status().message());
  write.expiration = *expiration;
  if (args.Has("if-absent") && args.Has("if-present")) {
    return UsageError("put", "--if-absent and --if-present cannot be used together");
  }
  if (args.Has("if-absent")) write.condition = client::PutCondition::kIfAbsent;
  if (args.Has("if-present")) write.condition = client::PutCondition::kIfPresent;
  if (args.Has("keep-ttl")) {
    if (write.expiration.kind() != Expiration::Kind::kNone) {
      return UsageError("put", "--keep-ttl cannot be combined with --ttl or --at");
    }
    write.keep_expiration = true;
  }
  client::PutOptions options;
  if (const std::optional<std::string> max = args.Value("max-members")) {
    absl::StatusOr<uint64_t> n = ParseNumberFlag("max-members", *max, 1, UINT32_MAX);
    if (!n.ok()) return UsageError("put", n.status().message());
    options.max_members = static_cast<uint32_t>(*n);
  }

  absl::StatusOr<std::vector<client::PutResult>> results =
      in.NewClient()->PutMembers(in.positional()[0], {write}, options);
  if (!results.ok()) return Fail("put", results.status());
  Answer answer(in.json, {"KEY", "OUTCOME", "EXPIRE_TIME"});
  int code = kOk;
  for (const client::PutResult& result : *results) {
    if (result.outcome == client::PutOutcome::kSkipped) code = kUnmet;
    answer.Row({DisplayValue(result.key), PutOutcomeName(result.outcome),
                FormatExpireTime(result.expire_time)},
               JsonObject()
                   .AddBytes("key", result.key)
                   .Add("outcome", PutOutcomeName(result.outcome))
                   .AddTime("expire_time", result.expire_time));
  }
  answer.Print();
  return code;
}

int RunGet(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::GetOptions options;
  absl::StatusOr<Expiration> refresh =
      ExpirationFlags(args, "refresh-ttl", "refresh-at");
  if (!refresh.ok()) return UsageError("get", refresh.status().message());
  options.refresh = *refresh;
  const bool raw = args.Has("raw");
  if (raw && (in.positional().size() != 2 || in.json)) {
    return UsageError("get", "--raw takes exactly one KEY and no --json");
  }
  absl::StatusOr<std::vector<client::GetResult>> results =
      in.NewClient()->GetMembers(in.positional()[0], Keys(in), options);
  if (!results.ok()) return Fail("get", results.status());
  if (raw) {
    const client::GetResult& result = (*results)[0];
    if (!result.found) return kUnmet;
    WriteStdout(result.member.value);
    return kOk;
  }
  Answer answer(in.json, {"KEY", "VALUE", "EXPIRE_TIME"});
  int code = kOk;
  for (const client::GetResult& result : *results) {
    const client::Member& member = result.member;
    JsonObject object;
    object.AddBytes("key", member.key).Add("found", result.found);
    if (!result.found) {
      code = kUnmet;
      answer.Row({DisplayValue(member.key), "(not found)", "-"}, object);
      continue;
    }
    object.AddBytes("value", member.value).AddTime("expire_time", member.expire_time);
    answer.Row({DisplayValue(member.key), DisplayValue(member.value),
                FormatExpireTime(member.expire_time)},
               object);
  }
  answer.Print();
  return code;
}

int RunRemove(const Invocation& in) {
  absl::StatusOr<std::vector<client::RemoveResult>> results =
      in.NewClient()->RemoveMembers(in.positional()[0], Keys(in));
  if (!results.ok()) return Fail("rm", results.status());
  Answer answer(in.json, {"KEY", "REMOVED"});
  int code = kOk;
  for (const client::RemoveResult& result : *results) {
    if (!result.existed) code = kUnmet;
    answer.Row({DisplayValue(result.key), result.existed ? "yes" : "no (not found)"},
               JsonObject().AddBytes("key", result.key).Add("removed", result.existed));
  }
  answer.Print();
  return code;
}

const char* ExpireOutcomeName(client::ExpireOutcome outcome) {
  switch (outcome) {
    case client::ExpireOutcome::kUpdated:
      return "updated";
    case client::ExpireOutcome::kConditionNotMet:
      return "condition_not_met";
    case client::ExpireOutcome::kNotFound:
      return "not_found";
    case client::ExpireOutcome::kExpired:
      break;
  }
  return "expired";
}

int RunExpire(const Invocation& in) {
  const ParsedArgs& args = in.args;
  absl::StatusOr<Expiration> expiration = ExpirationFlags(args, "ttl", "at");
  if (!expiration.ok()) return UsageError("expire", expiration.status().message());
  if (expiration->kind() == Expiration::Kind::kNone) {
    return UsageError("expire", "give the new deadline with --ttl or --at");
  }
  client::ExpireCondition condition = client::ExpireCondition::kAlways;
  int conditions = 0;
  for (const auto& [flag, value] :
       {std::pair{"nx", client::ExpireCondition::kIfNoExpiration},
        std::pair{"xx", client::ExpireCondition::kIfHasExpiration},
        std::pair{"gt", client::ExpireCondition::kIfLater},
        std::pair{"lt", client::ExpireCondition::kIfEarlier}}) {
    if (args.Has(flag)) {
      condition = value;
      ++conditions;
    }
  }
  if (conditions > 1) {
    return UsageError("expire", "--nx, --xx, --gt and --lt are exclusive");
  }
  absl::StatusOr<std::vector<client::ExpireResult>> results =
      in.NewClient()->ExpireMembers(in.positional()[0], Keys(in), *expiration,
                                    condition);
  if (!results.ok()) return Fail("expire", results.status());
  Answer answer(in.json, {"KEY", "OUTCOME", "EXPIRE_TIME"});
  int code = kOk;
  for (const client::ExpireResult& result : *results) {
    if (result.outcome == client::ExpireOutcome::kConditionNotMet ||
        result.outcome == client::ExpireOutcome::kNotFound) {
      code = kUnmet;
    }
    answer.Row({DisplayValue(result.key), ExpireOutcomeName(result.outcome),
                FormatExpireTime(result.expire_time)},
               JsonObject()
                   .AddBytes("key", result.key)
                   .Add("outcome", ExpireOutcomeName(result.outcome))
                   .AddTime("expire_time", result.expire_time));
  }
  answer.Print();
  return code;
}

const char* PersistOutcomeName(client::PersistOutcome outcome) {
  switch (outcome) {
    case client::PersistOutcome::kPersisted:
      return "persisted";
    case client::PersistOutcome::kNoExpiration:
      return "no_expiration";
    case client::PersistOutcome::kNotFound:
      break;
  }
  return "not_found";
}

int RunPersist(const Invocation& in) {
  absl::StatusOr<std::vector<client::PersistResult>> results =
      in.NewClient()->PersistMembers(in.positional()[0], Keys(in));
  if (!results.ok()) return Fail("persist", results.status());
  Answer answer(in.json, {"KEY", "OUTCOME"});
  int code = kOk;
  for (const client::PersistResult& result : *results) {
    if (result.outcome == client::PersistOutcome::kNotFound) code = kUnmet;
    answer.Row({DisplayValue(result.key), PersistOutcomeName(result.outcome)},
               JsonObject()
                   .AddBytes("key", result.key)
                   .Add("outcome", PersistOutcomeName(result.outcome)));
  }
  answer.Print();
  return code;
}

int RunTtl(const Invocation& in) {
  absl::StatusOr<std::vector<client::GetResult>> results =
      in.NewClient()->GetMembers(in.positional()[0], Keys(in));
  if (!results.ok()) return Fail("ttl", results.status());
  const absl::Time now = absl::Now();
  Answer answer(in.json, {"KEY", "TTL", "EXPIRE_TIME"});
  int code = kOk;
  for (const client::GetResult& result : *results) {
    const client::Member& member = result.member;
    JsonObject object;
    object.AddBytes("key", member.key).Add("found", result.found);
    if (!result.found) {
      code = kUnmet;
      answer.Row({DisplayValue(member.key), "(not found)", "-"}, object);
      continue;
    }
    object.AddTime("expire_time", member.expire_time);
    if (!member.expire_time.has_value()) {
      answer.Row({DisplayValue(member.key), "persistent", "-"}, object);
      continue;
    }
    const absl::Duration remaining =
        std::max(*member.expire_time - now, absl::ZeroDuration());
    object.Add("ttl_ms", absl::ToInt64Milliseconds(remaining));
    answer.Row({DisplayValue(member.key), FormatRemaining(*member.expire_time, now),
                FormatTimestamp(*member.expire_time)},
               object);
  }
  answer.Print();
  return code;
}

// --limit as a count, or "no limit".
absl::StatusOr<uint64_t> Limit(const ParsedArgs& args) {
  const std::optional<std::string> limit = args.Value("limit");
  if (!limit.has_value()) return UINT64_MAX;
  return ParseNumberFlag("limit", *limit, 1, UINT64_MAX);
}

absl::StatusOr<int> PageSize(const ParsedArgs& args) {
  const std::optional<std::string> size = args.Value("page-size");
  if (!size.has_value()) return 0;
  absl::StatusOr<uint64_t> n = ParseNumberFlag("page-size", *size, 1, INT32_MAX);
  if (!n.ok()) return n.status();
  return static_cast<int>(*n);
}

int RunList(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::ListMembersOptions options;
  const std::string by = args.Value("by").value_or("key");
  if (by == "expire") {
    options.order_by = client::MemberOrder::kExpireTime;
  } else if (by != "key") {
    return UsageError("ls", absl::StrCat("--by=", by, ": expected key or expire"));
  }
  options.keys_only = args.Has("keys-only");
  absl::StatusOr<uint64_t> limit = Limit(args);
  if (!limit.ok()) return UsageError("ls", limit.status().message());
  absl::StatusOr<int> page_size = PageSize(args);
  if (!page_size.ok()) return UsageError("ls", page_size.status().message());
  options.page_size = *page_size;

  std::unique_ptr<Client> client = in.NewClient();
  Answer answer(in.json, options.keys_only
                             ? std::vector<std::string>{"KEY", "EXPIRE_TIME"}
                             : std::vector<std::string>{"KEY", "VALUE", "EXPIRE_TIME"});
  uint64_t listed = 0;
  do {
    absl::StatusOr<client::MemberPage> page =
        client->ListMembers(in.positional()[0], options);
    if (!page.ok()) return Fail("ls", page.status());
    for (const client::Member& member : page->members) {
      if (listed == *limit) break;
      ++listed;
      JsonObject object;
      object.AddBytes("key", member.key);
      std::vector<std::string> cells = {DisplayValue(member.key)};
      if (!options.keys_only) {
        object.AddBytes("value", member.value);
        cells.push_back(DisplayValue(member.value));
      }
      object.AddTime("expire_time", member.expire_time);
      cells.push_back(FormatExpireTime(member.expire_time));
      answer.Row(std::move(cells), object);
    }
    options.page_token = page->next_page_token;
  } while (!options.page_token.empty() && listed < *limit);
  answer.Print();
  return kOk;
}

void AddCollectionRow(const client::CollectionInfo& info, Answer& answer) {
  answer.Row({DisplayValue(info.name), absl::StrCat(info.member_count),
              absl::StrCat(info.expiring_count),
              FormatExpireTime(info.next_expire_time)},
             JsonObject()
                 .AddBytes("name", info.name)
                 .Add("member_count", info.member_count)
                 .Add("expiring_count", info.expiring_count)
                 .AddTime("next_expire_time", info.next_expire_time));
}

const std::vector<std::string>& CollectionHeader() {
  static const std::vector<std::string>* const header = new std::vector<std::string>{
      "NAME", "MEMBERS", "EXPIRING", "NEXT_EXPIRE_TIME"};
  return *header;
}

int RunInfo(const Invocation& in) {
  absl::StatusOr<client::CollectionInfo> info =
      in.NewClient()->GetCollection(in.positional()[0]);
  if (!info.ok()) return Fail("info", info.status());
  Answer answer(in.json, CollectionHeader());
  AddCollectionRow(*info, answer);
  answer.Print();
  return kOk;
}

int RunCollections(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::ListCollectionsOptions options;
  options.prefix = args.Value("prefix").value_or("");
  absl::StatusOr<uint64_t> limit = Limit(args);
  if (!limit.ok()) return UsageError("collections", limit.status().message());
  absl::StatusOr<int> page_size = PageSize(args);
  if (!page_size.ok()) return UsageError("collections", page_size.status().message());
  options.page_size = *page_size;

  std::unique_ptr<Client> client = in.NewClient();
  Answer answer(in.json, CollectionHeader());
  uint64_t listed = 0;
  do {
    absl::StatusOr<client::CollectionPage> page = client->ListCollections(options);
    if (!page.ok()) return Fail("collections", page.status());
    for (const client::CollectionInfo& info : page->collections) {
      if (listed == *limit) break;
      ++listed;
      AddCollectionRow(info, answer);
    }
    options.page_token = page->next_page_token;
  } while (!options.page_token.empty() && listed < *limit);
  answer.Print();
  return kOk;
}

int RunDrop(const Invocation& in) {
  const std::string& name = in.positional()[0];
  absl::StatusOr<uint64_t> removed = in.NewClient()->DeleteCollection(name);
  if (!removed.ok()) return Fail("drop", removed.status());
  Answer answer(in.json, {"COLLECTION", "REMOVED_MEMBERS"});
  answer.Row({DisplayValue(name), absl::StrCat(*removed)},
             JsonObject().AddBytes("collection", name).Add("removed_count", *removed));
  answer.Print();
  if (*removed == 0) {
    std::fprintf(stderr, "%s drop: collection \"%s\" not found\n", kProgram,
                 DisplayValue(name).c_str());
    return kUnmet;
  }
  return kOk;
}

// ---- watch ------------------------------------------------------------------

// Written by the stop signals' handler (and by the watch's error handler) to
// wake the main thread; a pipe because write() is async-signal-safe.
int g_wake_fd = -1;

void OnStopSignal(int) {
  const char byte = 's';
  if (write(g_wake_fd, &byte, 1) < 0) {
    // Nothing to do: the pipe already holds a wake-up.
  }
}

std::string EventLine(const client::ExpiryEvent& event, bool json, bool values) {
  if (json) {
    // Sequences exceed 2^53, so they are strings, as in protobuf's JSON.
    JsonObject object;
    object.Add("sequence", absl::StrCat(event.sequence))
        .AddBytes("collection", event.collection)
        .AddBytes("key", event.key);
    if (values) object.AddBytes("value", event.value);
    object.AddTime("expire_time", event.expire_time)
        .AddTime("expired_at", event.expired_at);
    return object.str() + "\n";
  }
  std::vector<std::string> cells = {
      absl::StrCat(event.sequence), DisplayValue(event.collection),
      DisplayValue(event.key), FormatTimestamp(event.expire_time),
      FormatTimestamp(event.expired_at)};
  if (values) cells.push_back(DisplayValue(event.value));
  return absl::StrJoin(cells, "  ") + "\n";
}

int RunWatch(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::WatchOptions options;
  if (args.Has("collections") && args.Has("prefix")) {
    return UsageError("watch", "--collections and --prefix cannot be used together");
  }
  if (const std::optional<std::string> names = args.Value("collections")) {
    options.collections = absl::StrSplit(*names, ',', absl::SkipEmpty());
    if (options.collections.empty()) {
      return UsageError("watch", "--collections: give at least one name");
    }
  }
  options.collection_prefix = args.Value("prefix").value_or("");
  options.include_values = args.Has("values");
  if (args.Has("from") && args.Has("oldest")) {
    return UsageError("watch", "--from and --oldest cannot be used together");
  }
  std::string start = "new events";
  if (const std::optional<std::string> from = args.Value("from")) {
    absl::StatusOr<uint64_t> sequence = ParseNumberFlag("from", *from, 0, UINT64_MAX);
    if (!sequence.ok()) return UsageError("watch", sequence.status().message());
    options.start = client::StartPosition::kAfterSequence;
    options.after_sequence = *sequence;
    start = absl::StrCat("after sequence ", *sequence);
  } else if (args.Has("oldest")) {
    options.start = client::StartPosition::kOldest;
    start = "the oldest retained event";
  }

  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    return Fail("watch", absl::InternalError(std::strerror(errno)));
  }
  g_wake_fd = wake[1];
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  // The handlers run on the subscription's thread, one at a time; the main
  // thread reads what they wrote only after Cancel() has joined that thread.
  uint64_t events = 0;
  int connections = 0;
  absl::Status error;
  const bool json = in.json;
  const bool values = options.include_values;
  const std::string address = in.address;
  client::WatchHandlers handlers;
  handlers.on_event = [&events, json, values](const client::ExpiryEvent& event) {
    WriteStdout(EventLine(event, json, values));
    std::fflush(stdout);
    ++events;
  };
  handlers.on_connected = [&connections, address, start] {
    if (connections++ == 0) {
      std::fprintf(stderr, "%s: watching %s from %s; stop with Ctrl-C\n",
                   kProgram, address.c_str(), start.c_str());
    } else {
      std::fprintf(stderr, "%s: reconnected\n", kProgram);
    }
  };
  handlers.on_reconnecting = [](const absl::Status& status) {
    std::fprintf(stderr, "%s: stream interrupted (%s); reconnecting\n", kProgram,
                 status.ToString().c_str());
  };
  handlers.on_error = [&error](const absl::Status& status) {
    error = status;
    OnStopSignal(0);
  };

  if (!json) {
    WriteStdout(absl::StrCat("SEQUENCE  COLLECTION  KEY  EXPIRE_TIME  EXPIRED_AT",
                             values ? "  VALUE" : "", "\n"));
    std::fflush(stdout);
  }
  std::unique_ptr<Client> client = in.NewClient();
  absl::StatusOr<std::unique_ptr<client::Subscription>> subscription =
      client->Watch(options, std::move(handlers));
  if (!subscription.ok()) return Fail("watch", subscription.status());
  char byte;
  while (read(wake[0], &byte, 1) < 0 && errno == EINTR) {
  }
  (*subscription)->Cancel();

  const uint64_t position = (*subscription)->position();
  std::fprintf(stderr, "%s: received %llu event%s", kProgram,
               static_cast<unsigned long long>(events), events == 1 ? "" : "s");
  if (position != 0) {
    std::fprintf(stderr, "; resume with --from=%llu",
                 static_cast<unsigned long long>(position));
  }
  std::fputc('\n', stderr);
  if (!error.ok()) return Fail("watch", error);
  return kOk;
}

// ---- health -----------------------------------------------------------------

int RunHealth(const Invocation& in) {
  const std::string service = in.args.Value("service").value_or("");
  std::unique_ptr<grpc::health::v1::Health::Stub> stub =
      grpc::health::v1::Health::NewStub(
          grpc::CreateChannel(in.address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + in.timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  std::string name;
  if (status.ok()) {
    name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
        response.status());
  } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    name = "SERVICE_UNKNOWN";
  } else {
    return Fail("health", absl::Status(static_cast<absl::StatusCode>(
                                           status.error_code()),
                                       status.error_message()));
  }
  Answer answer(in.json, {"SERVICE", "STATUS"});
  answer.Row({service.empty() ? "(server)" : service, name},
             JsonObject().Add("service", service).Add("status", name));
  answer.Print();
  return name == "SERVING" ? kOk : kUnmet;
}

// ---- The command table ------------------------------------------------------

struct Command {
  CommandSpec spec;
  int (*run)(const Invocation&);
};

const std::vector<Command>& Commands() {
  const std::string kExpirationHelp =
      "Durations look like 1500ms, 30s, 30m or 1h30m; times are RFC 3339, "
      "e.g.\n2025-01-02T15:04:05Z or 2025-01-02T17:04:05+02:00.\n";
  static const std::vector<Command>* const commands = new std::vector<Command>{
      {{"put", "COLLECTION KEY [VALUE]", "Write a member (PutMembers)",
        absl::StrCat(
            "Without VALUE or --value-file the value is empty. Without --ttl or "
            "--at the\nmember is persistent. Exit status 1 when a condition "
            "skipped the write or\n--max-members would be exceeded.\n",
            kExpirationHelp),
        {{"ttl", "DURATION", "Expire this long from now"},
         {"at", "TIME", "Expire at this time"},
         {"if-absent", "", "Write only if the member does not exist (HSETNX)"},
         {"if-present", "", "Write only if the member exists"},
         {"keep-ttl", "", "Keep the existing member's deadline (KEEPTTL)"},
         {"max-members", "N",
          "Fail, writing nothing, if the collection would exceed N members"},
         {"value-file", "PATH", "Read the value from PATH ('-': stdin), for binary"}},
        2, 3},
       &RunPut},
      {{"get", "COLLECTION KEY...", "Read members (GetMembers)",
        absl::StrCat("Exit status 1 when a key is not found.\n", kExpirationHelp),
        {{"refresh-ttl", "DURATION", "Also move found members' deadline (HGETEX)"},
         {"refresh-at", "TIME", "Also move found members' deadline to TIME"},
         {"raw", "", "Write only the value's bytes (one KEY)"}},
        2, -1},
       &RunGet},
      {{"rm", "COLLECTION KEY...", "Remove members, without expiry events (RemoveMembers)",
        "Exit status 1 when a key did not exist.\n", {}, 2, -1},
       &RunRemove},
      {{"expire", "COLLECTION KEY...", "Set members' deadline (ExpireMembers)",
        absl::StrCat("A deadline in the past expires the members now, with their "
                     "events. Exit status 1\nwhen a key is not found or its "
                     "condition does not hold.\n",
                     kExpirationHelp),
        {{"ttl", "DURATION", "Expire this long from now"},
         {"at", "TIME", "Expire at this time"},
         {"nx", "", "Only members without a deadline"},
         {"xx", "", "Only members with a deadline"},
         {"gt", "", "Only if the new deadline is later (none counts as latest)"},
         {"lt", "", "Only if the new deadline is earlier"}},
        2, -1},
       &RunExpire},
      {{"persist", "COLLECTION KEY...", "Clear members' deadline (PersistMembers)",
        "Exit status 1 when a key is not found.\n", {}, 2, -1},
       &RunPersist},
      {{"ttl", "COLLECTION KEY...", "Show members' remaining time and deadline",
        "Exit status 1 when a key is not found.\n", {}, 2, -1},
       &RunTtl},
      {{"ls", "COLLECTION", "List a collection's members (ListMembers)", "",
        {{"by", "key|expire", "Order by key (default) or by deadline"},
         {"keys-only", "", "Leave values out"},
         {"limit", "N", "Stop after N members"},
         {"page-size", "N", "Members per call"}},
        1, 1},
       &RunList},
      {{"info", "COLLECTION", "Show a collection's counts (GetCollection)",
        "Exit status 1 when the collection does not exist.\n", {}, 1, 1},
       &RunInfo},
      {{"collections", "", "List collections (ListCollections)", "",
        {{"prefix", "PREFIX", "Only names starting with PREFIX"},
         {"limit", "N", "Stop after N collections"},
         {"page-size", "N", "Collections per call"}},
        0, 0},
       &RunCollections},
      {{"drop", "COLLECTION", "Delete a collection, without expiry events (DeleteCollection)",
        "Exit status 1 when the collection did not exist.\n", {}, 1, 1},
       &RunDrop},
      {{"watch", "", "Stream expiry events (WatchExpirations)",
        "Streams until Ctrl-C (SIGINT) or SIGTERM, then prints on stderr how many "
        "events\narrived and the --from that resumes after them, and exits 0. "
        "Reconnects by\nitself after a broken connection or a server restart, "
        "with no gap and no\nduplicate; exits 2 if the server no longer holds "
        "events it needs (OUT_OF_RANGE).\nWith --json each event is a line "
        "(sequence as a string), flushed at once.\n",
        {{"collections", "A,B", "Only these collections"},
         {"prefix", "PREFIX", "Only collections starting with PREFIX"},
         {"values", "", "Include member values"},
         {"from", "SEQUENCE", "Start right after SEQUENCE (resume)"},
         {"oldest", "", "Start from the oldest event the server holds"}},
        0, 0},
       &RunWatch},
      {{"health", "", "Check the server's health (grpc.health.v1)",
        "Exit status 0 when SERVING, 1 otherwise.\n",
        {{"service", "NAME", "A service, e.g. lapse.v1.LapseService (default: the server)"}},
        0, 0},
       &RunHealth},
  };
  return *commands;
}

std::string ToolHelp() {
  std::string out = absl::StrCat(
      "lapsectl: the command-line client of lapse (expiring collections over gRPC).\n\n"
      "Usage: ", kProgram, " [GLOBAL FLAGS] COMMAND [FLAGS] [ARGS...]\n\nCommands:\n");
  for (const Command& command : Commands()) {
    absl::StrAppend(&out, "  ", command.spec.name,
                    std::string(13 - command.spec.name.size(), ' '),
                    command.spec.summary, "\n");
  }
  absl::StrAppend(
      &out, "  help         Show this help, or a command's (help COMMAND)\n\n"
      "Global flags:\n",
      FlagsHelp(GlobalFlags()),
      "\nDurations: 1500ms, 30s, 30m, 1h30m. Times: RFC 3339 "
      "(2025-01-02T15:04:05Z).\n"
      "Exit status: 0 ok; 1 not found, condition not met or skipped; 2 error "
      "(bad usage,\nRPC failure).\nRun 'lapsectl COMMAND --help' for a "
      "command's flags.\n");
  return out;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.spec.name == name) return &command;
  }
  return nullptr;
}

int Main(const std::vector<std::string>& argv) {
  auto [name, rest] = SplitCommand(GlobalFlags(), argv);
  if (name == "help") {
    if (rest.empty()) {
      WriteStdout(ToolHelp());
      return kOk;
    }
    const Command* command = FindCommand(rest[0]);
    if (command == nullptr) {
      return UsageError("help", absl::StrCat("unknown command '", rest[0], "'"));
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
    std::fprintf(stderr, "%s: no command given\n\n%s", kProgram,
                 ToolHelp().c_str());
    return kError;
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "%s: unknown command '%s'\nRun '%s --help' for usage.\n",
                 kProgram, name.c_str(), kProgram);
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
  const Invocation invocation{*args, address, timeout, args->Has("json")};
  return command->run(invocation);
}

}  // namespace
}  // namespace lapse::cli

int main(int argc, char** argv) {
  return lapse::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}

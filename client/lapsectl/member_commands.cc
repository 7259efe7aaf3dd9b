// lapsectl's member commands: put, get, rm, expire, persist, ttl and ls, each
// with its flags and help beside the function that runs it.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

using client::Client;
using client::Expiration;

const char kExpirationHelp[] =
    "Durations look like 1500ms, 30s, 30m or 1h30m; times are RFC 3339, "
    "e.g.\n2025-01-02T15:04:05Z or 2025-01-02T17:04:05+02:00.\n";

// --ttl / --at (or --refresh-ttl / --refresh-at): at most one.
absl::StatusOr<Expiration> ExpirationFlags(const ParsedArgs& args, absl::string_view ttl_flag,
                                           absl::string_view at_flag) {
  const std::optional<std::string> ttl = args.Value(ttl_flag);
  const std::optional<std::string> at = args.Value(at_flag);
  if (ttl.has_value() && at.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", ttl_flag, " and --", at_flag, " cannot be used together"));
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
    std::string value((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) {
      return absl::InvalidArgumentError("--value-file=-: cannot read stdin");
    }
    return value;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("--value-file=", path, ": cannot open: ", std::strerror(errno)));
  }
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

std::vector<std::string> Keys(const Invocation& in) {
  return std::vector<std::string>(in.positional().begin() + 1, in.positional().end());
}

// The row of a per-key outcome and the deadline the call left.
void AddOutcomeRow(const std::string& key, const char* outcome,
                   const std::optional<absl::Time>& expire_time, Answer& answer) {
  answer.Row({DisplayValue(key), outcome, FormatExpireTime(expire_time)},
             JsonObject()
                 .AddBytes("key", key)
                 .Add("outcome", outcome)
                 .AddTime("expire_time", expire_time));
}

// Starts the JSON object of a GetMembers result; for a key that was not found
// also adds its row and returns false.
bool StartFoundRow(const client::GetResult& result, JsonObject& object, Answer& answer) {
  object.AddBytes("key", result.member.key).Add("found", result.found);
  if (!result.found) answer.Row({DisplayValue(result.member.key), "(not found)", "-"}, object);
  return result.found;
}

// Adds each key's row with `show(result)`, which returns whether the call did
// what was asked for that key, then prints the answer. Returns kUnmet if it did
// not for some key, else kOk.
template <typename Result, typename Show>
int ShowResults(const std::vector<Result>& results, Answer& answer, Show show) {
  int code = kOk;
  for (const Result& result : results) {
    if (!show(result)) code = kUnmet;
  }
  answer.Print();
  return code;
}

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
  return ShowResults(*results, answer, [&](const client::PutResult& result) {
    AddOutcomeRow(result.key, PutOutcomeName(result.outcome), result.expire_time, answer);
    return result.outcome != client::PutOutcome::kSkipped;
  });
}

Command PutCommand() {
  return {{"put",
           "COLLECTION KEY [VALUE]",
           "Write a member (PutMembers)",
           absl::StrCat("Without VALUE or --value-file the value is empty. Without --ttl or "
                        "--at the\nmember is persistent. Exit status 1 when a condition "
                        "skipped the write or\n--max-members would be exceeded.\n",
                        kExpirationHelp),
           {{"ttl", "DURATION", "Expire this long from now"},
            {"at", "TIME", "Expire at this time"},
            {"if-absent", "", "Write only if the member does not exist (HSETNX)"},
            {"if-present", "", "Write only if the member exists"},
            {"keep-ttl", "", "Keep the existing member's deadline (KEEPTTL)"},
            {"max-members", "N", "Fail, writing nothing, if the collection would exceed N members"},
            {"value-file", "PATH", "Read the value from PATH ('-': stdin), for binary"}},
           2,
           3},
          &RunPut};
}

int RunGet(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::GetOptions options;
  absl::StatusOr<Expiration> refresh = ExpirationFlags(args, "refresh-ttl", "refresh-at");
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
  return ShowResults(*results, answer, [&](const client::GetResult& result) {
    const client::Member& member = result.member;
    JsonObject object;
    if (!StartFoundRow(result, object, answer)) return false;
    object.AddBytes("value", member.value).AddTime("expire_time", member.expire_time);
    answer.Row({DisplayValue(member.key), DisplayValue(member.value),
                FormatExpireTime(member.expire_time)},
               object);
    return true;
  });
}

Command GetCommand() {
  return {{"get",
           "COLLECTION KEY...",
           "Read members (GetMembers)",
           absl::StrCat("Exit status 1 when a key is not found.\n", kExpirationHelp),
           {{"refresh-ttl", "DURATION", "Also move found members' deadline (HGETEX)"},
            {"refresh-at", "TIME", "Also move found members' deadline to TIME"},
            {"raw", "", "Write only the value's bytes (one KEY)"}},
           2,
           -1},
          &RunGet};
}

int RunRemove(const Invocation& in) {
  absl::StatusOr<std::vector<client::RemoveResult>> results =
      in.NewClient()->RemoveMembers(in.positional()[0], Keys(in));
  if (!results.ok()) return Fail("rm", results.status());
  Answer answer(in.json, {"KEY", "REMOVED"});
  return ShowResults(*results, answer, [&](const client::RemoveResult& result) {
    answer.Row({DisplayValue(result.key), result.existed ? "yes" : "no (not found)"},
               JsonObject().AddBytes("key", result.key).Add("removed", result.existed));
    return result.existed;
  });
}

Command RemoveCommand() {
  return {{"rm",
           "COLLECTION KEY...",
           "Remove members, without expiry events (RemoveMembers)",
           "Exit status 1 when a key did not exist.\n",
           {},
           2,
           -1},
          &RunRemove};
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
  for (const auto& [flag, value] : {std::pair{"nx", client::ExpireCondition::kIfNoExpiration},
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
      in.NewClient()->ExpireMembers(in.positional()[0], Keys(in), *expiration, condition);
  if (!results.ok()) return Fail("expire", results.status());
  Answer answer(in.json, {"KEY", "OUTCOME", "EXPIRE_TIME"});
  return ShowResults(*results, answer, [&](const client::ExpireResult& result) {
    AddOutcomeRow(result.key, ExpireOutcomeName(result.outcome), result.expire_time, answer);
    return result.outcome != client::ExpireOutcome::kConditionNotMet &&
           result.outcome != client::ExpireOutcome::kNotFound;
  });
}

Command ExpireCommand() {
  return {{"expire",
           "COLLECTION KEY...",
           "Set members' deadline (ExpireMembers)",
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
           2,
           -1},
          &RunExpire};
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
  return ShowResults(*results, answer, [&](const client::PersistResult& result) {
    answer.Row({DisplayValue(result.key), PersistOutcomeName(result.outcome)},
               JsonObject()
                   .AddBytes("key", result.key)
                   .Add("outcome", PersistOutcomeName(result.outcome)));
    return result.outcome != client::PersistOutcome::kNotFound;
  });
}

Command PersistCommand() {
  return {{"persist",
           "COLLECTION KEY...",
           "Clear members' deadline (PersistMembers)",
           "Exit status 1 when a key is not found.\n",
           {},
           2,
           -1},
          &RunPersist};
}

int RunTtl(const Invocation& in) {
  absl::StatusOr<std::vector<client::GetResult>> results =
      in.NewClient()->GetMembers(in.positional()[0], Keys(in));
  if (!results.ok()) return Fail("ttl", results.status());
  const absl::Time now = absl::Now();
  Answer answer(in.json, {"KEY", "TTL", "EXPIRE_TIME"});
  return ShowResults(*results, answer, [&](const client::GetResult& result) {
    const client::Member& member = result.member;
    JsonObject object;
    if (!StartFoundRow(result, object, answer)) return false;
    object.AddTime("expire_time", member.expire_time);
    if (!member.expire_time.has_value()) {
      answer.Row({DisplayValue(member.key), "persistent", "-"}, object);
      return true;
    }
    const absl::Duration remaining = std::max(*member.expire_time - now, absl::ZeroDuration());
    object.Add("ttl_ms", absl::ToInt64Milliseconds(remaining));
    answer.Row({DisplayValue(member.key), FormatRemaining(*member.expire_time, now),
                FormatTimestamp(*member.expire_time)},
               object);
    return true;
  });
}

Command TtlCommand() {
  return {{"ttl",
           "COLLECTION KEY...",
           "Show members' remaining time and deadline",
           "Exit status 1 when a key is not found.\n",
           {},
           2,
           -1},
          &RunTtl};
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
  absl::StatusOr<Paging> paging = PagingFlags(args);
  if (!paging.ok()) return UsageError("ls", paging.status().message());
  options.page_size = paging->page_size;

  std::unique_ptr<Client> client = in.NewClient();
  Answer answer(in.json, options.keys_only
                             ? std::vector<std::string>{"KEY", "EXPIRE_TIME"}
                             : std::vector<std::string>{"KEY", "VALUE", "EXPIRE_TIME"});
  return ShowPages(
      "ls", paging->limit, &options.page_token, &client::MemberPage::members,
      [&] { return client->ListMembers(in.positional()[0], options); },
      [&](const client::Member& member) {
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
      },
      answer);
}

Command ListCommand() {
  return {{"ls",
           "COLLECTION",
           "List a collection's members (ListMembers)",
           "",
           {{"by", "key|expire", "Order by key (default) or by deadline"},
            {"keys-only", "", "Leave values out"},
            {"limit", "N", "Stop after N members"},
            {"page-size", "N", "Members per call"}},
           1,
           1},
          &RunList};
}

}  // namespace

std::vector<Command> MemberCommands() {
  return {PutCommand(),     GetCommand(), RemoveCommand(), ExpireCommand(),
          PersistCommand(), TtlCommand(), ListCommand()};
}

}  // namespace lapse::cli

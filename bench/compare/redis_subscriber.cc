#include "bench/compare/redis_subscriber.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/common/stats.h"
#include "bench/compare/redis_poller.h"

namespace lapse {
namespace compare {

using load::Delivery;
using load::NowMicros;

absl::Status Subscriber::Start() {
  absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
  if (!conn.ok()) return conn.status();
  const std::string channel = o_.mode == Mode::kClassic ? o_.channel : "__keyevent@0__:hexpired";
  ReplyPtr reply = (*conn)->Command({"SUBSCRIBE", channel});
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return absl::UnavailableError(
        absl::StrCat("SUBSCRIBE: ", ReplyError(reply.get()), (*conn)->error()));
  }
  conn_ = std::move(*conn);
  thread_.Start([this] { Run(); });
  return absl::OkStatus();
}

void Subscriber::Stop() {
  thread_.Stop();
  conn_.reset();
}

void Subscriber::Run() {
  std::vector<Delivery> deliveries;
  while (!thread_.stopping()) {
    ReplyPtr reply = conn_->ReplyWithin(absl::Milliseconds(50));
    if (reply == nullptr) {
      if (!conn_->error().empty()) {
        errors_.fetch_add(1);
        return;
      }
      continue;
    }
    const int64_t received_us = NowMicros();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        absl::string_view(reply->element[0]->str, reply->element[0]->len) != "message") {
      continue;
    }
    messages_.fetch_add(1);
    const absl::string_view payload(reply->element[2]->str, reply->element[2]->len);
    deliveries.clear();
    if (o_.mode == Mode::kHfe) {
      deliveries = attribution_->Credit(payload, received_us);
    } else {
      ParseClassic(payload, received_us, &deliveries);
    }
    ledger_->Deliver(deliveries);
  }
}

void Subscriber::ParseClassic(absl::string_view payload, int64_t received_us,
                              std::vector<Delivery>* out) {
  for (absl::string_view line : absl::StrSplit(payload, '\n', absl::SkipEmpty())) {
    PolledMember member;
    if (!ParsePolledLine(line, o_.value_bytes, &member)) {
      ledger_->DeliverUnknown();
      continue;
    }
    if (!member.value_ok) errors_.fetch_add(1);
    out->push_back({member.index, member.deadline_ms * 1000, received_us});
  }
}

}  // namespace compare
}  // namespace lapse

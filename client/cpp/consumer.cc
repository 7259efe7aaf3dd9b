#include "lapse/consumer.h"

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/consume_session.h"
#include "server/base/mutex.h"

namespace lapse::client {
namespace {

using internal::ConsumeSession;

// The longest extension the server grants (lapse.proto, ConsumeRequest).
constexpr absl::Duration kMaxExtension = absl::Hours(12);
using internal::LeaseOp;

// Sends `op` on `delivery` through `session` and waits up to `timeout` for
// its answer.
absl::Status SendAndWait(ConsumeSession& session, LeaseOp op, const Delivery& delivery,
                         absl::Duration extension, absl::Duration timeout) {
  // Shared with the Done, which may run after this call returned.
  struct Waiter {
    Mutex mu;
    CondVar cv;
    std::optional<absl::Status> answer ABSL_GUARDED_BY(mu);
  };
  auto waiter = std::make_shared<Waiter>();
  const absl::Time deadline = absl::Now() + timeout;
  session.Send(op, delivery, extension, [waiter](const absl::Status& answer) {
    MutexLock lock(&waiter->mu);
    waiter->answer = answer;
    waiter->cv.Signal();
  });
  MutexLock lock(&waiter->mu);
  while (!waiter->answer.has_value()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          "no answer from the server within ClientOptions::default_timeout; the request stays "
          "queued and is sent when the stream is back");
    }
    waiter->cv.WaitWithTimeout(&waiter->mu, left);
  }
  return *waiter->answer;
}

// What the handler says about `delivery`; an exception is an error.
absl::Status Handle(const std::function<absl::Status(const Delivery&)>& handler,
                    const Delivery& delivery) {
  try {
    return handler(delivery);
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat("the handler threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("the handler threw");
  }
}

}  // namespace

Consumer::Consumer(const Client& client, ConsumerOptions options)
    : answer_timeout_(client.options_.default_timeout),
      session_(std::make_unique<ConsumeSession>(client.connection_, options,
                                                client.options_.watch_backoff)) {}

Consumer::~Consumer() { Stop(); }

absl::Status Consumer::Run(const ConsumeHandlers& handlers) {
  if (!handlers.on_delivery) {
    return absl::InvalidArgumentError("ConsumeHandlers::on_delivery: required");
  }
  ConsumeSession* const session = session_.get();
  while (true) {
    absl::StatusOr<ConsumeSession::Item> item =
        session->NextItem(absl::InfiniteDuration(), /*for_handler=*/true);
    if (!item.ok()) return session->stopping() ? absl::OkStatus() : item.status();
    switch (item->kind) {
      case ConsumeSession::Item::Kind::kLost:
        if (handlers.on_lost) handlers.on_lost(item->lost_first, item->lost_last);
        break;
      case ConsumeSession::Item::Kind::kRefused:
        if (handlers.on_refused) handlers.on_refused(item->refused);
        break;
      case ConsumeSession::Item::Kind::kDelivery: {
        const absl::Status handled = Handle(handlers.on_delivery, item->delivery);
        const uint64_t sequence = item->delivery.event.sequence;
        // Answered on a gRPC thread; a refusal is reported on this one.
        session->Send(handled.ok() ? LeaseOp::kAck : LeaseOp::kNack, item->delivery,
                      absl::ZeroDuration(), [session, sequence](const absl::Status& answer) {
                        if (!answer.ok()) session->Refused(LeaseResult{sequence, answer});
                      });
        session->Handled();
        break;
      }
    }
  }
}

absl::StatusOr<Delivery> Consumer::Next(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<ConsumeSession::Item> item = session_->NextItem(deadline - absl::Now());
    if (!item.ok()) return item.status();
    switch (item->kind) {
      case ConsumeSession::Item::Kind::kLost:
        return absl::DataLossError(absl::StrCat(
            "events ", item->lost_first, " to ", item->lost_last,
            " were discarded by the server's retention before the group received them; they "
            "will not be delivered"));
      case ConsumeSession::Item::Kind::kRefused:
        // Only Run reports refusals this way; Ack and Nack return them.
        continue;
      case ConsumeSession::Item::Kind::kDelivery:
        return std::move(item->delivery);
    }
  }
}

absl::Status Consumer::Ack(const Delivery& delivery) {
  return SendAndWait(*session_, LeaseOp::kAck, delivery, absl::ZeroDuration(), answer_timeout_);
}

absl::Status Consumer::Nack(const Delivery& delivery) {
  return SendAndWait(*session_, LeaseOp::kNack, delivery, absl::ZeroDuration(), answer_timeout_);
}

absl::Status Consumer::Extend(const Delivery& delivery, absl::Duration extension) {
  // Checked here: the server ends the stream on a bad extension.
  if (extension <= absl::ZeroDuration() || extension > kMaxExtension) {
    return absl::InvalidArgumentError("extension: must be positive and at most 12 h");
  }
  return SendAndWait(*session_, LeaseOp::kExtend, delivery, extension, answer_timeout_);
}

void Consumer::Stop() { session_->Stop(); }

ConsumerStats Consumer::stats() const { return session_->stats(); }

}  // namespace lapse::client

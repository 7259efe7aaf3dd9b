// WatchReactor: one WatchExpirations stream.
//
// The reactor owns the stream's state: its EventFilter, its cursor (the last
// examined sequence) and the one response in flight, which exists only while
// its write is in flight (an idle stream holds no batch). It has exactly one
// write in flight; when a write completes it reads the next batch from the
// store's EventSource and writes it, or parks until the WatchHub wakes it for
// new events or a heartbeat. A read that matched nothing still advances the
// cursor without sending anything: the next batch or heartbeat carries
// examined_sequence. Every response (heartbeats too) carries the cursor also
// as the source's resume token, and the store id. A cursor that fell out of
// retention ends the stream with the source's OUT_OF_RANGE.
//
// A batch is written as bytes: each event is encoded into the message as the
// event source hands it over (AppendWatchEvent), with no ExpiryEvent copy and
// no message built and serialized per event; the bytes are lapse.proto's
// WatchExpirationsResponse, as protobuf would have written them.
//
// Before a batch is written its serialized size is pinned with the hub
// (WatchHub::Pin) and given back when the write completes. When it does not
// fit, the batch is dropped unsent, the cursor stays put, and the stream waits
// in the hub's line until the hub resumes it. A write that has not completed
// for the hub's stall_timeout cancels the stream (logged with the peer and
// the sequence to resume after).
//
//   // In LapseServiceImpl::WatchExpirations, after validating the request:
//   return new lapse::WatchReactor(&hub, context, &store.events(), std::move(filter), after);
//
// The reactor finishes exactly once (also after cancellation) and deletes
// itself once gRPC is done with it (OnDone) and the hub holds no reference.
// It never blocks: its mutex only guards its own state, and a read of the event source is
// bounded by ReadLimits. Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_WATCH_REACTOR_H_
#define LAPSE_SERVER_SERVICE_WATCH_REACTOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/base/mutex.h"
#include "server/engine/event_source.h"
#include "server/service/watch_hub.h"

namespace lapse {

// The stream's messages are WatchExpirationsResponses in their wire form.
class WatchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Streams the events of `events` that match `filter`, starting right after
  // sequence `after`, on the call of `context`. Registers with `hub`, or
  // finishes with the hub's refusal (UNAVAILABLE when shutting down,
  // RESOURCE_EXHAUSTED when full). Allocate with new: the reactor deletes
  // itself.
  WatchReactor(WatchHub* hub, grpc::CallbackServerContext* context, const EventSource* events,
               EventFilter filter, uint64_t after);
  WatchReactor(const WatchReactor&) = delete;
  WatchReactor& operator=(const WatchReactor&) = delete;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The hub's interface to a stream.
  friend class WatchHub;

  ~WatchReactor() override = default;

  // References: one held by gRPC until OnDone, plus one per hub call in
  // progress. The last Unref deletes the reactor.
  void Ref();
  void Unref();

  // Called by the hub's dispatcher. Sends newly appended events when
  // `new_events` (unless waiting in the hub's line), or a heartbeat when the
  // stream has been idle for the heartbeat interval; cancels the stream when
  // its write has been stuck for the stall timeout. Returns when the stream
  // may next be due a heartbeat or a stall check.
  absl::Time Poll(bool new_events, absl::Time now);
  // Called by the hub's dispatcher when the stream may be first in line for
  // pinned bytes: tries again to send. False if it still waits.
  bool Resume();
  // Ends the stream with UNAVAILABLE naming the last examined_sequence sent.
  void Shutdown();

  // Reads from the cursor and writes the first non-empty batch, or parks
  // when caught up or when the batch does not fit the hub's pinned bytes.
  // Requires no write in flight.
  void SendNextBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the response whose encoded events are `events` (none in a
  // heartbeat; `pinned` bytes pinned for them), carrying the cursor.
  void WriteLocked(std::unique_ptr<std::string> events, size_t pinned, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leaves the hub's line, if in it.
  void StopWaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishOnceLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  WatchHub* const hub_;
  grpc::CallbackServerContext* const context_;
  const EventSource* const events_;
  const EventFilter filter_;
  const ReadLimits read_limits_;
  const absl::Duration heartbeat_interval_;
  const absl::Duration stall_timeout_;
  // StoreId::ToString of the source's store, carried by every response.
  const std::string store_id_;

  std::atomic<int> refs_{1};

  // State below is protected by mu_.
  Mutex mu_;
  // Every event up to and including this sequence has been examined.
  uint64_t cursor_ ABSL_GUARDED_BY(mu_);
  // The highest examined_sequence handed to the client (or the start
  // position): where a client resumes after shutdown.
  uint64_t sent_sequence_ ABSL_GUARDED_BY(mu_);
  // Wall time of the last write started (or of the stream's start).
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // The message being written, untouched until its write completes; empty
  // between writes.
  grpc::ByteBuffer message_ ABSL_GUARDED_BY(mu_);
  // The size of the last batch's events: what the next one reserves.
  size_t last_batch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes pinned with the hub for response_.
  size_t pinned_ ABSL_GUARDED_BY(mu_) = 0;
  // In the hub's line for pinned bytes.
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool stall_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // OnDone has run: context_ may be gone.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_WATCH_REACTOR_H_

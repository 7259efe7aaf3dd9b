// LapseServiceImpl: the lapse.v1.LapseService gRPC service.
//
// Requests arrive as bytes and are parsed here (server/service/request_parser.h):
// a malformed one is answered INVALID_ARGUMENT naming the message type and,
// when protobuf tells, the field, where gRPC's generated handlers would answer
// UNIMPLEMENTED with no message. To get the bytes, the constructor replaces
// each method's generated handler by gRPC's callback handler template for a
// ByteBuffer request and the typed response (what the generated
// WithRawCallbackMethod_ classes do, but for the request only), so responses
// and watch streams stay typed.
//
// Each unary RPC converts its request to engine types, calls the Store
// (server/storage/store.h) and converts the result back when the store
// answers; grpc::Status appears only here, at the edge. The store validates
// names, keys, sizes and limits and names the field at fault; this layer adds
// only conversion errors (Timestamps, Durations, unknown enum values, page
// tokens, page_size); the consumer-group RPCs' handlers are in
// consumer_group_handlers.h. WatchExpirations validates its request and hands the
// stream to a WatchReactor, reading the store's events, served by the
// WatchHub.
//
// Stores answer asynchronously (a write once it is durable, from the WAL's
// flusher thread; a network store from its I/O thread): nothing blocks a gRPC
// thread.
//
//   lapse::LapseServiceImpl service(&store, &hub);
//   builder.RegisterService(&service);
//   ...
//   service.StartDraining();  // every RPC now answers UNAVAILABLE
//
// Thread-safe: gRPC calls it from many threads at once. The store and the hub
// are not owned and must outlive the service.
#ifndef LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_
#define LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

#include <atomic>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/service/watch_hub.h"
#include "server/storage/store.h"

namespace lapse {

class LapseServiceImpl final : public v1::LapseService::CallbackService {
 public:
  LapseServiceImpl(Store* store, WatchHub* hub);
  LapseServiceImpl(const LapseServiceImpl&) = delete;
  LapseServiceImpl& operator=(const LapseServiceImpl&) = delete;

  // From now on every new RPC fails with UNAVAILABLE. Cannot be undone.
  void StartDraining();

  // Serves a WatchExpirations stream whose request has been parsed.
  grpc::ServerWriteReactor<v1::WatchExpirationsResponse>* WatchExpirations(
      grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest* request) override;

 private:
  // A unary RPC's work: converts the request and calls the store, whose
  // answer finishes `reactor`; or returns the conversion error.
  template <typename Request, typename Response>
  using Handler = absl::Status (*)(Store&, const Request&, Response*, grpc::ServerUnaryReactor*);

  // Serves the unary RPC `method` with `handler`, in place of the generated
  // handler, so that requests arrive as bytes and are parsed by Answer.
  template <typename Request, typename Response>
  void ServeUnary(const char* method, Handler<Request, Response> handler);
  // Serves WatchExpirations the same way, through WatchExpirations() above.
  void ServeWatch();

  // Answers UNAVAILABLE if draining, INVALID_ARGUMENT if `bytes` are not a
  // Request; otherwise runs `handler`.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer& bytes, Response* response,
                                   Handler<Request, Response> handler);

  // Constant after construction.
  Store* const store_;
  WatchHub* const hub_;

  std::atomic<bool> draining_{false};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

// LapseServiceImpl: the lapse.v1.LapseService gRPC service.
//
// Requests arrive as bytes and are parsed here (server/service/request_parser.h):
// a malformed one is answered INVALID_ARGUMENT naming the message type and,
// when protobuf tells, the field, where gRPC's generated handlers would answer
// UNIMPLEMENTED with no message. To get the bytes, the constructor replaces
// each method's generated handler by gRPC's callback handler template for a
// ByteBuffer request and the typed response (what the generated
// WithRawCallbackMethod_ classes do, but for the request only), so unary
// responses stay typed; watch streams write bytes (WatchReactor), and write
// streams read and write bytes (WriteStreamReactor). A unary call's request bytes, parsed
// request and response live on one protobuf arena, freed at once when the call ends.
//
// Each unary RPC converts its request to engine types, calls the Store
// (server/storage/store.h) and converts the result back when the store
// answers; grpc::Status appears only here, at the edge. The store validates
// names, keys, sizes and limits and names the field at fault; this layer adds
// only conversion errors (Timestamps, Durations, unknown enum values, page
// tokens, page_size); the consumer-group RPCs' handlers are in
// consumer_group_handlers.h. With an auth file, every RPC first authenticates
// its caller (UNAUTHENTICATED), then, once parsed, checks the permissions its
// request needs (PERMISSION_DENIED; server/service/authorizer.h, and the
// table in lapse_service.cc). WatchExpirations validates its request and hands the
// stream to a WatchReactor, reading the store's events, served by the
// WatchHub. StreamWrites hands its stream to a WriteStreamReactor, which runs
// each operation through the same handler as the unary RPC. A Poll with a
// `wait` is a PollReactor and a Consume stream a ConsumeReactor, both woken by
// the GroupHub when their group may deliver.
//
// Stores answer asynchronously (a write once it is durable, from the WAL's
// flusher thread; a network store from its I/O thread): nothing blocks a gRPC
// thread.
//
//   lapse::LapseServiceImpl service(&store, &hub, &group_hub, auth_file.get());  // or nullptr
//   builder.RegisterService(&service);
//   ...
//   service.StartDraining();  // every RPC now answers UNAVAILABLE; write
//                             // streams end once their operations are answered
//
// Thread-safe: gRPC calls it from many threads at once. The store, the hubs
// and the auth file are not owned and must outlive the service.
#ifndef LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_
#define LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

#include <atomic>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/auth/auth_file.h"
#include "server/service/authorizer.h"
#include "server/service/group_hub.h"
#include "server/service/operation.h"
#include "server/service/watch_hub.h"
#include "server/service/write_stream_reactor.h"
#include "server/storage/store.h"

namespace lapse {

class LapseServiceImpl final : public v1::LapseService::CallbackService {
 public:
  // `auth`: the auth file to enforce; nullptr serves anyone.
  LapseServiceImpl(Store* store, WatchHub* hub, GroupHub* group_hub,
                   const AuthFile* auth = nullptr);
  LapseServiceImpl(const LapseServiceImpl&) = delete;
  LapseServiceImpl& operator=(const LapseServiceImpl&) = delete;

  // From now on every new RPC fails with UNAVAILABLE. Cannot be undone.
  void StartDraining();

  // Serves a Consume stream (consume_reactor.h).
  grpc::ServerBidiReactor<v1::ConsumeRequest, v1::ConsumeResponse>* Consume(
      grpc::CallbackServerContext* context) override;

 private:
  // A unary RPC's work: converts the request and calls the store, whose
  // answer finishes `reactor`; or returns the conversion error.
  template <typename Request, typename Response>
  using Handler = absl::Status (*)(Store&, const Request&, Response*, OperationEnd*);

  // Serves the unary RPC `method` with `handler`, in place of the generated
  // handler, so that requests arrive as bytes and are parsed by Answer.
  template <typename Request, typename Response>
  void ServeUnary(const char* method, Handler<Request, Response> handler);
  // Serves WatchExpirations the same way, through StartWatch, with responses
  // written as bytes (the WatchReactor encodes them).
  void ServeWatch();
  // Serves a WatchExpirations stream whose request has been parsed (and whose
  // caller authorized).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StartWatch(
      grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest& request);
  // Serves StreamWrites as bytes both ways, through StartWriteStream.
  void ServeWriteStreams();
  // Serves a StreamWrites stream (write_stream_reactor.h).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartWriteStream(
      grpc::CallbackServerContext* context);

  // Answers UNAVAILABLE if draining, UNAUTHENTICATED for an unknown caller,
  // INVALID_ARGUMENT if `bytes` are not a Request, PERMISSION_DENIED if the
  // caller may not do what it asks; otherwise runs `handler` (a Poll with a
  // `wait`: a PollReactor).
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer& bytes, Response* response,
                                   Handler<Request, Response> handler);

  // Constant after construction.
  Store* const store_;
  WatchHub* const hub_;
  GroupHub* const group_hub_;
  const Authorizer authorizer_;

  WriteStreams write_streams_;

  std::atomic<bool> draining_{false};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

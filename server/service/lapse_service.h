// LapseServiceImpl: the lapse.v1.LapseService gRPC service.
//
// Each unary RPC converts its request to engine types, calls the Store
// (server/storage/store.h) and converts the result back when the store
// answers; grpc::Status appears only here, at the edge. The store validates
// names, keys, sizes and limits and names the field at fault; this layer adds
// only conversion errors (Timestamps, Durations, unknown enum values, page
// tokens, page_size). WatchExpirations validates its request and hands the
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

  grpc::ServerUnaryReactor* PutMembers(grpc::CallbackServerContext* context,
                                       const v1::PutMembersRequest* request,
                                       v1::PutMembersResponse* response) override;
  grpc::ServerUnaryReactor* GetMembers(grpc::CallbackServerContext* context,
                                       const v1::GetMembersRequest* request,
                                       v1::GetMembersResponse* response) override;
  grpc::ServerUnaryReactor* RemoveMembers(grpc::CallbackServerContext* context,
                                          const v1::RemoveMembersRequest* request,
                                          v1::RemoveMembersResponse* response) override;
  grpc::ServerUnaryReactor* ExpireMembers(grpc::CallbackServerContext* context,
                                          const v1::ExpireMembersRequest* request,
                                          v1::ExpireMembersResponse* response) override;
  grpc::ServerUnaryReactor* PersistMembers(grpc::CallbackServerContext* context,
                                           const v1::PersistMembersRequest* request,
                                           v1::PersistMembersResponse* response) override;
  grpc::ServerUnaryReactor* ListMembers(grpc::CallbackServerContext* context,
                                        const v1::ListMembersRequest* request,
                                        v1::ListMembersResponse* response) override;
  grpc::ServerUnaryReactor* GetCollection(grpc::CallbackServerContext* context,
                                          const v1::GetCollectionRequest* request,
                                          v1::GetCollectionResponse* response) override;
  grpc::ServerUnaryReactor* ListCollections(grpc::CallbackServerContext* context,
                                            const v1::ListCollectionsRequest* request,
                                            v1::ListCollectionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteCollection(grpc::CallbackServerContext* context,
                                             const v1::DeleteCollectionRequest* request,
                                             v1::DeleteCollectionResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchExpirationsResponse>* WatchExpirations(
      grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest* request) override;

 private:
  // A unary RPC's work: converts the request and calls the store, whose
  // answer finishes `reactor`; or returns the conversion error.
  template <typename Request, typename Response>
  using Handler = absl::Status (*)(Store&, const Request&, Response*, grpc::ServerUnaryReactor*);

  // Runs `handler`, or answers UNAVAILABLE if draining.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const Request& request,
                                   Response* response, Handler<Request, Response> handler);

  // Constant after construction.
  Store* const store_;
  WatchHub* const hub_;

  std::atomic<bool> draining_{false};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

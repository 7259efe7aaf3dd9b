// LapseServiceImpl: the lapse.v1.LapseService gRPC service.
//
// Each unary RPC converts its request to engine types, calls the Engine and
// converts the result back; grpc::Status appears only here, at the edge. The
// engine validates names, keys, sizes and limits and names the field at
// fault; this layer adds only conversion errors (Timestamps, Durations,
// unknown enum values, page tokens, page_size). WatchExpirations validates
// its request and hands the stream to a WatchReactor served by the WatchHub.
//
// With a DurableStore, an RPC that changed state answers only once its
// changes are durable (DurableStore::WhenDurable), from the store's flusher
// thread; nothing blocks a gRPC thread.
//
//   lapse::LapseServiceImpl service(&engine, &log, &hub, store);  // store may be null
//   builder.RegisterService(&service);
//   ...
//   service.StartDraining();  // every RPC now answers UNAVAILABLE
//
// Thread-safe: gRPC calls it from many threads at once. The engine, log and
// hub are not owned and must outlive the service.
#ifndef LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_
#define LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

#include <atomic>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/engine/engine.h"
#include "server/engine/event_log.h"
#include "server/storage/durable_store.h"
#include "server/service/watch_hub.h"

namespace lapse {

class LapseServiceImpl final : public v1::LapseService::CallbackService {
 public:
  LapseServiceImpl(Engine* engine, const EventLog* log, WatchHub* hub, DurableStore* store);
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
  grpc::ServerUnaryReactor* RemoveMembers(
      grpc::CallbackServerContext* context,
      const v1::RemoveMembersRequest* request,
      v1::RemoveMembersResponse* response) override;
  grpc::ServerUnaryReactor* ExpireMembers(
      grpc::CallbackServerContext* context,
      const v1::ExpireMembersRequest* request,
      v1::ExpireMembersResponse* response) override;
  grpc::ServerUnaryReactor* PersistMembers(
      grpc::CallbackServerContext* context,
      const v1::PersistMembersRequest* request,
      v1::PersistMembersResponse* response) override;
  grpc::ServerUnaryReactor* ListMembers(grpc::CallbackServerContext* context,
                                        const v1::ListMembersRequest* request,
                                        v1::ListMembersResponse* response) override;
  grpc::ServerUnaryReactor* GetCollection(
      grpc::CallbackServerContext* context,
      const v1::GetCollectionRequest* request,
      v1::GetCollectionResponse* response) override;
  grpc::ServerUnaryReactor* ListCollections(
      grpc::CallbackServerContext* context,
      const v1::ListCollectionsRequest* request,
      v1::ListCollectionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteCollection(
      grpc::CallbackServerContext* context,
      const v1::DeleteCollectionRequest* request,
      v1::DeleteCollectionResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchExpirationsResponse>* WatchExpirations(
      grpc::CallbackServerContext* context,
      const v1::WatchExpirationsRequest* request) override;

 private:
  // Whether an RPC's answer waits for its changes to be durable.
  enum class Changes { kNone, kDurableBeforeAnswer };

  // Answers a unary RPC with `handler`'s status, or UNAVAILABLE if draining.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Answer(
      grpc::CallbackServerContext* context, const Request& request,
      Response* response,
      absl::Status (*handler)(Engine&, const Request&, Response*),
      Changes changes);

  // Constant after construction.
  Engine* const engine_;
  const EventLog* const log_;
  WatchHub* const hub_;
  DurableStore* const store_;

  std::atomic<bool> draining_{false};
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_LAPSE_SERVICE_H_

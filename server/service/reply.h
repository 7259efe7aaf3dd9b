// Reply: how a unary RPC's handler hands the store's answer to gRPC.
//
//   store.GetCollection(name, Reply<CollectionInfo>(reactor, [response](CollectionInfo info) {
//     CollectionInfoToProto(info, response->mutable_collection());
//   }));
//
// The returned StoreDone fills the response with a successful result, then
// finishes the reactor with the result's status (ToGrpcStatus). It runs on
// whichever thread the store answers on.
#ifndef LAPSE_SERVER_SERVICE_REPLY_H_
#define LAPSE_SERVER_SERVICE_REPLY_H_

#include <utility>

#include "absl/status/statusor.h"
#include "grpcpp/support/server_callback.h"
#include "server/service/proto_convert.h"
#include "server/storage/store.h"

namespace lapse {

template <typename T, typename Fill>
StoreDone<T> Reply(grpc::ServerUnaryReactor* reactor, Fill fill) {
  return [reactor, fill = std::move(fill)](absl::StatusOr<T> result) mutable {
    if (result.ok()) fill(*std::move(result));
    reactor->Finish(ToGrpcStatus(result.status()));
  };
}

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_REPLY_H_

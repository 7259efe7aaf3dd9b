// Reply: how an operation's handler hands the store's answer on.
//
//   store.GetCollection(name, Reply<CollectionInfo>(end, [response](CollectionInfo info) {
//     CollectionInfoToProto(info, response->mutable_collection());
//   }));
//
// The returned StoreDone fills the response with a successful result, then
// ends the operation (operation.h) with the result's status. It runs on
// whichever thread the store answers on.
#ifndef LAPSE_SERVER_SERVICE_REPLY_H_
#define LAPSE_SERVER_SERVICE_REPLY_H_

#include <utility>

#include "absl/status/statusor.h"
#include "server/service/operation.h"
#include "server/storage/store.h"

namespace lapse {

template <typename T, typename Fill>
StoreDone<T> Reply(OperationEnd* end, Fill fill) {
  return [end, fill = std::move(fill)](absl::StatusOr<T> result) mutable {
    if (result.ok()) fill(*std::move(result));
    end->End(result.status());
  };
}

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_REPLY_H_

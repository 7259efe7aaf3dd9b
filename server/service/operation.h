// What the service's operations share, whether they arrive as unary calls or
// on a StreamWrites stream (write_stream_reactor.h).
//
// OperationEnd is where the outcome of one store operation goes: the service
// starts the operation, the store answers it (maybe later, from another
// thread), and the operation's end sends the answer on.
//
//   class UnaryCall final : public grpc::ServerUnaryReactor, public OperationEnd {
//     void End(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }
//   };
//
// MessageArenaOptions: the protobuf arena one operation's request and
// response live on, freed at once when the operation is over.
#ifndef LAPSE_SERVER_SERVICE_OPERATION_H_
#define LAPSE_SERVER_SERVICE_OPERATION_H_

#include "absl/status/status.h"
#include "google/protobuf/arena.h"

namespace lapse {

class OperationEnd {
 public:
  // Called exactly once per operation, from any thread; when `status` is OK,
  // after the response has been filled in.
  virtual void End(const absl::Status& status) = 0;

 protected:
  ~OperationEnd() = default;
};

// Blocks start small (a one-member write) and grow to 64 KiB, so a request
// of 1000 members takes a few blocks, not dozens.
inline google::protobuf::ArenaOptions MessageArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 1024;
  options.max_block_size = 64 << 10;
  return options;
}

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_OPERATION_H_

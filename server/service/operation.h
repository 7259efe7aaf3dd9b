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
// response live on, freed at once when the operation is over. Its blocks of
// 16 KiB and more come from MessageArenaBlocks(), a pool that the server
// empties once requests stop (LapseServer), so that a burst of large
// requests does not stay resident in the threads that parsed it
// (server/base/block_pool.h says why).
#ifndef LAPSE_SERVER_SERVICE_OPERATION_H_
#define LAPSE_SERVER_SERVICE_OPERATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "server/base/block_pool.h"

namespace lapse {

class OperationEnd {
 public:
  // Called exactly once per operation, from any thread; when `status` is OK,
  // after the response has been filled in.
  virtual void End(const absl::Status& status) = 0;

 protected:
  ~OperationEnd() = default;
};

// The pool of every message arena's large blocks. Never destroyed.
BlockPool& MessageArenaBlocks();

// An arena block of `size` bytes: from MessageArenaBlocks() for the sizes
// only large requests reach, from operator new for the rest (a one-member
// write's arena stays one small block, and a long poll or a watch stream
// holding one does not pin a whole pool block).
void* AllocateMessageArenaBlock(size_t size);
void FreeMessageArenaBlock(void* block, size_t size);

// Blocks start small (a one-member write) and grow to 64 KiB, so a request
// of 1000 members takes a few blocks, not dozens.
inline google::protobuf::ArenaOptions MessageArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 1024;
  options.max_block_size = BlockPool::kBlockSize;
  options.block_alloc = &AllocateMessageArenaBlock;
  options.block_dealloc = &FreeMessageArenaBlock;
  return options;
}

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_OPERATION_H_

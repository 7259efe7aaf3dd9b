// Reading a stream's responses into one message without allocating per
// event: the watch and Consume streams' readers (the C++ client's, and
// lapse-bench's raw watch reader) recycle the message before each read.
//
//   v1::WatchExpirationsResponse response;
//   while (reader->Read(&response)) {
//     Handle(response);
//     RecycleEvents(&response);
//   }
//
// Functions of one message; a message is not safe to use from several
// threads at once.
#ifndef LAPSE_PROTO_RECYCLE_H_
#define LAPSE_PROTO_RECYCLE_H_

#include "lapse/v1/lapse.pb.h"

namespace lapse {

// Readies `response`, read before, to be read into again without freeing and
// allocating per event: a parse starts with Clear(), which frees each
// event's two Timestamps, then adds events, taking each from the repeated
// field's pool of cleared ones first. So the events go to that pool with
// their Timestamps (emptied), and their strings keep their buffers. An event
// parsed later into one of them without a deadline has an empty expire_time
// instead of none, which reads as none (its
// seconds and nanos are 0).
void RecycleEvents(v1::WatchExpirationsResponse* response);
// The same for a Consume stream's response: each delivery goes to the pool
// with its event (as above) and lease_deadline.
void RecycleDeliveries(v1::ConsumeResponse* response);

}  // namespace lapse

#endif  // LAPSE_PROTO_RECYCLE_H_

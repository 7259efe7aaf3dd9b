// EventLoop: one thread that waits with poll() on the file descriptors of its
// handlers and on its timers, and runs tasks posted from any thread — the
// I/O thread of the Redis Cluster router, so no gRPC thread waits on Redis.
//
//   EventLoop loop;
//   loop.Post([&] { loop.RunAt(absl::Now() + absl::Milliseconds(10), [] { ... }); });
//
// Post() is thread-safe; everything else is called on the loop thread only
// (from posted tasks, timers and handlers). Tasks run in the order posted.
// The destructor runs the tasks already posted, then stops and joins the
// thread; timers not yet due are dropped without running.
#ifndef LAPSE_SERVER_STORAGE_REDIS_EVENT_LOOP_H_
#define LAPSE_SERVER_STORAGE_REDIS_EVENT_LOOP_H_

#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse::redis {

class EventLoop final {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // Something with a file descriptor to wait on. fd() and events() are asked
  // before every wait, so they may change between waits.
  class Handler {
   public:
    virtual ~Handler() = default;
    // -1 for none.
    virtual int fd() const = 0;
    // POLLIN / POLLOUT, or 0 for nothing to wait for.
    virtual short events() const = 0;
    virtual void OnEvents(short revents) = 0;
  };

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Thread-safe.
  void Post(Task task);

  // Loop thread only. Runs `task` once `when` has come.
  void RunAt(absl::Time when, Task task);
  // Loop thread only. `handler` is waited on until Unwatch; it must outlive
  // that.
  void Watch(Handler* handler);
  void Unwatch(Handler* handler);

 private:
  void Run();
  // Drains the wake-up descriptor and runs what was posted; false once the
  // loop is to stop.
  bool RunPosted();

  // Constant after construction.
  int wake_fd_ = -1;

  Mutex mu_;
  std::vector<Task> posted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Loop thread only.
  std::multimap<absl::Time, Task> timers_;
  std::vector<Handler*> handlers_;

  // Last: started once everything above is constructed.
  std::thread thread_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_EVENT_LOOP_H_

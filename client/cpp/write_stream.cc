#include "client/cpp/write_stream.h"

#include <cassert>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/cpp/convert.h"
#include "client/cpp/write_coding.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace lapse::client::internal {
namespace {

// Operations queued while a request is in flight go together in the next, up
// to this many bytes (well under the 4 MiB a server takes by default).
constexpr size_t kMaxRequestBytes = 1 << 20;

// Requests written and not yet answered, at most: one. Calls that arrive
// meanwhile queue and go together in the next request, written when the
// answer comes: with many calls in flight a request carries many of them
// (a request costs both sides mostly per request, in thread wake-ups), while
// a lone call is written at once. Measured against 2, 4 and no limit (a
// write as soon as the previous one is sent): see docs/benchmarks.md.
constexpr size_t kMaxUnansweredRequests = 1;

// A request's buffer is kept for the next one up to this size (requests of
// many single puts fit), freed when a larger request was built.
constexpr size_t kKeptRequestBytes = 64 << 10;

// The generic call's method: lapse.proto's LapseService.StreamWrites.
constexpr char kStreamWritesMethod[] = "/lapse.v1.LapseService/StreamWrites";

// Whether this thread is running a Done: such a thread never waits for room,
// since the answers that would make room may have to wait for it.
thread_local bool delivering = false;

absl::Status DeadlinePassed() {
  return absl::DeadlineExceededError(
      "no answer before the call's deadline; the write may or may not have been applied");
}

}  // namespace

// One operation: its deadline and who wants its answer (its request is built
// in the Call's next request).
struct WriteStream::Op {
  absl::Time deadline;
  Done done;
};

// One StreamWrites stream, on the WriteStream's completion queue: its
// completions (a read, a write, the end) run on the WriteStream's thread. Its
// state is guarded by the WriteStream's mu_; it deletes itself in OnDone,
// after answering every operation left, once none of its completions is
// outstanding.
class WriteStream::Call final {
 public:
  explicit Call(WriteStream* owner)
      : owner_(owner),
        started_(this, &Call::OnWriteDone),
        read_(this, &Call::OnReadDone),
        written_(this, &Call::OnWriteDone),
        finished_(this, &Call::OnFinished) {}

  // The context, for the metadata the stream is opened with.
  grpc::ClientContext* context() { return &context_; }

  // Opens the stream. REQUIRES: owner_->mu_ (see Send).
  void Start() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    stream_ = owner_->stub_->PrepareCall(&context_, kStreamWritesMethod, &owner_->completions_);
    outstanding_ = 2;
    // Sending the headers is the stream's first write: the next waits for it.
    writing_ = true;
    stream_->StartCall(&started_);
    stream_->Read(&response_, &read_);
  }

  // Sends `op`, its request encoded by `build` in the request being built,
  // after the operations before it. REQUIRES: owner_->mu_, which WriteStream
  // holds as its own mu_, a name the analysis cannot match.
  void Send(Op op, Build build, std::vector<Answer>* answers) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (building_.back().bytes.size() >= kMaxRequestBytes) building_.emplace_back();
    Building& next = building_.back();
    build(&next.bytes);
    next.ends.push_back(next.bytes.size());
    unsent_.push_back(std::move(op));
    if (CanWrite()) WriteNext(answers);
  }

  // Ends the stream; OnDone follows.
  void Cancel() { context_.TryCancel(); }

  // Runs a completion of this stream: `tag` is one of its Events.
  static void Run(void* tag, bool ok) {
    Event* event = static_cast<Event*>(tag);
    Call* call = event->call;
    (call->*event->handler)(ok);
    bool done;
    {
      MutexLock lock(&call->owner_->mu_);
      done = --call->outstanding_ == 0;
    }
    // The last completion: the stream has ended (OnFinished) and no write
    // is left in flight.
    if (done) call->OnDone();
  }

 private:
  // A completion queue tag: which stream, and what completed.
  struct Event {
    Event(Call* c, void (Call::*h)(bool)) : call(c), handler(h) {}
    Call* const call;
    void (Call::*const handler)(bool);
  };

  void OnWriteDone(bool ok) {
    std::vector<Answer> answers;
    {
      MutexLock lock(&owner_->mu_);
      writing_ = false;
      // A failed write ends the stream: OnDone answers what is left.
      if (ok && CanWrite()) WriteNext(&answers);
    }
    Deliver(std::move(answers));
  }

  void OnReadDone(bool ok) {
    if (!ok) {
      // The stream is ending: its status, then OnDone.
      MutexLock lock(&owner_->mu_);
      ++outstanding_;
      stream_->Finish(&status_, &finished_);
      return;
    }
    read_answers_.clear();
    const bool readable = ReadResponse();
    std::vector<Answer> answers;
    {
      MutexLock lock(&owner_->mu_);
      if (!sent_sizes_.empty()) {
        const size_t ops = sent_sizes_.front();
        sent_sizes_.pop_front();
        answers.reserve(ops);
        for (size_t i = 0; i < ops; ++i) {
          Op& op = sent_.front();
          if (!readable) {
            owner_->Finish(op, absl::InternalError("the server's response could not be read"),
                           &answers);
          } else if (i >= read_answers_.size()) {
            owner_->Finish(
                op, absl::InternalError("the server's response has no result for this write"),
                &answers);
          } else {
            owner_->Finish(op, std::move(read_answers_[i]), &answers);
          }
          sent_.pop_front();
        }
      }
      // The answers' callbacks often make the next calls: held until they
      // return, those calls go in the request written next with the calls
      // queued before, rather than wait a round trip more in the one after.
      holding_ = true;
    }
    Deliver(std::move(answers));
    answers.clear();
    response_.Clear();
    {
      MutexLock lock(&owner_->mu_);
      holding_ = false;
      if (CanWrite()) WriteNext(&answers);
      ++outstanding_;
      stream_->Read(&response_, &read_);
    }
    Deliver(std::move(answers));
  }

  // Reads response_'s answers into read_answers_; false if it is not a
  // StreamWritesResponse.
  bool ReadResponse() {
    grpc::Slice slice;
    if (!response_.TrySingleSlice(&slice).ok() && !response_.DumpToSingleSlice(&slice).ok()) {
      return false;
    }
    return ReadStreamWritesResponse(
        absl::string_view(reinterpret_cast<const char*>(slice.begin()), slice.size()),
        &read_answers_);
  }

  void OnFinished(bool) {}

  void OnDone() {
    std::vector<Answer> answers;
    {
      MutexLock lock(&owner_->mu_);
      const absl::Status ended = status_.ok()
                                     ? absl::UnavailableError("the write stream ended; write again")
                                     : FromGrpcStatus(status_);
      for (Op& op : sent_) owner_->Finish(op, ended, &answers);
      for (Op& op : unsent_) owner_->Finish(op, ended, &answers);
      sent_.clear();
      sent_sizes_.clear();
      unsent_.clear();
      if (owner_->call_ == this) owner_->call_ = nullptr;
    }
    Deliver(std::move(answers));
    MutexLock lock(&owner_->mu_);
    --owner_->live_calls_;
    owner_->call_done_.SignalAll();
    delete this;
  }

 private:
  // Whether the operations waiting are to be written now: no write is in
  // flight, fewer than kMaxUnansweredRequests requests wait for answers and
  // no answer's callbacks are running. Otherwise they wait, and go together,
  // for the next write or answer.
  bool CanWrite() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_->mu_) {
    return !writing_ && !holding_ && !unsent_.empty() &&
           sent_sizes_.size() < kMaxUnansweredRequests;
  }

  // Writes the oldest request built (up to kMaxRequestBytes); its operations
  // whose deadline has passed are answered instead and left out. If none is
  // left, the next request built is written instead.
  void WriteNext(std::vector<Answer>* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_->mu_) {
    const absl::Time now = absl::Now();
    while (!unsent_.empty()) {
      Building& next = building_.front();
      size_t kept = 0;
      // The bytes of the operations kept, moved up over those left out.
      size_t kept_bytes = 0;
      size_t start = 0;
      for (const size_t end : next.ends) {
        Op op = std::move(unsent_.front());
        unsent_.pop_front();
        if (op.deadline <= now) {
          owner_->Finish(op, DeadlinePassed(), answers);
        } else {
          if (kept_bytes != start) {
            std::memmove(&next.bytes[kept_bytes], &next.bytes[start], end - start);
          }
          kept_bytes += end - start;
          ++kept;
          sent_.push_back(std::move(op));
        }
        start = end;
      }
      if (kept > 0) {
        writing_ = true;
        ++outstanding_;
        // Copied before Write returns: the request can be reused at once.
        grpc::Slice slice(next.bytes.data(), kept_bytes);
        stream_->Write(grpc::ByteBuffer(&slice, 1), &written_);
        sent_sizes_.push_back(kept);
      }
      if (building_.size() > 1) {
        building_.pop_front();
      } else {
        next.Reset();
      }
      if (kept > 0) return;
    }
  }

  // A request being built, as bytes: operations are appended to it until it
  // is written, emptied then, its buffer kept for the next.
  struct Building {
    void Reset() {
      if (bytes.capacity() > kKeptRequestBytes) {
        std::string().swap(bytes);
      } else {
        bytes.clear();
      }
      ends.clear();
    }
    std::string bytes;
    // Where each operation's bytes end.
    std::vector<size_t> ends;
  };

  WriteStream* const owner_;
  // The headers sent (a write), an answer read, a request written, the
  // stream's status received.
  Event started_;
  Event read_;
  Event written_;
  Event finished_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream_;
  // The stream's status, set when finished_ completes.
  grpc::Status status_;
  // Each answer, as bytes, and its operations' answers as read from it.
  grpc::ByteBuffer response_;
  std::vector<PutAnswer> read_answers_;
  // Guarded by owner_->mu_: completions asked for and not yet run.
  int outstanding_ = 0;
  // Guarded by owner_->mu_: operations waiting to be written, oldest first,
  // their requests built in building_ (the first building_[0].ends.size() of them in
  // building_[0], and so on; the last is the one added to); operations
  // written and not yet answered, and how many each request written carried.
  std::deque<Op> unsent_;
  std::deque<Building> building_ = std::deque<Building>(1);
  std::deque<Op> sent_;
  std::deque<size_t> sent_sizes_;
  bool writing_ = false;
  // OnReadDone is handing out an answer's results: nothing is written until
  // their callbacks return.
  bool holding_ = false;
};

WriteStream::WriteStream(grpc::GenericStub* stub, BearerToken* token, size_t max_in_flight)
    : stub_(stub), token_(token), max_in_flight_(max_in_flight) {}

WriteStream::~WriteStream() {
  std::thread thread;
  {
    MutexLock lock(&mu_);
    assert(thread_.get_id() != std::this_thread::get_id() &&
           "a WriteStream destroyed from one of its callbacks would wait for itself");
    closing_ = true;
    if (call_ != nullptr) call_->Cancel();
    while (live_calls_ > 0) call_done_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
    thread = std::move(thread_);
  }
  completions_.Shutdown();
  if (thread.joinable()) {
    thread.join();
  } else {
    // Never polled: drained here, as a completion queue must be.
    void* tag;
    bool ok;
    while (completions_.Next(&tag, &ok)) {
    }
  }
}

void WriteStream::Poll() {
  void* tag;
  bool ok;
  while (completions_.Next(&tag, &ok)) Call::Run(tag, ok);
}

bool WriteStream::InCallback() { return delivering; }

absl::Status WriteStream::Enqueue(Op& op, Build build, std::vector<Answer>* answers) {
  if (closing_) return absl::CancelledError("the client is being destroyed");
  while (in_flight_ >= max_in_flight_ && !delivering) {
    const absl::Duration left = op.deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return DeadlinePassed();
    room_.WaitWithTimeout(&mu_, left);
  }
  if (call_ == nullptr) {
    auto call = std::make_unique<Call>(this);
    if (absl::Status added = token_->AddTo(call->context()); !added.ok()) return added;
    ++live_calls_;
    call_ = call.release();
    call_->Start();
    if (!thread_.joinable()) thread_ = std::thread([this] { Poll(); });
  }
  ++in_flight_;
  call_->Send(std::move(op), build, answers);
  return absl::OkStatus();
}

void WriteStream::Finish(Op& op, absl::StatusOr<std::vector<PutResult>> response,
                         std::vector<Answer>* answers) {
  --in_flight_;
  room_.Signal();
  answers->push_back(Answer{std::move(op.done), std::move(response)});
}

void WriteStream::Deliver(std::vector<Answer> answers) {
  const bool was_delivering = delivering;
  delivering = true;
  for (Answer& answer : answers) answer.done(std::move(answer.response));
  delivering = was_delivering;
}

void WriteStream::PutAsync(Build build, absl::Time deadline, Done done) {
  Op op{deadline, std::move(done)};
  std::vector<Answer> answers;
  absl::Status queued;
  {
    MutexLock lock(&mu_);
    queued = Enqueue(op, build, &answers);
  }
  Deliver(std::move(answers));
  if (!queued.ok()) op.done(queued);
}

absl::StatusOr<std::vector<PutResult>> WriteStream::Put(Build build, absl::Time deadline) {
  // Shared with the Done, which may run after this call returned.
  struct Waiter {
    Mutex mu;
    CondVar cv;
    std::optional<absl::StatusOr<std::vector<PutResult>>> answer ABSL_GUARDED_BY(mu);
  };
  auto waiter = std::make_shared<Waiter>();
  PutAsync(build, deadline, [waiter](absl::StatusOr<std::vector<PutResult>> response) {
    MutexLock lock(&waiter->mu);
    waiter->answer = std::move(response);
    waiter->cv.Signal();
  });
  MutexLock lock(&waiter->mu);
  while (!waiter->answer.has_value()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return DeadlinePassed();
    waiter->cv.WaitWithTimeout(&waiter->mu, left);
  }
  return *std::move(waiter->answer);
}

}  // namespace lapse::client::internal

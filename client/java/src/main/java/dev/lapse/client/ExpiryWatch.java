// ExpiryWatch: WatchExpirations as a blocking Iterator of expiry events, in
// sequence order, each once.
//
//   try (ExpiryWatch watch = client.watch(request)) {
//     while (watch.hasNext()) handle(watch.next());  // close() from any thread ends it
//   }
//
// When a stream breaks (UNAVAILABLE, a dropped connection, a server restart)
// the watch reconnects after a backoff and resumes right after the last
// position it examined, by the last response's resume_token
// (START_POSITION_AFTER_TOKEN; by examined_sequence only before any token), so
// the events form one stream with no gap and no duplicate. The one way to
// lose events is for the server to no longer hold them, or to serve another
// store (a memory-only lapsed that restarted): hasNext() then throws
// LapseException OUT_OF_RANGE, never skips. Any other error (INVALID_ARGUMENT for a bad
// filter, ...) is thrown too and ends the watch. These are the rules of the
// C++ client's watch (client/cpp/watch_loop.cc), including its caveat: a
// START_POSITION_NEW watch learns its position from its first response; if
// the first stream drops before any, and the server does not name the last
// sequence it delivered (a draining lapse server does), it starts new again.
//
// hasNext() and next() belong to one thread; close() may be called from any.
package dev.lapse.client;

import com.google.protobuf.ByteString;
import dev.lapse.v1.ExpiryEvent;
import dev.lapse.v1.LapseServiceGrpc;
import dev.lapse.v1.StartPosition;
import dev.lapse.v1.WatchExpirationsRequest;
import dev.lapse.v1.WatchExpirationsResponse;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.OptionalLong;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class ExpiryWatch implements Iterator<ExpiryEvent>, AutoCloseable {
  // Called on the iterating thread.
  public interface Listener {
    // The stream broke with this resumable status; the watch resumes after a
    // backoff, once this returns.
    void onReconnecting(Status status);
  }

  // "server shutting down; last delivered sequence N" (README, WatchExpirations).
  private static final Pattern LAST_DELIVERED = Pattern.compile("last delivered sequence (\\d+)");

  private final LapseServiceGrpc.LapseServiceBlockingStub stub;
  private final WatchExpirationsRequest request;
  private final Listener listener;
  // Told once close() runs (the client forgets the watch).
  private final Consumer<ExpiryWatch> onClose;
  private final Backoff backoff;
  private final CountDownLatch closed = new CountDownLatch(1);
  private final ArrayDeque<ExpiryEvent> pending = new ArrayDeque<>();

  // Set when known; an unsigned 64-bit sequence.
  private OptionalLong position = OptionalLong.empty();
  // The examined_sequence and resume_token of the response whose events are
  // pending.
  private OptionalLong pendingExamined = OptionalLong.empty();
  private ByteString pendingToken = ByteString.EMPTY;
  // The same position as position()'s, as the server's token; empty until
  // known.
  private ByteString resumeToken = ByteString.EMPTY;
  private volatile Context.CancellableContext context;
  private Iterator<WatchExpirationsResponse> stream;
  private boolean streamGotResponse;
  private boolean waitBeforeNextStream;

  ExpiryWatch(
      LapseServiceGrpc.LapseServiceBlockingStub stub,
      WatchExpirationsRequest request,
      Backoff.Policy backoff,
      Listener listener,
      Consumer<ExpiryWatch> closed) {
    this.stub = stub;
    this.onClose = closed;
    this.request = request;
    this.listener = listener;
    this.backoff = new Backoff(backoff);
    if (request.getStartPosition() == StartPosition.START_POSITION_AFTER_SEQUENCE) {
      position = OptionalLong.of(request.getAfterSequence());
    }
    if (request.getStartPosition() == StartPosition.START_POSITION_AFTER_TOKEN) {
      resumeToken = request.getResumeToken();
    }
  }

  // The position of position() as the server's opaque token, which also names
  // its store: a later watch with START_POSITION_AFTER_TOKEN from it continues
  // with no gap and no duplicate, or fails OUT_OF_RANGE on another store.
  // Empty until the first response.
  public ByteString resumeToken() {
    return resumeToken;
  }

  // Every event up to and including this sequence has been examined and, if
  // it matched, returned by next(): a later watch with
  // START_POSITION_AFTER_SEQUENCE from here continues with no gap and no
  // duplicate. Empty until known.
  public OptionalLong position() {
    return position;
  }

  // Blocks until an event is there (true), the watch is closed (false) or it
  // ends with an error (LapseException).
  @Override
  public boolean hasNext() {
    while (pending.isEmpty()) {
      advancePastPending();
      if (closed.getCount() == 0) return false;
      readResponse();
    }
    return true;
  }

  @Override
  public ExpiryEvent next() {
    if (!hasNext()) throw new NoSuchElementException("the watch is closed");
    ExpiryEvent event = pending.poll();
    position = OptionalLong.of(event.getSequence());
    if (pending.isEmpty()) advancePastPending();
    return event;
  }

  // Ends the watch: hasNext() returns false from now on. Idempotent.
  @Override
  public void close() {
    closed.countDown();
    onClose.accept(this);
    Context.CancellableContext current = context;
    if (current != null) current.cancel(null);
  }

  private void advancePastPending() {
    if (!pendingExamined.isPresent()) return;
    long examined = pendingExamined.getAsLong();
    if (!position.isPresent() || Long.compareUnsigned(examined, position.getAsLong()) > 0) {
      position = OptionalLong.of(examined);
    }
    if (!pendingToken.isEmpty()) resumeToken = pendingToken;
    pendingExamined = OptionalLong.empty();
  }

  private WatchExpirationsRequest nextRequest() {
    if (!resumeToken.isEmpty()) {
      return request.toBuilder()
          .setStartPosition(StartPosition.START_POSITION_AFTER_TOKEN)
          .setResumeToken(resumeToken)
          .build();
    }
    if (!position.isPresent()) return request;
    return request.toBuilder()
        .setStartPosition(StartPosition.START_POSITION_AFTER_SEQUENCE)
        .setAfterSequence(position.getAsLong())
        .build();
  }

  // Reads one response into `pending`, opening a stream first if needed.
  private void readResponse() {
    try {
      if (stream == null) {
        if (waitBeforeNextStream && closed.await(backoff.next().toNanos(), TimeUnit.NANOSECONDS)) {
          return;
        }
        Context.CancellableContext opened = Context.current().withCancellation();
        context = opened;
        if (closed.getCount() == 0) opened.cancel(null);
        Context previous = opened.attach();
        try {
          stream = stub.watchExpirations(nextRequest());
        } finally {
          opened.detach(previous);
        }
        streamGotResponse = false;
      }
      if (!stream.hasNext()) {
        streamEnded(Status.OK);
        return;
      }
      WatchExpirationsResponse response = stream.next();
      streamGotResponse = true;
      for (ExpiryEvent event : response.getEventsList()) {
        if (!position.isPresent()
            || Long.compareUnsigned(event.getSequence(), position.getAsLong()) > 0) {
          pending.add(event);
        }
      }
      pendingExamined = OptionalLong.of(response.getExaminedSequence());
      pendingToken = response.getResumeToken();
    } catch (StatusRuntimeException e) {
      if (closed.getCount() == 0) return;
      Status.Code code = e.getStatus().getCode();
      if (code != Status.Code.UNAVAILABLE && code != Status.Code.CANCELLED) {
        close();
        throw new LapseException(e);
      }
      streamEnded(e.getStatus());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      close();
    }
  }

  private void streamEnded(Status status) {
    stream = null;
    context.cancel(null);
    if (streamGotResponse) backoff.reset();
    if (!position.isPresent()) {
      Matcher m = LAST_DELIVERED.matcher(String.valueOf(status.getDescription()));
      if (m.find()) position = OptionalLong.of(Long.parseUnsignedLong(m.group(1)));
    }
    waitBeforeNextStream = true;
    if (listener != null) listener.onReconnecting(status);
  }
}

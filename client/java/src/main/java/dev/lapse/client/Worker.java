// Worker: the loop of one consumer of a consumer group. It hands each
// delivered event to a handler and acknowledges it.
//
//   Worker worker = client.worker("cancel-orders", "worker-1",
//       delivery -> cancel(delivery.getEvent().getKey()),  // returns: acked
//       new Worker.Options());                              // throws: released
//   new Thread(worker::run).start();   // run() returns after worker.stop()
//
// run() polls with the long poll (PollRequest.wait, Options.waitTime), hands
// the deliveries to the handler one at a time in order, acks each whose
// handler returned and releases (Nack) each whose handler threw, so that the
// group delivers it again (to any consumer; after max_deliveries it is
// dead-lettered). A poll that fails UNAVAILABLE (a restart, a dropped
// connection) is tried again after the client's retryBackoff under the same
// consumer name, which keeps its leases. An empty answer just polls again;
// one that came back sooner than half the wait (a server that does not wait)
// first pauses for the client's idlePollBackoff, so the loop never spins.
// Events the group lost to the server's retention are never skipped
// silently: the poll that reports them ends run() with LostEventsException
// (a LapseException OUT_OF_RANGE naming the sequences; its deliveries
// released), unless Options.onLost is set, which is then told and the loop
// goes on. Any other poll error ends run() with its LapseException. A failed
// ack or release (FAILED_PRECONDITION: the lease ran out and the event went
// to another consumer; or the server could not be reached) goes to
// Options.onError, as does the handler's exception.
//
// run() belongs to one thread; stop() may be called from any.
package dev.lapse.client;

import dev.lapse.v1.AckRequest;
import dev.lapse.v1.Delivery;
import dev.lapse.v1.LeaseRef;
import dev.lapse.v1.LeaseResult;
import dev.lapse.v1.NackRequest;
import dev.lapse.v1.PollRequest;
import dev.lapse.v1.PollResponse;
import io.grpc.Context;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

public final class Worker {
  // Handles one delivered event; returning acks it, throwing releases it.
  public interface Handler {
    void handle(Delivery delivery) throws Exception;
  }

  // Told about a delivery whose handler threw, or whose ack or release failed.
  public interface ErrorListener {
    void onError(Delivery delivery, Exception error);
  }

  public static final class Options {
    // Events per poll, at most.
    public int maxEvents = 10;
    // The long poll's wait; at most 60 s.
    public Duration waitTime = Duration.ofSeconds(10);
    // Null: lost events end run().
    public Consumer<LostEventsException> onLost = null;
    public ErrorListener onError = (delivery, error) -> { };
  }

  // LapseException OUT_OF_RANGE: the group lost sequences first..last.
  public static final class LostEventsException extends LapseException {
    private static final long serialVersionUID = 1L;
    private final long first;
    private final long last;

    LostEventsException(String group, long first, long last) {
      super(Status.OUT_OF_RANGE.withDescription("consumer group " + group + " lost events "
          + Long.toUnsignedString(first) + ".." + Long.toUnsignedString(last)
          + ": the server's event retention discarded them before the group received them;"
          + " they will not be delivered").asRuntimeException());
      this.first = first;
      this.last = last;
    }

    public long firstSequence() {
      return first;
    }

    public long lastSequence() {
      return last;
    }
  }

  private final LapseClient client;
  private final String group;
  private final String consumer;
  private final Handler handler;
  private final Options options;
  private final CountDownLatch stopped = new CountDownLatch(1);
  private final Context.CancellableContext context = Context.current().withCancellation();

  Worker(LapseClient client, String group, String consumer, Handler handler, Options options) {
    this.client = client;
    this.group = group;
    this.consumer = consumer;
    this.handler = handler;
    this.options = options;
  }

  // Ends run(): a poll in flight is cancelled; deliveries not yet handled are
  // released. Idempotent.
  public void stop() {
    stopped.countDown();
    context.cancel(null);
  }

  private boolean isStopped() {
    return stopped.getCount() == 0;
  }

  // Polls and handles until stop() (returns) or an error (throws).
  public void run() {
    Backoff errors = new Backoff(client.options().retryBackoff);
    Backoff idle = new Backoff(client.options().idlePollBackoff);
    PollRequest request = PollRequest.newBuilder()
        .setGroup(group).setConsumer(consumer).setMaxEvents(options.maxEvents)
        .setWait(com.google.protobuf.Duration.newBuilder()
            .setSeconds(options.waitTime.getSeconds()).setNanos(options.waitTime.getNano()))
        .build();
    while (!isStopped()) {
      long started = System.nanoTime();
      PollResponse response;
      try {
        response = context.call(() -> client.poll(request));
      } catch (LapseException e) {
        if (isStopped()) return;
        if (e.getCode() != Status.Code.UNAVAILABLE) throw e;
        pause(errors.next());
        continue;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
      errors.reset();
      if (response.getLostFirstSequence() != 0) {
        LostEventsException lost = new LostEventsException(
            group, response.getLostFirstSequence(), response.getLostLastSequence());
        if (options.onLost == null) {
          release(response.getDeliveriesList());
          throw lost;
        }
        options.onLost.accept(lost);
      }
      if (response.getDeliveriesCount() == 0) {
        if (System.nanoTime() - started < options.waitTime.toNanos() / 2) pause(idle.next());
        continue;
      }
      idle.reset();
      handle(response.getDeliveriesList());
    }
  }

  private void handle(List<Delivery> deliveries) {
    for (int i = 0; i < deliveries.size(); ++i) {
      if (isStopped()) {
        release(deliveries.subList(i, deliveries.size()));
        return;
      }
      Delivery delivery = deliveries.get(i);
      boolean handled = true;
      try {
        handler.handle(delivery);
      } catch (Exception e) {
        handled = false;
        options.onError.onError(delivery, e);
      }
      if (handled) {
        settle(List.of(delivery), true);
      } else {
        release(List.of(delivery));
      }
    }
  }

  private void release(List<Delivery> deliveries) {
    settle(deliveries, false);
  }

  // Acks or releases `deliveries`; failures go to onError.
  private void settle(List<Delivery> deliveries, boolean ack) {
    if (deliveries.isEmpty()) return;
    List<LeaseRef> leases = deliveries.stream()
        .map(d -> LeaseRef.newBuilder().setSequence(d.getEvent().getSequence())
            .setDeliveryCount(d.getDeliveryCount()).build())
        .toList();
    List<LeaseResult> results;
    try {
      results = ack
          ? client.ack(AckRequest.newBuilder().setGroup(group).setConsumer(consumer)
              .addAllLeases(leases).build()).getResultsList()
          : client.nack(NackRequest.newBuilder().setGroup(group).setConsumer(consumer)
              .addAllLeases(leases).build()).getResultsList();
    } catch (LapseException e) {
      for (Delivery delivery : deliveries) options.onError.onError(delivery, e);
      return;
    }
    for (int i = 0; i < results.size(); ++i) {
      LeaseResult result = results.get(i);
      if (result.getCode() != 0) {
        options.onError.onError(deliveries.get(i), new LapseException(
            Status.fromCodeValue(result.getCode()).withDescription(result.getMessage())
                .asRuntimeException()));
      }
    }
  }

  private void pause(Duration delay) {
    try {
      stopped.await(delay.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      stop();
    }
  }
}

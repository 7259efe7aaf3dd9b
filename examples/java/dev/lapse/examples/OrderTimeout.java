// The order-timeout flow with the Java client: a user places orders, at most
// 3 unpaid at once (max_members), each cancelled if unpaid when its TTL ends;
// paying one removes it (no expiry event); a pool of three workers of the
// consumer group "cancel-unpaid" cancels the others as their expiry events
// arrive. The group hands each event to one worker at a time and takes it
// back (for another worker) only if that worker's handler throws, so each
// timed-out order is cancelled exactly once however many workers run.
//
//   java -cp "$(cat build/gcc/client/java/classpath)" \
//     dev.lapse.examples.OrderTimeout 127.0.0.1:50051
//
// run() is also what OrderTimeoutTest runs against a real lapsed;
// `afterPayment` is where the test makes the TTL pass at once.
package dev.lapse.examples;

import com.google.protobuf.ByteString;
import dev.lapse.client.Expiration;
import dev.lapse.client.LapseClient;
import dev.lapse.client.LapseException;
import dev.lapse.client.Worker;
import dev.lapse.v1.ConsumerGroup;
import dev.lapse.v1.CreateConsumerGroupRequest;
import dev.lapse.v1.ExpiryEvent;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.RemoveMembersRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.BiConsumer;

public final class OrderTimeout {
  static final String GROUP = "cancel-unpaid";
  static final int WORKERS = 3;

  // What run() saw: the status of the 4th order, "order by worker" per
  // cancellation, and the group after the pool stopped.
  public static final class Outcome {
    public final Status.Code refused;
    public final List<String> cancelled;
    public final ConsumerGroup group;

    Outcome(Status.Code refused, List<String> cancelled, ConsumerGroup group) {
      this.refused = refused;
      this.cancelled = cancelled;
      this.group = group;
    }
  }

  private static PutMembersRequest order(String collection, String key, Duration ttl) {
    MemberWrite.Builder write = MemberWrite.newBuilder().setKey(key)
        .setValue(ByteString.copyFromUtf8("{\"total\": 12}"));
    return PutMembersRequest.newBuilder().setCollection(collection).setMaxMembers(3)
        .addMembers(Expiration.ttl(ttl).applyTo(write)).build();
  }

  // The group of the cancelling workers: every event of "unpaid:"
  // collections from now on, with the order's details.
  private static void createGroup(LapseClient client) {
    try {
      client.createConsumerGroup(CreateConsumerGroupRequest.newBuilder().setName(GROUP)
          .setCollectionPrefix("unpaid:").setIncludeValues(true).build());
    } catch (LapseException e) {
      if (e.getCode() != Status.Code.ALREADY_EXISTS) throw e;
    }
  }

  // Runs WORKERS workers of the group until `count` orders were cancelled (a
  // real pool runs until it is stopped).
  private static List<String> cancelTimedOutOrders(LapseClient client, int count)
      throws InterruptedException, ExecutionException {
    List<String> cancelled = Collections.synchronizedList(new ArrayList<>());
    // Completes once `count` orders were cancelled, or a worker ended with an
    // error.
    CompletableFuture<Void> enough = new CompletableFuture<>();
    List<Worker> pool = new ArrayList<>();
    List<CompletableFuture<Void>> running = new ArrayList<>();
    for (int number = 1; number <= WORKERS; ++number) {
      String name = "worker-" + number;
      Worker.Options options = new Worker.Options();
      options.maxEvents = 1;
      options.waitTime = Duration.ofSeconds(5);
      Worker worker = client.worker(GROUP, name, delivery -> {
        ExpiryEvent event = delivery.getEvent();
        System.out.println(name + " cancelled " + event.getKey() + " of "
            + event.getCollection().substring("unpaid:".length()) + ": "
            + event.getValue().toStringUtf8());
        cancelled.add(event.getKey() + " by " + name);
        if (cancelled.size() >= count) enough.complete(null);
      }, options);
      pool.add(worker);
      running.add(CompletableFuture.runAsync(worker::run).whenComplete((done, error) -> {
        if (error != null) enough.completeExceptionally(error);
      }));
    }
    enough.get();
    for (Worker worker : pool) worker.stop();
    for (CompletableFuture<Void> worker : running) worker.get();
    return new ArrayList<>(cancelled);
  }

  public static Outcome run(String address, Duration ttl,
      BiConsumer<LapseClient, String> afterPayment)
      throws InterruptedException, ExecutionException {
    String collection = "unpaid:user-42";
    try (LapseClient client = new LapseClient(address, new LapseClient.Options())) {
      createGroup(client);
      client.putMembers(order(collection, "order-1", ttl));
      client.putMembers(order(collection, "order-2", ttl));
      client.putMembers(order(collection, "order-3", ttl));
      Status.Code refused = Status.Code.OK;
      try {
        client.putMembers(order(collection, "order-4", ttl));
      } catch (LapseException e) {
        refused = e.getCode();
      }
      boolean paid = client.removeMembers(RemoveMembersRequest.newBuilder()
          .setCollection(collection).addKeys("order-2").build()).getResults(0).getExisted();
      if (!paid) throw new IllegalStateException("order-2 expired before it was paid");
      afterPayment.accept(client, collection);
      List<String> cancelled = cancelTimedOutOrders(client, 2);
      return new Outcome(refused, cancelled, client.getConsumerGroup(GROUP, 0));
    }
  }

  public static void main(String[] args) throws Exception {
    Outcome outcome = run(args.length > 0 ? args[0] : "127.0.0.1:50051", Duration.ofSeconds(2),
        (client, collection) -> { });
    System.out.println("cancelled: " + String.join(", ", outcome.cancelled));
  }
}

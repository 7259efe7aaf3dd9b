// The order-timeout flow with the Java client: a user places orders, at most
// 3 unpaid at once (max_members), each cancelled if unpaid when its TTL ends;
// paying one removes it; a watcher cancels the others as their expiry events
// arrive, each once.
//
//   java -cp "$(cat build/clang/client/java/classpath)" \
//     dev.lapse.examples.OrderTimeout 127.0.0.1:50051
//
// run() is also what OrderTimeoutTest runs against a real lapsed;
// `afterPayment` is where the test makes the TTL pass at once.
package dev.lapse.examples;

import com.google.protobuf.ByteString;
import dev.lapse.client.Expiration;
import dev.lapse.client.ExpiryWatch;
import dev.lapse.client.LapseClient;
import dev.lapse.client.LapseException;
import dev.lapse.v1.ExpiryEvent;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.RemoveMembersRequest;
import dev.lapse.v1.StartPosition;
import dev.lapse.v1.WatchExpirationsRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;

public final class OrderTimeout {
  // What run() saw: the status of the 4th order and the orders cancelled.
  public static final class Outcome {
    public final Status.Code refused;
    public final List<String> cancelled;

    Outcome(Status.Code refused, List<String> cancelled) {
      this.refused = refused;
      this.cancelled = cancelled;
    }
  }

  private static PutMembersRequest order(String collection, String key, Duration ttl) {
    MemberWrite.Builder write = MemberWrite.newBuilder().setKey(key)
        .setValue(ByteString.copyFromUtf8("{\"total\": 12}"));
    return PutMembersRequest.newBuilder().setCollection(collection).setMaxMembers(3)
        .addMembers(Expiration.ttl(ttl).applyTo(write)).build();
  }

  public static Outcome run(String address, Duration ttl,
      BiConsumer<LapseClient, String> afterPayment) throws InterruptedException {
    String collection = "unpaid:user-42";
    try (LapseClient client = new LapseClient(address, new LapseClient.Options());
        ExpiryWatch watch = client.watch(WatchExpirationsRequest.newBuilder()
            .setCollectionPrefix("unpaid:").setIncludeValues(true)
            // Every event the server still holds: none is missed however
            // late the stream starts. A long-running worker would store
            // watch.position() and resume from it instead.
            .setStartPosition(StartPosition.START_POSITION_OLDEST).build())) {
      List<String> cancelled = new ArrayList<>();
      Thread watcher = new Thread(() -> {
        while (cancelled.size() < 2 && watch.hasNext()) {
          ExpiryEvent event = watch.next();
          System.out.println("cancelling " + event.getKey() + " of " + event.getCollection()
              + ": " + event.getValue().toStringUtf8());
          cancelled.add(event.getKey());
        }
      });
      watcher.start();
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
      watcher.join();
      return new Outcome(refused, cancelled);
    }
  }

  public static void main(String[] args) throws InterruptedException {
    Outcome outcome = run(args.length > 0 ? args[0] : "127.0.0.1:50051", Duration.ofSeconds(2),
        (client, collection) -> { });
    System.out.println("cancelled: " + String.join(", ", outcome.cancelled));
  }
}

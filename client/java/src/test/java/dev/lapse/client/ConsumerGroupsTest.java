// Consumer groups from Java: the admin calls and Worker against a real lapsed
// (LAPSED, from CMake), and Worker's polling against an in-process fake.
package dev.lapse.client;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import dev.lapse.testing.LapsedProcess;
import dev.lapse.v1.AckRequest;
import dev.lapse.v1.ConsumerGroup;
import dev.lapse.v1.CreateConsumerGroupRequest;
import dev.lapse.v1.Delivery;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.ExtendLeasesRequest;
import dev.lapse.v1.LapseServiceGrpc;
import dev.lapse.v1.LeaseRef;
import dev.lapse.v1.ListConsumerGroupsRequest;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.NackRequest;
import dev.lapse.v1.PollRequest;
import dev.lapse.v1.PollResponse;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.ResetConsumerGroupRequest;
import dev.lapse.v1.StartPosition;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.junit.Test;

public class ConsumerGroupsTest {
  // Expires `keys` of `collection` now: one event each, in this order.
  private static void expireNow(LapseClient client, String collection, String... keys) {
    PutMembersRequest.Builder put = PutMembersRequest.newBuilder().setCollection(collection);
    ExpireMembersRequest.Builder expire =
        ExpireMembersRequest.newBuilder().setCollection(collection);
    for (String key : keys) {
      put.addMembers(MemberWrite.newBuilder().setKey(key));
      expire.addKeys(key);
    }
    client.putMembers(put.build());
    client.expireMembers(Expiration.at(Instant.now().minusSeconds(1)).applyTo(expire).build());
  }

  private static LeaseRef lease(Delivery delivery) {
    return LeaseRef.newBuilder().setSequence(delivery.getEvent().getSequence())
        .setDeliveryCount(delivery.getDeliveryCount()).build();
  }

  private static CreateConsumerGroupRequest group(String name, String prefix) {
    return CreateConsumerGroupRequest.newBuilder().setName(name).setCollectionPrefix(prefix)
        .build();
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void createsGetsListsResetsAndDeletesAGroupAndLeasesEvents() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of());
        LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options())) {
      ConsumerGroup created = client.createConsumerGroup(group("g", "orders:").toBuilder()
          .setMaxDeliveries(3).build());
      assertEquals(3, created.getMaxDeliveries());
      assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(LapseException.class,
          () -> client.createConsumerGroup(group("g", "orders:"))).getCode());
      assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(LapseException.class,
          () -> client.createConsumerGroup(group("h", "b").toBuilder().addCollections("a")
              .build())).getCode());

      expireNow(client, "orders:1", "a");
      PollResponse polled = client.poll(PollRequest.newBuilder().setGroup("g").setConsumer("c1")
          .setMaxEvents(5).build());
      assertEquals(1, polled.getDeliveriesCount());
      Delivery delivery = polled.getDeliveries(0);
      assertEquals("a", delivery.getEvent().getKey());
      assertEquals(1, client.getConsumerGroup("g", 10).getLeasesCount());
      assertEquals(0, client.extendLeases(ExtendLeasesRequest.newBuilder().setGroup("g")
          .setConsumer("c1").addLeases(lease(delivery))
          .setExtension(com.google.protobuf.Duration.newBuilder().setSeconds(60)).build())
          .getResults(0).getCode());
      assertEquals(0, client.nack(NackRequest.newBuilder().setGroup("g").setConsumer("c1")
          .addLeases(lease(delivery)).build()).getResults(0).getCode());
      Delivery again = client.poll(PollRequest.newBuilder().setGroup("g").setConsumer("c2")
          .build()).getDeliveries(0);
      assertEquals(2, again.getDeliveryCount());
      AckRequest ack = AckRequest.newBuilder().setGroup("g").setConsumer("c2")
          .addLeases(lease(again)).build();
      assertEquals(0, client.ack(ack).getResults(0).getCode());
      assertEquals(Status.Code.FAILED_PRECONDITION.value(),
          client.ack(ack).getResults(0).getCode());

      List<ConsumerGroup> groups = client.listConsumerGroups(
          ListConsumerGroupsRequest.getDefaultInstance()).getGroupsList();
      assertEquals(1, groups.size());
      assertEquals(1, groups.get(0).getAckedTotal());
      ConsumerGroup reset = client.resetConsumerGroup(ResetConsumerGroupRequest.newBuilder()
          .setName("g").setStartPosition(StartPosition.START_POSITION_OLDEST).build());
      assertTrue(Long.compareUnsigned(reset.getPosition(), delivery.getEvent().getSequence()) < 0);
      assertEquals("g", client.deleteConsumerGroup("g").getName());
      assertEquals(Status.Code.NOT_FOUND,
          assertThrows(LapseException.class, () -> client.getConsumerGroup("g", 0)).getCode());
      assertEquals(0, lapsed.stop());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void aWorkerAcksWhatItsHandlerHandledAndRedeliversWhatItThrewOn() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of());
        LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options())) {
      client.createConsumerGroup(group("g", "orders:"));
      expireNow(client, "orders:1", "a", "b");
      List<String> handled = Collections.synchronizedList(new ArrayList<>());
      List<String> errors = Collections.synchronizedList(new ArrayList<>());
      CountDownLatch three = new CountDownLatch(3);
      Worker.Options options = new Worker.Options();
      options.maxEvents = 1;
      options.waitTime = Duration.ofSeconds(1);
      options.onError = (delivery, error) -> errors.add(error.getMessage());
      Worker worker = client.worker("g", "w1", delivery -> {
        handled.add(delivery.getEvent().getKey() + "/" + delivery.getDeliveryCount());
        three.countDown();
        if (delivery.getEvent().getKey().equals("a") && delivery.getDeliveryCount() == 1) {
          throw new IllegalStateException("payment service down");
        }
      }, options);
      CompletableFuture<Void> running = CompletableFuture.runAsync(worker::run);
      three.await();
      worker.stop();
      running.get();
      assertEquals(List.of("a/1", "a/2", "b/1"), handled);
      assertEquals(List.of("payment service down"), errors);
      ConsumerGroup after = client.getConsumerGroup("g", 0);
      assertEquals(2, after.getAckedTotal());
      assertEquals(0, after.getPending());
      assertEquals(0, lapsed.stop());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void aWorkerEndsWithOutOfRangeNamingTheEventsItsGroupLost() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of("--event_retention_events=2"));
        LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options())) {
      client.createConsumerGroup(group("g", "orders:"));
      expireNow(client, "orders:1", "a", "b", "c", "d");
      Worker.Options options = new Worker.Options();
      options.waitTime = Duration.ofSeconds(1);
      Worker worker = client.worker("g", "w1", delivery -> { }, options);
      Worker.LostEventsException lost =
          assertThrows(Worker.LostEventsException.class, worker::run);
      assertEquals(Status.Code.OUT_OF_RANGE, lost.getCode());
      assertEquals(lost.firstSequence() + 1, lost.lastSequence());
      assertTrue(lost.getMessage(), lost.getMessage().contains("lost events "
          + Long.toUnsignedString(lost.firstSequence()) + ".."
          + Long.toUnsignedString(lost.lastSequence())));
      assertEquals(0, lapsed.stop());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void aWorkerPollsAgainUnderItsNameAfterUnavailableAndPausesAfterAnEmptyAnswer()
      throws Exception {
    List<PollRequest> polls = Collections.synchronizedList(new ArrayList<>());
    List<Long> at = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch third = new CountDownLatch(3);
    LapseServiceGrpc.LapseServiceImplBase fake = new LapseServiceGrpc.LapseServiceImplBase() {
      @Override
      public void poll(PollRequest request, StreamObserver<PollResponse> response) {
        polls.add(request);
        at.add(System.nanoTime());
        if (polls.size() == 1) {
          response.onError(Status.UNAVAILABLE.withDescription("restarting").asRuntimeException());
        } else {
          response.onNext(PollResponse.getDefaultInstance());
          response.onCompleted();
        }
        third.countDown();
      }
    };
    String name = InProcessServerBuilder.generateName();
    Server server = InProcessServerBuilder.forName(name).addService(fake).build().start();
    LapseClient.Options clientOptions = new LapseClient.Options();
    clientOptions.retryBackoff = new Backoff.Policy(Duration.ofMillis(1), Duration.ofMillis(1), 1);
    clientOptions.idlePollBackoff =
        new Backoff.Policy(Duration.ofMillis(400), Duration.ofMillis(400), 1);
    try (LapseClient client =
        new LapseClient(InProcessChannelBuilder.forName(name).build(), clientOptions)) {
      Worker.Options options = new Worker.Options();
      options.waitTime = Duration.ofSeconds(5);
      Worker worker = client.worker("g", "w1", delivery -> { }, options);
      CompletableFuture<Void> running = CompletableFuture.runAsync(worker::run);
      third.await();
      worker.stop();
      running.get();
      for (PollRequest poll : polls.subList(0, 3)) {
        assertEquals("w1", poll.getConsumer());
        assertEquals(5, poll.getWait().getSeconds());
      }
      // The pause after the empty answer is at least half the idle backoff.
      long pausedMs = (at.get(2) - at.get(1)) / 1_000_000;
      assertTrue("polled again after " + pausedMs + " ms", pausedMs >= 200);
    } finally {
      server.shutdownNow();
    }
  }
}

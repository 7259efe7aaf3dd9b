// ExpiryWatch against a real lapsed (LAPSED, from CMake): it survives a
// durable lapsed's restart with no gap and no duplicate, throws OUT_OF_RANGE
// instead of skipping (a memory-only lapsed that restarted included), and
// throws on a bad filter.
package dev.lapse.client;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import dev.lapse.testing.LapsedProcess;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.ExpireOutcome;
import dev.lapse.v1.ExpiryEvent;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.StartPosition;
import dev.lapse.v1.WatchExpirationsRequest;
import io.grpc.Status;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.junit.Test;

public class ExpiryWatchTest {
  // Expires `keys` of `collection` now: one event each, in this order.
  private static void expireNow(LapseClient client, String collection, String... keys) {
    PutMembersRequest.Builder put = PutMembersRequest.newBuilder().setCollection(collection);
    for (String key : keys) put.addMembers(MemberWrite.newBuilder().setKey(key));
    client.putMembers(put.build());
    for (String key : keys) {
      ExpireMembersRequest.Builder expire =
          ExpireMembersRequest.newBuilder().setCollection(collection).addKeys(key);
      assertEquals(ExpireOutcome.EXPIRE_OUTCOME_EXPIRED, client.expireMembers(
          Expiration.at(Instant.now().minusSeconds(1)).applyTo(expire).build())
          .getResults(0).getOutcome());
    }
  }

  private static LapseClient.Options fastReconnects() {
    LapseClient.Options options = new LapseClient.Options();
    options.watchBackoff = new Backoff.Policy(Duration.ofMillis(10), Duration.ofMillis(200), 2.0);
    return options;
  }

  @Test
  public void resumesAcrossADurableLapsedStopAndRestartWithNoGapAndNoDuplicate()
      throws Exception {
    resumesAcrossARestart(false);
  }

  @Test
  public void resumesAcrossADurableLapsedKillAndRestartWithNoGapAndNoDuplicate()
      throws Exception {
    resumesAcrossARestart(true);
  }

  // A watch from OLDEST of a durable lapsed that is stopped (SIGTERM, which
  // names the last delivered sequence) or killed (SIGKILL, which names
  // nothing) and restarts on the same port and store.
  private static void resumesAcrossARestart(boolean kill) throws Exception {
    List<String> flags = List.of("--data-dir=" + LapsedProcess.tempDir());
    LapsedProcess lapsed = LapsedProcess.start(flags);
    int port = lapsed.port();
    List<Status.Code> reconnects = new ArrayList<>();
    try (LapseClient watcher = new LapseClient(lapsed.address(), fastReconnects());
        ExpiryWatch watch = watcher.watch(WatchExpirationsRequest.newBuilder()
            .addCollections("orders").setStartPosition(StartPosition.START_POSITION_OLDEST)
            .build(), status -> reconnects.add(status.getCode()))) {
      try (LapseClient writer = new LapseClient(lapsed.address(), new LapseClient.Options())) {
        expireNow(writer, "orders", "k1");
        expireNow(writer, "other", "ignored");
      }
      ExpiryEvent first = watch.next();
      assertEquals("k1", first.getKey());
      if (kill) {
        lapsed.kill();
      } else {
        assertEquals(0, lapsed.stop());
      }

      // A new lapsed on the same port and store; events expire there before
      // the watch is back: it must resume after k1 and get them all, once.
      lapsed = LapsedProcess.start(flags, port);
      try (LapseClient writer = new LapseClient(lapsed.address(), new LapseClient.Options())) {
        expireNow(writer, "orders", "k2", "k3");
        ExpiryEvent second = watch.next();
        ExpiryEvent third = watch.next();
        expireNow(writer, "orders", "k4");
        ExpiryEvent fourth = watch.next();
        assertEquals(List.of("k2", "k3", "k4"),
            List.of(second.getKey(), third.getKey(), fourth.getKey()));
        assertTrue(first.getSequence() < second.getSequence());
        assertTrue(second.getSequence() < third.getSequence());
        assertEquals(fourth.getSequence(), watch.position().getAsLong());
      }
      assertFalse(reconnects.isEmpty());
      for (Status.Code code : reconnects) assertEquals(Status.Code.UNAVAILABLE, code);
      watch.close();
      assertFalse(watch.hasNext());
    } finally {
      assertEquals(0, lapsed.stop());
      lapsed.close();
    }
  }

  @Test
  public void throwsOutOfRangeWhenTheEventsToResumeFromAreGone() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of("--event_retention_events=2"));
        LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options())) {
      expireNow(client, "c", "a", "b", "c", "d");
      ExpiryEvent retained;
      try (ExpiryWatch oldest = client.watch(WatchExpirationsRequest.newBuilder()
          .setStartPosition(StartPosition.START_POSITION_OLDEST).build())) {
        retained = oldest.next();
      }
      assertEquals("c", retained.getKey());
      try (ExpiryWatch resumed = client.watch(WatchExpirationsRequest.newBuilder()
          .setStartPosition(StartPosition.START_POSITION_AFTER_SEQUENCE)
          .setAfterSequence(retained.getSequence() - 3).build())) {
        LapseException e = assertThrows(LapseException.class, resumed::hasNext);
        assertEquals(Status.Code.OUT_OF_RANGE, e.getCode());
        assertTrue(e.getMessage(), e.getMessage().contains(Long.toString(retained.getSequence())));
      }
      assertEquals(0, lapsed.stop());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void throwsOutOfRangeWhenItResumesOnAMemoryOnlyLapsedThatRestarted() throws Exception {
    LapsedProcess lapsed = LapsedProcess.start(List.of());
    int port = lapsed.port();
    // The watch reconnects only once the new store has more events than the
    // old one had: resuming by sequence would then silently skip to them.
    CountDownLatch restarted = new CountDownLatch(1);
    try (LapseClient watcher = new LapseClient(lapsed.address(), fastReconnects());
        ExpiryWatch watch = watcher.watch(WatchExpirationsRequest.newBuilder()
            .setStartPosition(StartPosition.START_POSITION_OLDEST).build(), status -> {
              try {
                restarted.await();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            })) {
      try (LapseClient writer = new LapseClient(lapsed.address(), new LapseClient.Options())) {
        expireNow(writer, "orders", "k1");
      }
      assertEquals("k1", watch.next().getKey());
      CompletableFuture<LapseException> ended = CompletableFuture.supplyAsync(
          () -> assertThrows(LapseException.class, watch::hasNext));
      lapsed.kill();
      lapsed = LapsedProcess.start(List.of(), port);
      try (LapseClient writer = new LapseClient(lapsed.address(), new LapseClient.Options())) {
        expireNow(writer, "orders", "n1", "n2", "n3");
      }
      restarted.countDown();
      LapseException e = ended.get();
      assertEquals(Status.Code.OUT_OF_RANGE, e.getCode());
      assertTrue(e.getMessage(), e.getMessage().contains("resume_token: belongs to store"));
    } finally {
      assertEquals(0, lapsed.stop());
      lapsed.close();
    }
  }

  @Test
  public void endsItsWatchesWhenTheClientCloses() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of())) {
      LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options());
      ExpiryWatch watch = client.watch(WatchExpirationsRequest.getDefaultInstance());
      Thread reader = new Thread(() -> assertFalse(watch.hasNext()));
      reader.start();
      client.close();
      reader.join(LapsedProcess.PATIENCE_SECONDS * 1000);
      assertFalse("hasNext() still blocks after the client closed", reader.isAlive());
      assertEquals(0, lapsed.stop());
    }
  }

  @Test
  public void throwsInvalidArgumentForABadFilterInsteadOfRetrying() throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of());
        LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options());
        ExpiryWatch watch = client.watch(WatchExpirationsRequest.newBuilder()
            .addCollections("a").setCollectionPrefix("b").build())) {
      assertEquals(Status.Code.INVALID_ARGUMENT,
          assertThrows(LapseException.class, watch::hasNext).getCode());
      assertEquals(0, lapsed.stop());
    }
  }
}

// The Java order-timeout example end to end against a real lapsed (LAPSED,
// from CMake): the 4th unpaid order is refused, the paid one is never
// cancelled, the others are cancelled exactly once by the pool of three
// workers. The TTL is 30 minutes;
// the test makes it pass at once after the payment, by expiring the unpaid
// orders now.
package dev.lapse.examples;

import static org.junit.Assert.assertEquals;

import dev.lapse.client.Expiration;
import dev.lapse.testing.LapsedProcess;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.ListMembersRequest;
import dev.lapse.v1.Member;
import io.grpc.Status;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.Test;

public class OrderTimeoutTest {
  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void aPoolOfThreeWorkersCancelsEachUnpaidOrderOnceAndNeverThePaidOne()
      throws Exception {
    try (LapsedProcess lapsed = LapsedProcess.start(List.of())) {
      OrderTimeout.Outcome outcome = OrderTimeout.run(lapsed.address(), Duration.ofMinutes(30),
          (client, collection) -> {
            ExpireMembersRequest.Builder now =
                ExpireMembersRequest.newBuilder().setCollection(collection);
            for (Member m : client.listMembers(ListMembersRequest.newBuilder()
                .setCollection(collection).build()).getMembersList()) {
              now.addKeys(m.getKey());
            }
            client.expireMembers(Expiration.at(Instant.now().minusSeconds(1)).applyTo(now).build());
          });
      assertEquals(Status.Code.FAILED_PRECONDITION, outcome.refused);
      assertEquals(List.of("order-1", "order-3"), outcome.cancelled.stream()
          .map(c -> c.split(" ")[0]).sorted().collect(Collectors.toList()));
      // Exactly once: two deliveries in all, both acknowledged, nothing pending.
      assertEquals(2, outcome.group.getDeliveredTotal());
      assertEquals(2, outcome.group.getAckedTotal());
      assertEquals(0, outcome.group.getPending());
      assertEquals(0, lapsed.stop());
    }
  }
}

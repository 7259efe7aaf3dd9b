// LapseException: how every failed call and watch of LapseClient ends. It
// carries the gRPC Status: its code (INVALID_ARGUMENT, NOT_FOUND,
// OUT_OF_RANGE, ...) and the server's message, which names the field at fault
// for INVALID_ARGUMENT ("members[0].ttl: must be positive").
//
//   try {
//     client.getCollection("nothing");
//   } catch (LapseException e) {
//     if (e.getCode() == Status.Code.NOT_FOUND) ...
//   }
package dev.lapse.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

public class LapseException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Status status;

  public LapseException(StatusRuntimeException cause) {
    super(cause.getStatus().getCode() + ": " + cause.getStatus().getDescription(), cause);
    this.status = cause.getStatus();
  }

  public Status getStatus() {
    return status;
  }

  public Status.Code getCode() {
    return status.getCode();
  }
}

// Test support for the Java client's tests and example: a real lapsed as a
// child process (like testing/lapsed_process.cc), temporary directories, TLS
// material (testing/test_certs.sh) and --auth_file grants.
//
//   try (LapsedProcess lapsed = LapsedProcess.start(List.of("--data-dir=" + dir))) {
//     LapseClient client = new LapseClient(lapsed.address(), new LapseClient.Options());
//     ...
//     assertEquals(0, lapsed.stop());  // SIGTERM, then the exit code; or kill(): SIGKILL
//   }
//
// lapsed (the path in the LAPSED environment variable, set by CMake) listens
// on 127.0.0.1:`port` (0: the kernel picks) with errors-only logging and a
// short shutdown grace, then the test's flags (which win); its port is read
// from its start line ("lapsed listening on ... (port N) ..."). Not
// thread-safe; close() kills a lapsed that is still running.
package dev.lapse.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

public final class LapsedProcess implements AutoCloseable {
  // How long a test waits for something that should happen at once.
  public static final long PATIENCE_SECONDS = 30;

  private static final Pattern START_LINE = Pattern.compile("listening on \\S+ \\(port (\\d+)\\)");

  private final Process process;
  private final int port;

  private LapsedProcess(Process process, int port) {
    this.process = process;
    this.port = port;
  }

  public static LapsedProcess start(List<String> flags) throws IOException {
    return start(flags, 0);
  }

  // Returns once lapsed printed its start line; throws if it exits first
  // (e.g. a refused flag) or prints none within PATIENCE_SECONDS.
  public static LapsedProcess start(List<String> flags, int port) throws IOException {
    String path = System.getenv("LAPSED");
    if (path == null) throw new IllegalStateException("LAPSED (the lapsed binary) is not set");
    List<String> command = new ArrayList<>(List.of(path, "--listen=127.0.0.1:" + port,
        "--log_level=error", "--shutdown_grace=200ms"));
    command.addAll(flags);
    Process process = new ProcessBuilder(command)
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
    CompletableFuture<Integer> bound = CompletableFuture.supplyAsync(() -> readPort(process));
    try {
      return new LapsedProcess(process, bound.get(PATIENCE_SECONDS, TimeUnit.SECONDS));
    } catch (InterruptedException | ExecutionException | TimeoutException e) {
      process.destroyForcibly();
      throw new IOException("no start line from " + String.join(" ", command), e);
    }
  }

  // The port of the start line; stdout is then drained so lapsed never blocks.
  private static int readPort(Process process) {
    BufferedReader lines = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    try {
      for (String line; (line = lines.readLine()) != null; ) {
        Matcher m = START_LINE.matcher(line);
        if (m.find()) {
          Thread drain = new Thread(() -> lines.lines().forEach(ignored -> { }));
          drain.setDaemon(true);
          drain.start();
          return Integer.parseInt(m.group(1));
        }
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    throw new IllegalStateException("lapsed exited before its start line");
  }

  public int port() {
    return port;
  }

  public String address() {
    return "127.0.0.1:" + port;
  }

  // SIGTERM, then the exit code (-1 if lapsed had to be killed).
  public int stop() throws InterruptedException {
    process.destroy();
    if (process.waitFor(PATIENCE_SECONDS, TimeUnit.SECONDS)) return process.exitValue();
    process.destroyForcibly().waitFor();
    return -1;
  }

  // SIGKILL: no shutdown, no message to clients; returns once lapsed is gone.
  public void kill() throws InterruptedException {
    process.destroyForcibly().waitFor();
  }

  @Override
  public void close() {
    process.destroyForcibly();
  }

  // The files testing/test_certs.sh makes: a test CA, a server certificate for
  // localhost and 127.0.0.1, a client certificate, and their keys.
  public static final class Certs {
    public final Path ca;
    public final Path serverCert;
    public final Path serverKey;
    public final Path clientCert;
    public final Path clientKey;

    Certs(Path dir) {
      ca = dir.resolve("ca.crt");
      serverCert = dir.resolve("server.crt");
      serverKey = dir.resolve("server.key");
      clientCert = dir.resolve("client.crt");
      clientKey = dir.resolve("client.key");
    }
  }

  // Runs testing/test_certs.sh (TEST_CERTS, set by CMake) into a fresh
  // directory.
  public static Certs makeCerts() throws IOException, InterruptedException {
    String script = System.getenv("TEST_CERTS");
    if (script == null) throw new IllegalStateException("TEST_CERTS (test_certs.sh) is not set");
    Path dir = tempDir();
    Process p = new ProcessBuilder("bash", script, dir.toString()).inheritIO().start();
    if (p.waitFor() != 0) throw new IOException(script + " exited " + p.exitValue());
    return new Certs(dir);
  }

  // An --auth_file granting each token its grant ("permissions prefixes"), in
  // a fresh directory.
  public static Path writeAuthFile(Map<String, String> grants) throws IOException {
    StringBuilder lines = new StringBuilder();
    for (Map.Entry<String, String> grant : grants.entrySet()) {
      byte[] hash;
      try {
        hash = MessageDigest.getInstance("SHA-256")
            .digest(grant.getKey().getBytes(StandardCharsets.UTF_8));
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
      lines.append("token:sha256:").append(HexFormat.of().formatHex(hash)).append(' ')
          .append(grant.getValue()).append('\n');
    }
    Path file = tempDir().resolve("auth");
    Files.writeString(file, lines);
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
    return file;
  }

  // A fresh directory under java.io.tmpdir, removed when the JVM exits.
  public static Path tempDir() throws IOException {
    Path dir = Files.createTempDirectory("lapse-java-test-");
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try (Stream<Path> paths = Files.walk(dir)) {
        paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }));
    return dir;
  }
}

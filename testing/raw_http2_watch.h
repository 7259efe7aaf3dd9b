// RawHttp2Watch: a WatchExpirations stream opened over a plain TCP socket with
// hand-written HTTP/2 frames, for tests that need a client that stops reading.
// gRPC's own client keeps draining its socket into its own buffers even when
// the application reads nothing; this one reads only when the test asks, so
// the server's writes really stall: behind the stream's flow-control window
// (a small `window`) or, with a large window, behind a full TCP connection.
//
//   RawHttp2Watch stalled(server.port(), AllEvents(), /*window=*/0);
//   ASSERT_TRUE(stalled.WaitForHeaders());  // the server's stream is in place
//   ... expire members: the server's write never completes ...
//   server.server().Shutdown(absl::Seconds(1));
//
// The client speaks just enough HTTP/2 for one stream: the preface, one
// SETTINGS frame (INITIAL_WINDOW_SIZE = `window`; no acknowledgement of the
// server's), a WINDOW_UPDATE raising the connection's window to `window`,
// HEADERS with literal HPACK fields (no Huffman, no dynamic table) and one
// DATA frame carrying the gRPC-framed request. It never sends WINDOW_UPDATE
// again, so the server can send at most `window` bytes of messages.
//
// Not thread-safe. The destructor closes the socket.
#ifndef LAPSE_TESTING_RAW_HTTP2_WATCH_H_
#define LAPSE_TESTING_RAW_HTTP2_WATCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "lapse/v1/lapse.pb.h"

namespace lapse::testing {

class RawHttp2Watch final {
 public:
  // Connects to 127.0.0.1:`port` and sends the stream's request. A failure
  // (connection refused, short write) shows as WaitForHeaders() == false.
  RawHttp2Watch(int port, const v1::WatchExpirationsRequest& request, uint32_t window);
  ~RawHttp2Watch();
  RawHttp2Watch(const RawHttp2Watch&) = delete;
  RawHttp2Watch& operator=(const RawHttp2Watch&) = delete;

  // Reads frames (at most kPatience) until the server's response HEADERS for
  // the stream: true once they came, i.e. once the server's reactor holds the
  // stream. Frames the server sends before them are read and dropped.
  bool WaitForHeaders();

  // Reads frames (at most kPatience) until the connection ends or the stream
  // is reset or finished; what ended it: "closed", "rst_stream",
  // "trailers: grpc-status ..." (the raw HPACK block, for a substring
  // match), or "timeout". Reading again lets the server's stalled writes go
  // on, within the window.
  std::string WaitForEnd();

  // The value of the server's SETTINGS parameter `id` (RFC 9113 6.5.2, e.g.
  // 0x3 for MAX_CONCURRENT_STREAMS), from the SETTINGS frames read so far;
  // nullopt if the server did not send it.
  std::optional<uint32_t> ServerSetting(uint16_t id) const;

 private:
  struct Frame {
    uint8_t type = 0;
    uint8_t flags = 0;
    uint32_t stream = 0;
    std::string payload;
  };

  // Reads one frame, noting the server's settings; false when the connection
  // ended or kPatience passed (`timed_out` tells which).
  bool ReadFrame(Frame* frame, bool* timed_out);
  bool ReadFully(char* data, size_t size, bool* timed_out);

  int fd_ = -1;
  bool headers_seen_ = false;
  std::map<uint16_t, uint32_t> server_settings_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_RAW_HTTP2_WATCH_H_

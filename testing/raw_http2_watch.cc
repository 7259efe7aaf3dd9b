#include "testing/raw_http2_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

constexpr uint8_t kData = 0x0;
constexpr uint8_t kHeaders = 0x1;
constexpr uint8_t kRstStream = 0x3;
constexpr uint8_t kSettings = 0x4;
constexpr uint8_t kGoAway = 0x7;
constexpr uint8_t kWindowUpdate = 0x8;
constexpr uint8_t kEndStream = 0x1;
constexpr uint8_t kEndHeaders = 0x4;
constexpr uint16_t kSettingsInitialWindowSize = 0x4;
constexpr uint32_t kStream = 1;
// The connection's window before any WINDOW_UPDATE (RFC 9113 6.9.2).
constexpr uint32_t kDefaultConnectionWindow = 65535;

void AppendBigEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t BigEndian(const char* data, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<uint8_t>(data[i]);
  return value;
}

void AppendFrame(std::string* out, uint8_t type, uint8_t flags, uint32_t stream,
                 const std::string& payload) {
  AppendBigEndian(out, payload.size(), 3);
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  AppendBigEndian(out, stream, 4);
  out->append(payload);
}

// An HPACK "literal header field without indexing, new name" (RFC 7541
// 6.2.2) with raw (non-Huffman) strings; every name and value here is shorter
// than 127 bytes, so each length fits the 7-bit prefix.
void AppendLiteralHeader(std::string* block, const std::string& name, const std::string& value) {
  block->push_back('\0');
  block->push_back(static_cast<char>(name.size()));
  block->append(name);
  block->push_back(static_cast<char>(value.size()));
  block->append(value);
}

std::string Handshake(int port, const v1::WatchExpirationsRequest& request, uint32_t window) {
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::string settings;
  AppendBigEndian(&settings, kSettingsInitialWindowSize, 2);
  AppendBigEndian(&settings, window, 4);
  AppendFrame(&out, kSettings, 0, 0, settings);
  if (window > kDefaultConnectionWindow) {
    std::string increment;
    AppendBigEndian(&increment, window - kDefaultConnectionWindow, 4);
    AppendFrame(&out, kWindowUpdate, 0, 0, increment);
  }
  std::string headers;
  AppendLiteralHeader(&headers, ":method", "POST");
  AppendLiteralHeader(&headers, ":scheme", "http");
  AppendLiteralHeader(&headers, ":path", "/lapse.v1.LapseService/WatchExpirations");
  AppendLiteralHeader(&headers, ":authority", absl::StrCat("127.0.0.1:", port));
  AppendLiteralHeader(&headers, "content-type", "application/grpc");
  AppendLiteralHeader(&headers, "te", "trailers");
  AppendFrame(&out, kHeaders, kEndHeaders, kStream, headers);
  const std::string message = request.SerializeAsString();
  std::string data(1, '\0');  // not compressed
  AppendBigEndian(&data, message.size(), 4);
  data += message;
  AppendFrame(&out, kData, kEndStream, kStream, data);
  return out;
}

}  // namespace

RawHttp2Watch::RawHttp2Watch(int port, const v1::WatchExpirationsRequest& request,
                             uint32_t window) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const std::string handshake = Handshake(port, request, window);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      send(fd_, handshake.data(), handshake.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(handshake.size())) {
    close(fd_);
    fd_ = -1;
  }
}

RawHttp2Watch::~RawHttp2Watch() {
  if (fd_ >= 0) close(fd_);
}

bool RawHttp2Watch::WaitForHeaders() {
  Frame frame;
  bool timed_out = false;
  while (!headers_seen_ && ReadFrame(&frame, &timed_out)) {
    if (frame.type == kHeaders && frame.stream == kStream) headers_seen_ = true;
  }
  return headers_seen_;
}

std::string RawHttp2Watch::WaitForEnd() {
  Frame frame;
  bool timed_out = false;
  while (ReadFrame(&frame, &timed_out)) {
    if (frame.type == kGoAway) continue;
    if (frame.stream != kStream) continue;
    if (frame.type == kRstStream) return "rst_stream";
    if (frame.type == kHeaders) {
      if (!headers_seen_) {
        headers_seen_ = true;
        if ((frame.flags & kEndStream) == 0) continue;
      }
      return absl::StrCat("trailers: ", frame.payload);
    }
  }
  return timed_out ? "timeout" : "closed";
}

std::optional<uint32_t> RawHttp2Watch::ServerSetting(uint16_t id) const {
  const auto it = server_settings_.find(id);
  if (it == server_settings_.end()) return std::nullopt;
  return it->second;
}

bool RawHttp2Watch::ReadFrame(Frame* frame, bool* timed_out) {
  char header[9];
  if (!ReadFully(header, sizeof(header), timed_out)) return false;
  const size_t length = BigEndian(header, 3);
  frame->type = static_cast<uint8_t>(header[3]);
  frame->flags = static_cast<uint8_t>(header[4]);
  frame->stream = static_cast<uint32_t>(BigEndian(header + 5, 4)) & 0x7fffffff;
  frame->payload.resize(length);
  if (!ReadFully(frame->payload.data(), length, timed_out)) return false;
  constexpr uint8_t kAck = 0x1;
  if (frame->type == kSettings && (frame->flags & kAck) == 0) {
    for (size_t at = 0; at + 6 <= length; at += 6) {
      server_settings_[static_cast<uint16_t>(BigEndian(&frame->payload[at], 2))] =
          static_cast<uint32_t>(BigEndian(&frame->payload[at + 2], 4));
    }
  }
  return true;
}

bool RawHttp2Watch::ReadFully(char* data, size_t size, bool* timed_out) {
  if (fd_ < 0) return false;
  const absl::Time deadline = absl::Now() + kPatience;
  while (size > 0) {
    const absl::Duration left = deadline - absl::Now();
    pollfd readable = {fd_, POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) == 0) {
      *timed_out = true;
      return false;
    }
    const ssize_t n = recv(fd_, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace lapse::testing

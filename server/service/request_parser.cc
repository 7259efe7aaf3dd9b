#include "server/service/request_parser.h"

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/base/log.h"

namespace lapse {
namespace {

// Where protobuf's complaints go while this thread parses a request; nullptr
// the rest of the time.
thread_local std::string* t_parse_complaints = nullptr;

LogLevel LapseLevel(google::protobuf::LogLevel level) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      return LogLevel::kInfo;
    case google::protobuf::LOGLEVEL_WARNING:
      return LogLevel::kWarning;
    default:
      return LogLevel::kError;
  }
}

void OnProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                   const std::string& message) {
  if (t_parse_complaints != nullptr) {
    if (!t_parse_complaints->empty()) t_parse_complaints->append("; ");
    t_parse_complaints->append(message);
    return;
  }
  static RateLimitedLog* const log = new RateLimitedLog(kProtobufLinesPerMinute, absl::Minutes(1));
  log->Log(LapseLevel(level), "protobuf (%s:%d): %s", filename, line, message);
}

// "String field 'lapse.v1.MemberWrite.key' contains invalid UTF-8 data when
// parsing a protocol buffer. ..." (protobuf 3.21) becomes "field
// lapse.v1.MemberWrite.key is not valid UTF-8"; other complaints stay as they
// are.
std::string Explain(absl::string_view complaint) {
  constexpr absl::string_view kPrefix = "String field '";
  constexpr absl::string_view kUtf8 = "' contains invalid UTF-8";
  const size_t end = complaint.find(kUtf8);
  if (complaint.substr(0, kPrefix.size()) != kPrefix || end == absl::string_view::npos) {
    return std::string(complaint);
  }
  return absl::StrCat("field ", complaint.substr(kPrefix.size(), end - kPrefix.size()),
                      " is not valid UTF-8 (string fields must be UTF-8)");
}

}  // namespace

void RouteProtobufLogs() {
  static std::once_flag routed;
  std::call_once(routed, [] { google::protobuf::SetLogHandler(&OnProtobufLog); });
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
  // A copy shares the slices; the reader consumes the copy.
  grpc::ByteBuffer copy(bytes);
  std::string complaints = "no message";
  {
    grpc::ProtoBufferReader reader(&copy);
    if (reader.status().ok()) {
      complaints.clear();
      t_parse_complaints = &complaints;
      const bool parsed = request->ParseFromZeroCopyStream(&reader);
      t_parse_complaints = nullptr;
      if (parsed) return absl::OkStatus();
    }
  }
  const std::string why = complaints.empty()
                              ? "malformed protobuf wire format (truncated, or an invalid tag "
                                "or wire type)"
                              : Explain(complaints);
  return absl::InvalidArgumentError(absl::StrCat("request: not a valid ",
                                                 request->GetDescriptor()->full_name(), ": ", why,
                                                 "; send the message generated from lapse.proto"));
}

}  // namespace lapse

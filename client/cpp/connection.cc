#include "client/cpp/connection.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/cpp/write_coding.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace lapse::client::internal {
namespace {

// A duration as a channel argument in milliseconds; infinite is INT_MAX,
// which gRPC reads as "never".
int Milliseconds(absl::Duration d) {
  const int64_t ms = absl::ToInt64Milliseconds(d);
  if (ms >= INT_MAX) return INT_MAX;
  return ms < 1 ? 1 : static_cast<int>(ms);
}

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              Milliseconds(options.reconnect_backoff_initial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Milliseconds(options.reconnect_backoff_max));
  return args;
}

// The file's contents, or INVALID_ARGUMENT "tls.FIELD=PATH: cannot read it".
absl::StatusOr<std::string> ReadTlsFile(absl::string_view field, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::string contents((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file.is_open() || file.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.", field, "=", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  return contents;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const TlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.cert_file and tls.key_file go together (mTLS): give both, or neither");
  }
  grpc::SslCredentialsOptions ssl;
  const std::pair<absl::string_view, std::pair<const std::string*, std::string*>> files[] = {
      {"ca_file", {&tls.ca_file, &ssl.pem_root_certs}},
      {"cert_file", {&tls.cert_file, &ssl.pem_cert_chain}},
      {"key_file", {&tls.key_file, &ssl.pem_private_key}}};
  for (const auto& [field, paths] : files) {
    if (paths.first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadTlsFile(field, *paths.first);
    if (!pem.ok()) return pem.status();
    *paths.second = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

bool StreamResumable(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::OK:
      return true;
    default:
      return false;
  }
}

std::shared_ptr<grpc::Channel> ChannelWith(const std::string& target,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const ClientOptions& options) {
  grpc::ChannelArguments args = ChannelArgs(options);
  if (options.tls.has_value() && !options.tls->server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls->server_name);
  }
  return grpc::CreateCustomChannel(target, std::move(credentials), args);
}

Connection::Connection(absl::StatusOr<std::shared_ptr<grpc::Channel>> channel,
                       const ClientOptions& options)
    : options_(options),
      channel_status_(channel.status()),
      stub_(channel.ok() ? v1::LapseService::NewStub(*channel) : nullptr),
      generic_stub_(channel.ok() ? std::make_unique<grpc::GenericStub>(*channel) : nullptr),
      token_(options),
      writes_(generic_stub_.get(), &token_, std::max<size_t>(1, options.max_writes_in_flight)) {}

absl::StatusOr<std::vector<PutResult>> Connection::PutMembers(const v1::PutMembersRequest& request,
                                                              const CallOptions& call) {
  if (!channel_status_.ok()) return channel_status_;
  // Not from a write stream callback: it runs on the stream's thread, which
  // would have to read the answer this call waits for.
  const bool shared =
      puts_in_flight_.fetch_add(1, std::memory_order_relaxed) > 0 && !WriteStream::InCallback();
  absl::StatusOr<std::vector<PutResult>> result;
  if (shared) {
    const absl::Time deadline = absl::Now() + call.timeout.value_or(options_.default_timeout);
    result =
        writes_.Put([&request](std::string* bytes) { AppendPutMembers(request, bytes); }, deadline);
  } else {
    result = Call<std::vector<PutResult>>(&v1::LapseService::Stub::PutMembers, request,
                                          Idempotency::kNotIdempotent, call);
  }
  puts_in_flight_.fetch_sub(1, std::memory_order_relaxed);
  return result;
}

void Connection::PutMembersAsync(WriteStream::Build build, const CallOptions& call,
                                 PutCallback done) {
  if (!channel_status_.ok()) {
    done(channel_status_);
    return;
  }
  const absl::Time deadline = absl::Now() + call.timeout.value_or(options_.default_timeout);
  writes_.PutAsync(build, deadline, std::move(done));
}

}  // namespace lapse::client::internal

namespace lapse::client {

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(const std::string& target,
                                                          const ClientOptions& options) {
  if (!options.tls.has_value()) {
    return internal::ChannelWith(target, grpc::InsecureChannelCredentials(), options);
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      internal::TlsCredentials(*options.tls);
  if (!credentials.ok()) return credentials.status();
  return internal::ChannelWith(target, *std::move(credentials), options);
}

}  // namespace lapse::client

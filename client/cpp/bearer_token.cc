#include "client/cpp/bearer_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace lapse::client::internal {
namespace {

// Device, inode, size and modification time, through symbolic links (a
// Kubernetes Secret volume swaps a link); empty if stat(2) fails.
std::string Identity(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return "";
  return absl::StrCat(info.st_dev, ":", info.st_ino, ":", info.st_size, ":", info.st_mtim.tv_sec,
                      ".", info.st_mtim.tv_nsec);
}

}  // namespace

BearerToken::BearerToken(const ClientOptions& options)
    : file_(options.bearer_token_file), token_(options.bearer_token) {}

absl::Status BearerToken::AddTo(grpc::ClientContext* context) {
  std::string token;
  if (file_.empty()) {
    MutexLock lock(&mu_);
    token = token_;
  } else {
    const std::string identity = Identity(file_);
    MutexLock lock(&mu_);
    if (identity.empty() || identity != identity_) {
      std::ifstream in(file_, std::ios::binary);
      if (identity.empty() || !in) {
        return absl::UnauthenticatedError(
            absl::StrCat("cannot read the bearer token file ", file_, ": ", std::strerror(errno)));
      }
      std::ostringstream text;
      text << in.rdbuf();
      token_ = std::string(absl::StripAsciiWhitespace(text.str()));
      identity_ = identity;
    }
    if (token_.empty()) {
      return absl::UnauthenticatedError(absl::StrCat("the bearer token file ", file_, " is empty"));
    }
    token = token_;
  }
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  return absl::OkStatus();
}

}  // namespace lapse::client::internal

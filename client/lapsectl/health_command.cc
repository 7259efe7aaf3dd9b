// lapsectl health: one grpc.health.v1 Check, with its flags and help beside
// the function that runs it.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace lapse::cli {
namespace {

int RunHealth(const Invocation& in) {
  const std::string service = in.args.Value("service").value_or("");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::NewChannel(in.address, in.Options());
  if (!channel.ok()) return Fail("health", channel.status());
  std::unique_ptr<grpc::health::v1::Health::Stub> stub =
      grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + in.timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  std::string name;
  if (status.ok()) {
    name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    name = "SERVICE_UNKNOWN";
  } else {
    return Fail("health", absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                       status.error_message()));
  }
  Answer answer(in.json, {"SERVICE", "STATUS"});
  answer.Row({service.empty() ? "(server)" : service, name},
             JsonObject().Add("service", service).Add("status", name));
  answer.Print();
  return name == "SERVING" ? kOk : kUnmet;
}

}  // namespace

Command HealthCommand() {
  return {{"health",
           "",
           "Check the server's health (grpc.health.v1)",
           "Exit status 0 when SERVING, 1 otherwise.\n",
           {{"service", "NAME", "A service, e.g. lapse.v1.LapseService (default: the server)"}},
           0,
           0},
          &RunHealth};
}

}  // namespace lapse::cli

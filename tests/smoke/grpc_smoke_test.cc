// gRPC + Protobuf smoke test: a unary Ping on 127.0.0.1 returns its payload.
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "rpc_runner/protocol/ktune.grpc.pb.h"

namespace {

class EchoService final : public ktune::rpc::Tuning::Service {
  grpc::Status Ping(grpc::ServerContext*, const ktune::rpc::PingRequest* request,
                    ktune::rpc::PingReply* reply) override {
    reply->set_payload(request->payload());
    reply->set_server_version("smoke");
    return grpc::Status::OK;
  }
};

TEST(GrpcSmoke, UnaryPingOnLoopbackEchoesPayload) {
  EchoService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = ktune::rpc::Tuning::NewStub(channel);
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 % 251);

  ktune::rpc::PingRequest request;
  request.set_payload(payload);
  ktune::rpc::PingReply reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status status = stub->Ping(&context, request, &reply);

  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.payload(), payload);
  EXPECT_EQ(reply.server_version(), "smoke");
  server->Shutdown();
}

TEST(GrpcSmoke, UnreachableServerIsUnavailable) {
  // Port 1 on loopback has no listener: the call fails fast with UNAVAILABLE, not a hang.
  auto stub = ktune::rpc::Tuning::NewStub(
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  ktune::rpc::PingRequest request;
  ktune::rpc::PingReply reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status status = stub->Ping(&context, request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace

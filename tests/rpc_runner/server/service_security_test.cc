// Tests of the tuning service's security end to end: worker and client tokens, TLS with a
// self-signed certificate made here with openssl, the protocol version check at attach.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "support/error.h"
#include "tests/rpc_runner/server/service_test_util.h"

namespace ktune::rpc_runner {
namespace {

using testing::TempDir;
using testing::wait_until;

const char kWorkerToken[] = "worker-secret-0123456789";
const char kClientToken[] = "client-secret-0123456789";

TuningServerOptions server_options(const TempDir& dir) {
  TuningServerOptions o;
  o.port = 0;
  o.db_path = dir.file("server.db");
  o.token_file = dir.write("tokens", std::string("# the service's two secrets\nworker: ") +
                                         kWorkerToken + "\nclient: " + kClientToken + "\n");
  return o;
}

DeviceWorkerOptions worker_options(const TuningServer& server, const std::string& token_file) {
  DeviceWorkerOptions o;
  o.server = "localhost:" + std::to_string(server.port());
  o.key = "cpu";
  o.runner_path = KTUNE_RUNNER_PATH;
  o.token_file = token_file;
  o.reconnect_initial_s = 0.1;
  o.reconnect_max_s = 0.3;
  return o;
}

ServiceClientOptions client_options(const TuningServer& server, const std::string& token_file) {
  ServiceClientOptions o;
  o.server = "localhost:" + std::to_string(server.port());
  o.token_file = token_file;
  o.timeout_s = 5;
  return o;
}

// The message of the Error a call throws ("" when it does not throw).
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e.what();
  }
  return "";
}

JobSpec small_job() {
  JobSpec s;
  s.template_name = "matmul";
  s.args = {{"M", "32"}, {"N", "32"}, {"K", "32"}};
  s.session.device_key = "cpu";
  s.session.trials = 8;
  s.session.tuner = "random";
  s.session.batch_size = 8;
  return s;
}

TEST(ServiceSecurity, TokensSeparateWorkersFromClients) {
  TempDir dir;
  TuningServer server(server_options(dir));
  const std::string worker_file = dir.write("worker-token", std::string(kWorkerToken) + "\n");
  const std::string client_file = dir.write("client-token", std::string(kClientToken) + "\n");

  // Clients: no token, a wrong one, and the worker's token are refused with one clear line.
  EXPECT_NE(error_of([&] { ServiceClient(client_options(server, "")).jobs(); }).find("no token"),
            std::string::npos);
  const std::string wrong_file = dir.write("wrong", "not-the-token-0123456789\n");
  EXPECT_NE(error_of([&] {
              ServiceClient(client_options(server, wrong_file)).jobs();
            }).find("wrong client token"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ServiceClient(client_options(server, worker_file)).jobs();
            }).find("wrong client token"),
            std::string::npos);
  ServiceClient client(client_options(server, client_file));
  EXPECT_EQ(error_of([&] { client.jobs(); }), "");

  // Workers: the client token cannot register a device; the worker token can.
  DeviceWorker rogue(worker_options(server, client_file));
  ASSERT_TRUE(wait_until([&] { return !rogue.last_refusal().empty(); }, 10));
  EXPECT_NE(rogue.last_refusal().find("wrong worker token"), std::string::npos)
      << rogue.last_refusal();
  EXPECT_TRUE(client.devices().empty());
  rogue.stop();
  DeviceWorker worker(worker_options(server, worker_file));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 10));
  const JobEvent last = client.watch(client.submit(small_job()).id);
  EXPECT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, 8u);
  // One token file with both lines serves either role.
  ServiceClient admin(client_options(server, server_options(dir).token_file));
  EXPECT_EQ(admin.jobs(true).size(), 1u);
}

TEST(ServiceSecurity, AWorkerOfAnotherProtocolVersionIsRefusedNamingBoth) {
  TempDir dir;
  TuningServerOptions options = server_options(dir);
  options.token_file.clear();
  TuningServer server(options);
  DeviceWorkerOptions old = worker_options(server, "");
  old.protocol_version = kProtocolVersion - 1;
  DeviceWorker worker(old);
  ASSERT_TRUE(wait_until([&] { return !worker.last_refusal().empty(); }, 10));
  EXPECT_NE(worker.last_refusal().find("version " + std::to_string(kProtocolVersion - 1)),
            std::string::npos)
      << worker.last_refusal();
  EXPECT_NE(worker.last_refusal().find("version " + std::to_string(kProtocolVersion)),
            std::string::npos);
  EXPECT_TRUE(ServiceClient(client_options(server, "")).devices().empty());
}

// A self-signed certificate for localhost / 127.0.0.1, made with the openssl command.
void make_certificate(const TempDir& dir) {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      dir.file("key.pem") + " -out " + dir.file("cert.pem") + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ServiceSecurity, TlsEndToEndAndMismatchesFailWithOneLine) {
  TempDir dir;
  make_certificate(dir);
  TuningServerOptions options = server_options(dir);
  options.tls_cert_file = dir.file("cert.pem");
  options.tls_key_file = dir.file("key.pem");
  TuningServer tls_server(options);
  const std::string client_file = dir.write("client-token", std::string(kClientToken) + "\n");
  const std::string worker_file = dir.write("worker-token", std::string(kWorkerToken) + "\n");

  ServiceClientOptions c = client_options(tls_server, client_file);
  c.tls_ca_file = dir.file("cert.pem");
  ServiceClient client(c);
  DeviceWorkerOptions w = worker_options(tls_server, worker_file);
  w.tls_ca_file = dir.file("cert.pem");
  DeviceWorker worker(w);
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 1; }, 10));
  const JobEvent last = client.watch(client.submit(small_job()).id);
  EXPECT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;

  // A plaintext client against the TLS server.
  const std::string plain_to_tls =
      error_of([&] { ServiceClient(client_options(tls_server, client_file)).jobs(); });
  EXPECT_NE(plain_to_tls.find("cannot reach the tuning server"), std::string::npos) << plain_to_tls;

  // A TLS client against a plaintext server.
  TuningServerOptions plain = server_options(dir);
  plain.db_path = dir.file("plain.db");
  TuningServer plain_server(plain);
  ServiceClientOptions tls_to_plain = client_options(plain_server, client_file);
  tls_to_plain.tls_ca_file = dir.file("cert.pem");
  const std::string message = error_of([&] { ServiceClient(tls_to_plain).jobs(); });
  EXPECT_NE(message.find("cannot reach the tuning server"), std::string::npos) << message;
}

}  // namespace
}  // namespace ktune::rpc_runner

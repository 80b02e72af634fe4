// Tests of the tuning service's security end to end: worker and client tokens, TLS with a
// self-signed certificate made here with openssl, the protocol version check at attach.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/credentials.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "support/error.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tests/warning_capture.h"

namespace ktune::rpc_runner {
namespace {

using testing::make_certificate;
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

  // Clients: no token, a wrong one, and the worker's token are refused with one clear line; the
  // worker's is named as such (a client that took the wrong line of the token file).
  EXPECT_NE(error_of([&] { ServiceClient(client_options(server, "")).jobs(); }).find("no token"),
            std::string::npos);
  const std::string wrong_file = dir.write("wrong", "not-the-token-0123456789\n");
  EXPECT_NE(error_of([&] {
              ServiceClient(client_options(server, wrong_file)).jobs();
            }).find("wrong client token"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ServiceClient(client_options(server, worker_file)).jobs();
            }).find("that is the worker token: a client needs its own token or the admin's"),
            std::string::npos);
  ServiceClient client(client_options(server, client_file));
  EXPECT_EQ(error_of([&] { client.jobs(); }), "");

  // Workers: the client token cannot register a device; the worker token can.
  DeviceWorker rogue(worker_options(server, client_file));
  ASSERT_TRUE(wait_until([&] { return !rogue.last_refusal().empty(); }, 10));
  EXPECT_NE(rogue.last_refusal().find("that is a client's token: a worker needs the worker token"),
            std::string::npos)
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

// A worker whose TLS does not match the server's is refused at its first attach with the reason,
// which `ktune worker` prints before it exits 1 (rather than retrying forever).
TEST(ServiceSecurity, AWorkerThatTlsRefusesAtItsFirstAttachSaysWhy) {
  TempDir dir, other;
  make_certificate(dir);
  make_certificate(other);  // a CA that did not sign the server's certificate
  TuningServerOptions options = server_options(dir);
  options.tls_cert_file = dir.file("cert.pem");
  options.tls_key_file = dir.file("key.pem");
  TuningServer tls_server(options);
  const std::string worker_file = dir.write("worker-token", std::string(kWorkerToken) + "\n");

  DeviceWorkerOptions wrong_ca = worker_options(tls_server, worker_file);
  wrong_ca.tls_ca_file = other.file("cert.pem");
  DeviceWorker w1(wrong_ca);
  ASSERT_TRUE(wait_until([&] { return !w1.refused_at_start().empty(); }, 20));
  EXPECT_NE(w1.refused_at_start().find("not signed by the CA of --tls-ca"), std::string::npos)
      << w1.refused_at_start();

  DeviceWorker w2(worker_options(tls_server, worker_file));  // plaintext
  ASSERT_TRUE(wait_until([&] { return !w2.refused_at_start().empty(); }, 20));
  EXPECT_NE(w2.refused_at_start().find("serves TLS only"), std::string::npos)
      << w2.refused_at_start();

  TuningServerOptions plain = server_options(dir);
  plain.db_path = dir.file("plain.db");
  TuningServer plain_server(plain);
  DeviceWorkerOptions tls_to_plain = worker_options(plain_server, worker_file);
  tls_to_plain.tls_ca_file = dir.file("cert.pem");
  DeviceWorker w3(tls_to_plain);
  ASSERT_TRUE(wait_until([&] { return !w3.refused_at_start().empty(); }, 20));
  EXPECT_NE(w3.refused_at_start().find("TLS"), std::string::npos) << w3.refused_at_start();
  for (const DeviceWorker* w : {&w1, &w2, &w3}) EXPECT_FALSE(w->attached());
}

// Token files: one that group or others may access is refused (naming the fix) unless allowed; a
// UTF-8 byte order mark before the token is not part of it. A CA, certificate or key file that is
// not PEM is named as such.
TEST(ServiceSecurity, TokenFilePermissionsByteOrderMarksAndNonPemFiles) {
  TempDir dir;
  TuningServerOptions options = server_options(dir);
  std::filesystem::permissions(
      options.token_file, std::filesystem::perms::group_read | std::filesystem::perms::others_read,
      std::filesystem::perm_options::add);
  const std::string refused = error_of([&] { TuningServer server(options); });
  EXPECT_NE(refused.find("token file " + options.token_file +
                         " is accessible by group or others "
                         "(mode 0644)"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("chmod 600"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--allow-readable-token"), std::string::npos) << refused;
  EXPECT_THROW(load_client_security(options.token_file, "", Role::kWorker), Error);
  options.allow_readable_token = true;
  {
    TuningServer allowed(options);  // starts
    EXPECT_GT(allowed.port(), 0);
  }
  EXPECT_EQ(load_client_security(options.token_file, "", Role::kWorker, true).token, kWorkerToken);

  const std::string bom = "\xEF\xBB\xBF";
  const std::string bare = dir.write("bom-token", bom + kWorkerToken + "\r\n");
  EXPECT_EQ(load_client_security(bare, "", Role::kWorker).token, kWorkerToken);
  const std::string roles =
      dir.write("bom-tokens", bom + "worker: " + kWorkerToken + "\nclient: " + kClientToken + "\n");
  const ServerSecurity s = load_server_security(roles, "", "");
  EXPECT_EQ(s.worker_token, kWorkerToken);
  EXPECT_EQ(s.admin_token, kClientToken);  // the older format's client token is the admin's

  const std::string not_pem = dir.write("ca.txt", "this is no certificate\n");
  const std::string ca = error_of([&] { load_client_security("", not_pem, Role::kWorker); });
  EXPECT_NE(ca.find("the TLS CA certificate (--tls-ca) " + not_pem + " is not PEM"),
            std::string::npos)
      << ca;
  make_certificate(dir);
  const std::string key =
      error_of([&] { load_server_security("", dir.file("cert.pem"), dir.file("cert.pem")); });
  EXPECT_NE(key.find("the TLS key " + dir.file("cert.pem") + " is not PEM"), std::string::npos)
      << key;
  const std::string cert =
      error_of([&] { load_server_security("", dir.file("key.pem"), dir.file("key.pem")); });
  EXPECT_NE(cert.find("the TLS certificate " + dir.file("key.pem") + " is not PEM"),
            std::string::npos)
      << cert;
}

// Token files with named clients and an admin: what each line gives, what a client's file may
// hold, and every malformed file refused with one line naming the file and line.
TEST(ServiceSecurity, TokenFilesNameClientsAndAnAdmin) {
  TempDir dir;
  const std::string file =
      dir.write("tokens",
                "worker: worker-secret-0123456789\nadmin: admin-secret-0123456789\n"
                "client alice: alice-secret-0123456789\nclient  bob.b-2 : bob-secret-0123456789\n");
  const ServerSecurity s = load_server_security(file, "", "");
  EXPECT_EQ(s.worker_token, "worker-secret-0123456789");
  EXPECT_EQ(s.admin_token, "admin-secret-0123456789");
  ASSERT_EQ(s.clients.size(), 2u);
  EXPECT_EQ(s.clients[0].name, "alice");
  EXPECT_EQ(s.clients[0].token, "alice-secret-0123456789");
  EXPECT_EQ(s.clients[1].name, "bob.b-2");
  EXPECT_EQ(s.clients[1].token, "bob-secret-0123456789");
  // A client given the server's file uses the admin's line, and is told it acts as the admin; a
  // worker its own line, without a word.
  {
    testing_log::WarningCapture capture;
    EXPECT_EQ(load_client_security(file, "", Role::kClient).token, "admin-secret-0123456789");
    ASSERT_EQ(capture.warnings().size(), 1u);
    EXPECT_EQ(capture.warnings()[0],
              file +
                  ": a server's token file; this client uses its 'admin:' line and acts as the "
                  "admin (sees and cancels every client's jobs). A client of its own takes a "
                  "file with its 'client NAME: TOKEN' line");
    EXPECT_EQ(load_client_security(file, "", Role::kWorker).token, "worker-secret-0123456789");
    EXPECT_EQ(capture.warnings().size(), 1u);
  }
  // A client's own line, and an older file's nameless 'client:' line (the server warns of that
  // one at start): no word.
  {
    testing_log::WarningCapture capture;
    const std::string own = dir.write("own", "client alice: alice-secret-0123456789\n");
    EXPECT_EQ(load_client_security(own, "", Role::kClient).token, "alice-secret-0123456789");
    const std::string older =
        dir.write("older", "worker: worker-secret-0123456789\nclient: legacy-secret-0123456789\n");
    EXPECT_EQ(load_client_security(older, "", Role::kClient).token, "legacy-secret-0123456789");
    EXPECT_TRUE(capture.warnings().empty());
  }
  const std::string two =
      dir.write("two", "client a: a-secret-0123456789ab\nclient b: b-secret-0123456789ab\n");
  EXPECT_NE(error_of([&] {
              load_client_security(two, "", Role::kClient);
            }).find("several clients and no admin"),
            std::string::npos);

  const std::string w = "worker: worker-secret-0123456789\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {w, "needs a 'worker: TOKEN' line and an 'admin: TOKEN' or 'client NAME: TOKEN' line"},
      {"client alice: alice-secret-0123456789\n", "needs a 'worker: TOKEN' line"},
      {w + "admin: admin-secret-0123456789\nclient: other-secret-0123456789\n",
       ":3: a second admin token"},
      {w + "client alice: alice-secret-0123456789\nclient alice: other-secret-0123456789\n",
       ":3: a second client named alice"},
      {w + "client admin: alice-secret-0123456789\n", ":2: 'admin' is not a client name"},
      {w + "client al/ice: alice-secret-0123456789\n", ":2: a client name is 1 to 64"},
      {w + "client " + std::string(65, 'a') + ": alice-secret-0123456789\n",
       ":2: a client name is 1 to 64"},
      {w + "client alice: worker-secret-0123456789\n",
       ":2: the token of line 1 again: every role and client needs its own token"},
      {w + "client alice: short\n", ":2: a token must have at least 16 characters"},
      {w + "clients alice: alice-secret-0123456789\n",
       ":2: expected 'worker: TOKEN', 'admin: TOKEN' or 'client NAME: TOKEN'"},
  };
  int n = 0;
  for (const auto& [text, expected] : bad) {
    const std::string path = dir.write("bad" + std::to_string(n++), text);
    const std::string message = error_of([&] { load_server_security(path, "", ""); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << text << " -> " << message;
  }
}

}  // namespace
}  // namespace ktune::rpc_runner

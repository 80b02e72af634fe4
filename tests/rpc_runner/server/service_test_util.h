// Defines what the tuning service's tests share: a temporary directory, the tokens and their files,
// a test certificate, polling with a deadline, a matmul job, the fault-template job and its record
// kinds.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rpc_runner/protocol/job_types.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner::testing {

// A fresh directory under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("ktune-service-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes a file only its owner may read (token files others may read are refused).
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    std::filesystem::permissions(
        path / name, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return file(name);
  }
};

// The tokens of the service's tests.
inline constexpr char kWorkerToken[] = "worker-secret-0123456789";
inline constexpr char kClientToken[] = "client-secret-0123456789";

// The token files in a TempDir, owner-only: the server's with both roles', and one per role.
struct TokenFiles {
  std::string server, worker, client;
};
inline TokenFiles write_token_files(const TempDir& dir) {
  return {dir.write("tokens",
                    std::string("worker: ") + kWorkerToken + "\nclient: " + kClientToken + "\n"),
          dir.write("worker-token", std::string(kWorkerToken) + "\n"),
          dir.write("client-token", std::string(kClientToken) + "\n")};
}

// A self-signed certificate for localhost / 127.0.0.1, made with the openssl command, as
// PREFIXcert.pem and PREFIXkey.pem in `dir`.
inline void make_certificate(const TempDir& dir, const std::string& prefix = "") {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      dir.file(prefix + "key.pem") + " -out " + dir.file(prefix + "cert.pem") + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Polls pred every 50 ms until it holds or timeout_s passes; returns its last value.
template <class Pred>
bool wait_until(Pred pred, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

// The lines of `text` that are not empty.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// Every record of the log at db_path (or of one workload), read with a connection of our own.
inline std::vector<tuning_db::Record> log_records(const std::string& db_path,
                                                  const std::string& workload = "") {
  auto db = tuning_db::Database::open(db_path, {.create = false});
  std::stringstream lines;
  db.export_jsonl(lines, workload);
  std::vector<tuning_db::Record> out;
  for (std::string line; std::getline(lines, line);) out.push_back(tuning_db::from_json_line(line));
  return out;
}

// matmul 64x64x64 on the devices of `key` by random search, in batches of 8.
inline JobSpec matmul_job(const std::string& key, uint64_t trials, uint64_t seed = 1) {
  JobSpec s;
  s.template_name = "matmul";
  s.args = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
  s.session.device_key = key;
  s.session.trials = trials;
  s.session.tuner = "random";
  s.session.seed = seed;
  s.session.batch_size = 8;
  return s;
}

// The whole space of the fault template (4 modes x 4 splits) by grid search, with a short run
// timeout so the hanging kernels end soon.
inline JobSpec fault_job(const std::string& key) {
  JobSpec spec;
  spec.template_name = "runner_fault_test";
  spec.args = {{"N", "256"}};
  spec.session.device_key = key;
  spec.session.trials = 16;
  spec.session.tuner = "grid";
  spec.session.batch_size = 16;
  spec.measure.run_timeout_s = 1.5;
  return spec;
}

// Records counted by outcome: "ok" or the error kind's name.
inline std::map<std::string, int> kinds_of(const std::vector<tuning_db::Record>& records) {
  std::map<std::string, int> kinds;
  for (const auto& r : records) ++kinds[r.ok() ? "ok" : std::string(to_string(*r.error))];
  return kinds;
}

}  // namespace ktune::rpc_runner::testing

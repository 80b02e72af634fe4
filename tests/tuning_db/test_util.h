// Defines helpers shared by the tuning_db tests: a temporary directory, record factories and old-
// schema logs.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "tuning_db/record.h"
#include "tuning_db/schema.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("ktune-db-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline const TargetKey kHost{"llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "19.1.7"};

inline std::string matmul_key(int n) {
  return "matmul(M=" + std::to_string(n) + ",N=" + std::to_string(n) + ",K=" + std::to_string(n) +
         ",dtype=float32)";
}

// A successful matmul record of config `index` with the given costs (seconds).
inline Record make_record(int n, int64_t index, std::vector<double> costs,
                          const TargetKey& target = kHost, const std::string& device = "x86") {
  Record r;
  r.workload_key = matmul_key(n);
  r.template_name = "matmul";
  r.args = {{"M", n}, {"N", n}, {"K", n}, {"dtype", "float32"}};
  r.flop = 2.0 * n * n * n;
  r.target = target;
  r.device_key = device;
  r.config_index = index;
  r.config = {{"index", index},
              {"entity", nlohmann::json::array({nlohmann::json::array(
                             {"tile_i", "sp", nlohmann::json::array({-1, index % 7 + 1})})})}};
  r.costs = std::move(costs);
  r.all_cost = 0.5;
  r.tuner = "random";
  r.batch = index / 8;
  r.timestamp = 1.7e9 + static_cast<double>(index);
  r.ktune_version = "0.1.0";
  return r;
}

// A failed record of config `index`.
inline Record make_failure(int n, int64_t index, ErrorKind kind, const TargetKey& target = kHost) {
  Record r = make_record(n, index, {}, target);
  r.error = kind;
  r.error_message = "failed on purpose";
  return r;
}

// Writes a SQLite log of schema `version` at `path`, as an older ktune left it: workload 1 'mm'
// (matmul, 2 GFLOP), target 1 ('llvm', LLVM 19), device 1 'x86', then `rows` (SQL inserts of that
// version's records, jobs, ...).
inline void write_old_log(const std::string& path, int version, const std::string& rows) {
  auto conn = sql::Connection::open(path, true);
  sql::Transaction txn(conn);
  apply_migrations(conn, 0, version);
  conn.exec(
      "INSERT INTO workloads(key, template, args, flop) VALUES ('mm', 'matmul', '{}', 2e9);"
      "INSERT INTO targets(target, llvm_version) VALUES ('llvm', '19');"
      "INSERT INTO devices(key) VALUES ('x86');" +
      rows);
  txn.commit();
}

}  // namespace ktune::tuning_db::testing

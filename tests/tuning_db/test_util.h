// Defines helpers shared by the tuning_db tests: a temporary directory and record factories.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "tuning_db/record.h"

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

}  // namespace ktune::tuning_db::testing

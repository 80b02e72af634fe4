// db_bench: batched insert rate into the tuning log and best-record look-up latency on a log
// of 1,000,000 records. Last line: `best_ms <p99 latency of best() in ms>`.
// Usage: db_bench [records (default 1000000)] [batch size (default 1000)]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tuning_db/database.h"

namespace {

using Clock = std::chrono::steady_clock;
using ktune::tuning_db::Database;
using ktune::tuning_db::Record;
using ktune::tuning_db::TargetKey;

constexpr int kWorkloads = 20;
const TargetKey kTarget{"llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "19.1.7"};

std::string workload_key(int w) {
  int n = 128 * (w + 1);
  return "matmul(M=" + std::to_string(n) + ",N=" + std::to_string(n) + ",K=" + std::to_string(n) +
         ",dtype=float32)";
}

// A record shaped like a real matmul measurement: 4 knobs, 3 repeats, 1 in 10 failing.
Record make_record(std::mt19937_64& rng, int w, int64_t index, int64_t batch) {
  std::uniform_real_distribution<double> cost(1e-4, 1e-1);
  Record r;
  int n = 128 * (w + 1);
  r.workload_key = workload_key(w);
  r.template_name = "matmul";
  r.args = {{"M", n}, {"N", n}, {"K", n}, {"dtype", "float32"}};
  r.flop = 2.0 * n * n * n;
  r.target = kTarget;
  r.device_key = "x86-avx512";
  r.config_index = index;
  r.config = {{"index", index},
              {"entity",
               {{"tile_y", "sp", {-1, 8, index % 16 + 1}},
                {"tile_x", "sp", {-1, 16, index % 8 + 1}},
                {"tile_k", "sp", {-1, index % 32 + 1}},
                {"ann", "an", {"none", "vec"}}}}};
  if (rng() % 10 == 0) {
    r.error = ktune::ErrorKind::kRunTimeout;
    r.error_message = "kernel exceeded 10 s";
  } else {
    double c = cost(rng);
    r.costs = {c, c * 1.01, c * 0.99};
  }
  r.all_cost = 0.3;
  r.tuner = "bench";
  r.batch = batch;
  r.timestamp = 1.7e9 + static_cast<double>(index);
  r.ktune_version = "0.1.0";
  return r;
}

// CPU seconds of this thread: unlike wall time, not inflated when other processes share the cores.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t total = argc > 1 ? std::stoll(argv[1]) : 1'000'000;
  int64_t batch_size = argc > 2 ? std::stoll(argv[2]) : 1000;
  std::string path = (std::filesystem::temp_directory_path() /
                      ("ktune-db-bench-" + std::to_string(::getpid()) + ".db"))
                         .string();
  std::mt19937_64 rng(12345);
  double insert_ms = 0;
  double insert_cpu = 0;
  int64_t inserted = 0;
  try {
    Database db = Database::open(path);
    std::printf("tuning_db benchmark: %lld records in batches of %lld, %d workloads, file %s\n",
                static_cast<long long>(total), static_cast<long long>(batch_size), kWorkloads,
                path.c_str());

    // Insert: only add() is timed, not building the records.
    for (int64_t b = 0; inserted < total; ++b) {
      std::vector<Record> batch;
      int w = static_cast<int>(b % kWorkloads);
      for (int64_t i = 0; i < batch_size && inserted + i < total; ++i) {
        batch.push_back(make_record(rng, w, (b / kWorkloads) * batch_size + i, b));
      }
      auto start = Clock::now();
      double cpu_start = thread_cpu_seconds();
      db.add(batch);
      insert_ms += ms_since(start);
      insert_cpu += thread_cpu_seconds() - cpu_start;
      inserted += static_cast<int64_t>(batch.size());
    }
    double rate = static_cast<double>(inserted) / (insert_ms / 1e3);

    // Small batches, as a tuner writes them (64 per batch).
    double small_ms = 0;
    int64_t small_n = 0;
    for (int b = 0; b < 200; ++b) {
      std::vector<Record> batch;
      for (int i = 0; i < 64; ++i)
        batch.push_back(make_record(rng, b % kWorkloads, 1'000'000 + b * 64 + i, b));
      auto start = Clock::now();
      db.add(batch);
      small_ms += ms_since(start);
      small_n += 64;
    }
    double small_rate = static_cast<double>(small_n) / (small_ms / 1e3);

    // Look-ups on a fresh connection (as a build-time query would be).
    Database reader = Database::open(path);
    auto cold_start = Clock::now();
    auto cold = reader.best(workload_key(0), kTarget);
    double cold_ms = ms_since(cold_start);
    if (!cold) throw std::runtime_error("no best record found");

    std::vector<double> best_ms, top_ms, has_ms;
    std::uniform_int_distribution<int> pick(0, kWorkloads - 1);
    for (int q = 0; q < 2000; ++q) {
      std::string key = workload_key(pick(rng));
      auto start = Clock::now();
      auto best = reader.best(key, kTarget);
      best_ms.push_back(ms_since(start));
      if (!best || !best->ok()) throw std::runtime_error("best() returned no successful record");
      start = Clock::now();
      auto top = reader.top_k(key, kTarget, 10);
      top_ms.push_back(ms_since(start));
      if (top.size() != 10 || top.front().mean_cost() != best->mean_cost()) {
        throw std::runtime_error("top_k disagrees with best");
      }
      start = Clock::now();
      bool seen = reader.has(key, kTarget, static_cast<int64_t>(rng() % 60000));
      has_ms.push_back(ms_since(start));
      (void)seen;
    }
    auto stats = reader.stats();

    std::printf("\n%-40s %14s\n", "measure", "value");
    std::printf("%-40s %14lld\n", "records in log", static_cast<long long>(stats.records));
    std::printf("%-40s %14lld\n", "  of which failed",
                static_cast<long long>(stats.failed_records));
    std::printf("%-40s %14.0f\n", "insert rate, batches of 1000 (rec/s)", rate);
    std::printf("%-40s %14.0f\n", "  per CPU second (rec/s)",
                static_cast<double>(inserted) / insert_cpu);
    std::printf("%-40s %14.0f\n", "insert rate, batches of 64 (rec/s)", small_rate);
    std::printf("%-40s %14.3f\n", "best() first query, cold (ms)", cold_ms);
    std::printf("%-40s %14.3f\n", "best() p50 (ms)", percentile(best_ms, 0.5));
    std::printf("%-40s %14.3f\n", "best() p99 (ms)", percentile(best_ms, 0.99));
    std::printf("%-40s %14.3f\n", "best() max (ms)", percentile(best_ms, 1.0));
    std::printf("%-40s %14.3f\n", "top_k(10) p50 (ms)", percentile(top_ms, 0.5));
    std::printf("%-40s %14.3f\n", "has() p50 (ms)", percentile(has_ms, 0.5));
    std::printf("%-40s %14.1f\n", "file size (MB)",
                static_cast<double>(std::filesystem::file_size(path)) / 1e6);
    std::printf("insert_rate %.0f\n", rate);
    std::printf("best_ms %.3f\n", percentile(best_ms, 0.99));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "db_bench: %s\n", e.what());
    std::filesystem::remove(path);
    return 1;
  }
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
  return 0;
}

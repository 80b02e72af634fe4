// One writer and many readers at once: a writer thread adds batches while reader threads,
// each with its own Database on the same file, query best()/top_k()/stats(). Readers must
// never fail, never see half a batch, and see the best cost only ever improve.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

constexpr int kBatches = 200;
constexpr int kBatchSize = 100;
constexpr int kReaders = 3;

TEST(Concurrency, OneWriterManyReaders) {
  TempDir dir;
  std::string path = dir.file("shared.db");
  { Database::open(path); }  // create the schema before the race starts

  std::atomic<bool> writer_done{false};
  std::atomic<int> reader_failures{0};
  std::vector<int64_t> reads(kReaders, 0);
  std::vector<std::string> errors(kReaders + 1);
  double true_best = std::numeric_limits<double>::infinity();

  std::thread writer([&] {
    try {
      Database db = Database::open(path);
      std::mt19937 rng(42);
      std::uniform_real_distribution<double> cost(1e-4, 1e-2);
      for (int b = 0; b < kBatches; ++b) {
        std::vector<Record> batch;
        for (int i = 0; i < kBatchSize; ++i) {
          double c = cost(rng);
          true_best = std::min(true_best, c);
          Record r = make_record(256, int64_t{b} * kBatchSize + i, {c});
          r.batch = b;
          batch.push_back(std::move(r));
        }
        db.add(batch);
      }
    } catch (const std::exception& e) {
      errors[kReaders] = e.what();
    }
    writer_done = true;
  });

  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      try {
        Database db = Database::open(path);
        double last_best = std::numeric_limits<double>::infinity();
        int64_t last_count = 0;
        do {
          auto best = db.best(matmul_key(256), kHost);
          if (best) {
            if (best->mean_cost() > last_best) ++reader_failures;  // best got worse
            last_best = best->mean_cost();
          }
          auto top = db.top_k(matmul_key(256), kHost, 5);
          for (size_t i = 1; i < top.size(); ++i) {
            if (top[i].mean_cost() < top[i - 1].mean_cost()) ++reader_failures;
          }
          Stats st = db.stats();
          if (st.records % kBatchSize != 0) ++reader_failures;  // saw half a batch
          if (st.records < last_count) ++reader_failures;
          last_count = st.records;
          ++reads[static_cast<size_t>(t)];
        } while (!writer_done);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  writer.join();
  for (auto& r : readers) r.join();

  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(reader_failures.load(), 0);
  for (int64_t n : reads) EXPECT_GT(n, 10) << "a reader barely ran while the writer wrote";
  Database db = Database::open(path);
  EXPECT_EQ(db.stats().records, int64_t{kBatches} * kBatchSize);
  EXPECT_DOUBLE_EQ(db.best(matmul_key(256), kHost)->mean_cost(), true_best);
}

}  // namespace
}  // namespace ktune::tuning_db

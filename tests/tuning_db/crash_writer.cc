// Helper of crash_test: adds batches to a tuning log forever and reports each committed batch
// id on stdout (one write(2) per line, after add() returned), until it is killed.
// Usage: db_crash_writer <db path> <first batch id> <batch size>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <db> <first batch> <batch size>\n", argv[0]);
    return 2;
  }
  using namespace ktune::tuning_db;
  try {
    Database db = Database::open(argv[1]);
    int64_t first = std::stoll(argv[2]);
    int size = std::stoi(argv[3]);
    for (int64_t b = first;; ++b) {
      std::vector<Record> batch;
      for (int i = 0; i < size; ++i) {
        Record r = testing::make_record(64, b * size + i, {1e-3 + 1e-6 * i});
        r.batch = b;
        r.tuner = "crash";
        batch.push_back(std::move(r));
      }
      db.add(batch);
      std::string line = std::to_string(b) + "\n";
      if (::write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        return 3;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "db_crash_writer: %s\n", e.what());
    return 1;
  }
}

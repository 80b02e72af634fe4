// libFuzzer target: one JSON line of a tuning log (what `ktune db import` reads), parsed, validated
// as the database validates a record before adding it, and written back.
#include "fuzz/fuzz_util.h"
#include "support/error.h"
#include "tuning_db/database_impl.h"
#include "tuning_db/record.h"

using namespace ktune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tuning_db::Record record;
  try {
    record = tuning_db::from_json_line(fuzz::as_text(data, size));
    tuning_db::validate(record);
  } catch (const Error&) {
    return 0;
  }
  (void)record.mean_cost();
  (void)record.gflops();
  // A valid record survives export and re-import unchanged.
  const std::string line = tuning_db::to_json_line(record);
  tuning_db::Record again;
  try {
    again = tuning_db::from_json_line(line);
  } catch (const Error& e) {
    fuzz::require(false, "a valid record's own line does not parse");
  }
  fuzz::require(tuning_db::to_json_line(again) == line, "record line round trip");
  return 0;
}

// libFuzzer target: a config as JSON text (what `ktune lower --config`, import and the log carry),
// parsed, checked against the space of a small task of its template, instantiated and lowered.
#include "fuzz/fuzz_util.h"
#include "support/error.h"
#include "te/lower.h"

using namespace ktune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  schedule_space::Config config;
  try {
    config = schedule_space::Config::from_json_string(fuzz::as_text(data, size));
  } catch (const Error&) {
    return 0;  // refused with a typed error: what bad input must get
  }
  fuzz::require(schedule_space::Config::from_json(config.to_json()) == config,
                "config JSON round trip");
  const schedule_space::Task& task = fuzz::small_task(config.template_name());
  const schedule_space::ConfigSpace& space = task.space();
  try {
    const uint64_t index = space.index_of(config);
    fuzz::require(space.index_of(space.get(index)) == index, "index_of(get(i)) == i");
  } catch (const Error&) {
  }
  try {
    (void)space.rejecting_constraint(config);
  } catch (const Error&) {
  }
  try {
    const schedule_space::Instantiated inst = task.instantiate(config);
    (void)te::lower(inst.schedule, inst.args, "fuzz");
  } catch (const Error&) {
  }
  return 0;
}

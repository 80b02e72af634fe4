// libFuzzer target: a target string (`--target`, job specs, the log's target key) parsed by
// codegen::Target; its canonical form must parse to the same target.
#include "codegen/target.h"
#include "fuzz/fuzz_util.h"
#include "support/error.h"

using namespace ktune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::as_text(data, size);
  try {
    const codegen::Target target = codegen::Target::parse(text);
    (void)target.feature_string();
    (void)target.is_host_compatible();
    const codegen::Target again = codegen::Target::parse(target.str());
    fuzz::require(again == target, "Target::parse(t.str()) == t");
    fuzz::require(again.vector_bits() == target.vector_bits() && again.cores() == target.cores(),
                  "canonical target keeps vector width and cores");
  } catch (const Error&) {
  }
  return 0;
}

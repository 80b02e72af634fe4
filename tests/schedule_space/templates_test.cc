// Every config of a small instance of every built-in template lowers and interprets to the reference.
#include <cstdio>

#include <gtest/gtest.h>

#include "support/error.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

using testing::Oracle;
using testing::TemplateCase;

class EveryConfig : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(EveryConfig, MatchesReferenceInInterpreter) {
  const TemplateCase& c = GetParam();
  const Task task = Task::create(c.template_name, c.args, testing::small_target());
  const ConfigSpace& space = task.space();
  ASSERT_LE(space.size(), 2000u) << task.workload_key();
  ASSERT_GE(space.size(), 8u) << task.workload_key();
  const Oracle oracle(task, 42);
  uint64_t valid = 0;
  for (uint64_t i = 0; i < space.size(); ++i) {
    const Config cfg = space.get(i);
    if (!space.is_valid(i)) {
      try {
        task.instantiate(cfg);
        ADD_FAILURE() << "instantiated a config its constraints reject: " << cfg.to_json_string();
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInstantiation);
      }
      continue;
    }
    ++valid;
    te::LoweredFunc f;
    try {
      const Instantiated inst = task.instantiate(cfg);
      f = te::lower(inst.schedule, inst.args, c.template_name);
    } catch (const Error& e) {
      ADD_FAILURE() << task.workload_key() << " config " << cfg.to_json_string() << ": " << e.what();
      continue;
    }
    const double err = oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args); });
    EXPECT_LT(err, 1e-4) << task.workload_key() << " config " << cfg.to_json_string();
    if (::testing::Test::HasFailure()) break;  // one failing config says enough
  }
  EXPECT_GT(valid, 0u);
  std::printf("%s: %llu configs, %llu valid, all checked\n", task.workload_key().c_str(),
              static_cast<unsigned long long>(space.size()), static_cast<unsigned long long>(valid));
  // The oracle itself notices a kernel that writes nothing.
  EXPECT_GT(oracle.check([](const std::vector<void*>&) {}), 1.0);
  // The fallback is valid and correct too.
  const Instantiated inst = task.instantiate(task.fallback_config());
  const te::LoweredFunc f = te::lower(inst.schedule, inst.args, c.template_name);
  EXPECT_LT(oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args); }), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Templates, EveryConfig, ::testing::ValuesIn(testing::small_cases()),
                         [](const ::testing::TestParamInfo<TemplateCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ktune::schedule_space

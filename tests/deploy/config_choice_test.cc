// Tests of choose_config on a tuning log: the tuned record, the nearest tuned workload and the
// fallback, each checked against the records written; the untuned reasons, warnings and errors.
#include "deploy/config_choice.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "codegen/target.h"
#include "deploy/model_plan.h"
#include "support/error.h"
#include "tests/deploy/history_test_util.h"
#include "tests/rpc_runner/server/service_test_util.h"

namespace ktune::deploy {
namespace {

using rpc_runner::testing::TempDir;
using schedule_space::Task;
using testing::kind_of;
using testing::kOldLlvm;
using testing::matmul;
using testing::other_configs;
using testing::record_of;
using testing::write_log;
using Source = ConfigChoice::Source;

Workload workload_of(const Task& task) {
  return Workload{codegen::Target::parse(task.target().key), task};
}

TEST(ConfigChoice, TheFastestRecordOfTheWorkloadIsTuned) {
  TempDir dir;
  const Task task = matmul(64, 48, 32), other = matmul(64, 48, 16);
  const auto configs = other_configs(task, 3);
  ASSERT_EQ(configs.size(), 3u);
  // The fastest record of all is another workload's: it must not be taken.
  write_log(
      dir.file("log.db"),
      {record_of(task, configs[0], 2e-3), record_of(task, configs[1], 1e-3),
       record_of(task, configs[2], 3e-3), record_of(other, other_configs(other, 1)[0], 1e-4)});

  const ConfigChoice c = choose_config(HistorySource::log(dir.file("log.db")), workload_of(task));
  EXPECT_EQ(c.source, Source::kTuned);
  ASSERT_TRUE(c.best.has_value());
  EXPECT_EQ(c.best->workload_key, task.workload_key());
  EXPECT_EQ(c.best->config_index, static_cast<int64_t>(configs[1].index()));
  EXPECT_DOUBLE_EQ(c.best->mean_cost(), 1e-3);
  EXPECT_EQ(c.config.index(), configs[1].index());
  EXPECT_EQ(c.record(), &*c.best);
  EXPECT_FALSE(c.nearest.has_value());
  EXPECT_EQ(c.untuned_reason, "");
  EXPECT_TRUE(c.warnings.empty());  // this LLVM's record, a real device: nothing to say
}

TEST(ConfigChoice, AnOlderToolchainsOrAnEmulatedRecordIsServedWithItsWarnings) {
  TempDir dir;
  const Task task = matmul(32, 32, 48);
  const auto configs = other_configs(task, 1);
  tuning_db::Record old_emulated = record_of(task, configs[0], 1e-3, kOldLlvm);
  old_emulated.emulated = true;
  write_log(dir.file("log.db"), {old_emulated});
  const std::string note =
      dir.file("log.db") +
      " holds 1 successful record of this workload measured on an emulated device (qemu), not "
      "served as real timings; --emulated serves them";

  // Not asked for: the emulated record is no record; the reason says so only when told the switch.
  HistorySource from = HistorySource::log(dir.file("log.db"));
  const std::string no_record = "no successful record of " + task.workload_key() +
                                " for this target in " + dir.file("log.db");
  EXPECT_EQ(choose_config(from, workload_of(task)).untuned_reason, no_record);
  ChoiceOptions with_switch;
  with_switch.emulated_switch = "--emulated";
  const ConfigChoice untuned = choose_config(from, workload_of(task), with_switch);
  EXPECT_EQ(untuned.source, Source::kFallback);
  EXPECT_EQ(untuned.untuned_reason, no_record + "; " + note);

  // Asked for: served, with the emulator's warning first and the toolchain's second.
  from.include_emulated = true;
  const ConfigChoice c = choose_config(from, workload_of(task), with_switch);
  EXPECT_EQ(c.source, Source::kTuned);
  ASSERT_TRUE(c.best.has_value());
  EXPECT_TRUE(c.best->emulated);
  EXPECT_EQ(c.best->target.llvm_version, kOldLlvm);
  EXPECT_EQ(c.config.index(), configs[0].index());
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0], emulated_warning(*c.best));
  EXPECT_NE(c.warnings[0].find("emulated device (device key 'test')"), std::string::npos)
      << c.warnings[0];
  EXPECT_EQ(c.warnings[1], toolchain_warning(*c.best));
  EXPECT_NE(c.warnings[1].find(std::string("measured with LLVM ") + kOldLlvm), std::string::npos)
      << c.warnings[1];
}

TEST(ConfigChoice, AnUntunedShapeTakesTheNearestTunedWorkloadsConfig) {
  TempDir dir;
  const Task tuned = matmul(64, 64, 64), far = matmul(256, 256, 256), untuned = matmul(64, 64, 128);
  const auto configs = other_configs(tuned, 1);
  write_log(dir.file("log.db"),
            {record_of(tuned, configs[0], 1e-3), record_of(far, far.fallback_config(), 1e-4)});
  const HistorySource from = HistorySource::log(dir.file("log.db"));

  const ConfigChoice c = choose_config(from, workload_of(untuned));
  EXPECT_EQ(c.source, Source::kNearest);
  EXPECT_FALSE(c.best.has_value());
  ASSERT_TRUE(c.nearest.has_value());
  EXPECT_EQ(c.nearest->record.workload_key, tuned.workload_key());
  EXPECT_EQ(c.nearest->record.config_index, static_cast<int64_t>(configs[0].index()));
  EXPECT_DOUBLE_EQ(c.nearest->distance, 1.0);  // K twice as large
  EXPECT_EQ(c.config.index(), c.nearest->config.index());
  EXPECT_EQ(c.record(), &c.nearest->record);
  EXPECT_EQ(c.untuned_reason, "no successful record of " + untuned.workload_key() +
                                  " for this target in " + dir.file("log.db"));
  EXPECT_TRUE(c.warnings.empty());

  // Without the nearest look-up: straight to the fallback, for the same reason.
  ChoiceOptions no_nearest;
  no_nearest.nearest = false;
  const ConfigChoice f = choose_config(from, workload_of(untuned), no_nearest);
  EXPECT_EQ(f.source, Source::kFallback);
  EXPECT_FALSE(f.nearest.has_value());
  EXPECT_EQ(f.config.index(), untuned.fallback_config().index());
  EXPECT_EQ(f.untuned_reason, c.untuned_reason);
}

TEST(ConfigChoice, NothingNearGivesTheFallback) {
  TempDir dir;
  const Task tuned = matmul(64, 64, 64);
  const Task task =
      make_task("batch_matmul", {{"batch", "2"}, {"M", "32"}, {"N", "32"}, {"K", "32"}});
  write_log(dir.file("log.db"), {record_of(tuned, tuned.fallback_config(), 1e-3)});

  const ConfigChoice c = choose_config(HistorySource::log(dir.file("log.db")), workload_of(task));
  EXPECT_EQ(c.source, Source::kFallback);
  EXPECT_EQ(c.config.index(), task.fallback_config().index());
  EXPECT_FALSE(c.best.has_value());
  EXPECT_FALSE(c.nearest.has_value());
  EXPECT_EQ(c.record(), nullptr);
  EXPECT_EQ(c.untuned_reason, "no successful record of " + task.workload_key() +
                                  " for this target in " + dir.file("log.db"));
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigChoice, AMissingLogIsAnErrorAndUntunedIsAskedFor) {
  TempDir dir;
  const Task task = matmul(16, 16, 16);
  const HistorySource missing = HistorySource::log(dir.file("missing.db"));
  EXPECT_EQ(kind_of([&] { choose_config(missing, workload_of(task)); }), ErrorKind::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.file("missing.db")));  // looked at, never created
  const ConfigChoice c = choose_config(HistorySource::untuned(), workload_of(task));
  EXPECT_EQ(c.source, Source::kFallback);
  EXPECT_EQ(c.config.index(), task.fallback_config().index());
  EXPECT_EQ(c.untuned_reason, "built untuned, without a tuning log");
  EXPECT_FALSE(c.nearest);

  const std::string not_a_log = dir.write("not_a_log.db", "this is not SQLite\n");
  EXPECT_EQ(kind_of([&] { choose_config(HistorySource::log(not_a_log), workload_of(task)); }),
            ErrorKind::kDatabase);
  EXPECT_EQ(kind_of([] { HistorySource::log(""); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([] { HistorySource::server({}); }), ErrorKind::kInvalidArgument);
}

// A model build's counts: a step served its own best record counts as tuned, and among those the
// ones whose best record is the fallback config itself (a log tuned briefly) are counted apart.
TEST(ConfigChoice, AModelsTunedStepsOnTheFallbackConfigAreCountedApart) {
  ModelPlan plan;
  const auto step = [](ConfigChoice::Source source, const std::string& tuner) {
    PlanStep s;
    ConfigChoice c;
    c.source = source;
    if (source == ConfigChoice::Source::kTuned) {
      c.best.emplace();
      c.best->tuner = tuner;
    }
    s.choice = c;
    return s;
  };
  plan.steps = {step(ConfigChoice::Source::kTuned, "xgb"),
                step(ConfigChoice::Source::kTuned, "fallback"),
                step(ConfigChoice::Source::kTuned, "fallback"),
                step(ConfigChoice::Source::kFallback, ""), PlanStep{}};
  const StepSources n = step_sources(plan);
  EXPECT_EQ(n.tuned, 3);
  EXPECT_EQ(n.tuned_fallback_config, 2);
  EXPECT_EQ(n.fallback, 1);
  EXPECT_EQ(n.generated, 1);
  EXPECT_EQ(n.tasks(), 4);
}

}  // namespace
}  // namespace ktune::deploy

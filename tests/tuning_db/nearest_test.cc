// Tests nearest_tuned(): the distance on workload arguments, the nearest tuned workload's config
// chosen for an untuned shape, and configs the new shape cannot take passed over.
#include "tuning_db/nearest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"

namespace ktune::tuning_db {
namespace {

using testing::TempDir;

// The nearest tuned workload is found on both backends.
class NearestOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, NearestOn, testing::kBothBackends, testing::backend_test_name);

const TargetKey kTarget{"llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "19.1.7"};

schedule_space::Task matmul(int64_t m, int64_t n, int64_t k, const std::string& layout = "nn") {
  const auto traits =
      schedule_space::make_target_traits(kTarget.target, "x86_64-linux-gnu", 256, 2);
  return schedule_space::Task::create("matmul",
                                      {{"M", std::to_string(m)},
                                       {"N", std::to_string(n)},
                                       {"K", std::to_string(k)},
                                       {"layout", layout}},
                                      traits);
}

Record record_of(const schedule_space::Task& task, uint64_t index, double cost) {
  Record r;
  r.workload_key = task.workload_key();
  r.template_name = task.template_name();
  r.args = task.args_json();
  r.flop = task.flop();
  r.target = kTarget;
  r.device_key = "x86";
  r.config_index = static_cast<int64_t>(index);
  r.config = task.space().get(index).to_json();
  r.costs = {cost};
  r.tuner = "random";
  r.timestamp = 1.7e9;
  r.ktune_version = "0.2.0";
  return r;
}

// Whether config `index` of `from` is a config `to` can take (as nearest_tuned decides).
bool fits(const schedule_space::Task& from, uint64_t index, const schedule_space::Task& to) {
  try {
    const uint64_t i = to.space().index_of(from.space().get(index));
    if (!to.space().is_valid(i)) return false;
    to.instantiate(to.space().get(i));
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST(NearestTest, DistanceIsLogScaleOnSizesAndInfiniteAcrossOtherArguments) {
  const nlohmann::json a = {{"M", 64}, {"N", 64}, {"K", 64}, {"dtype", "float32"}};
  EXPECT_DOUBLE_EQ(workload_distance(a, a), 0);
  EXPECT_DOUBLE_EQ(workload_distance(a, {{"M", 128}, {"N", 64}, {"K", 64}, {"dtype", "float32"}}),
                   1);
  EXPECT_DOUBLE_EQ(
      workload_distance(a, {{"M", "32"}, {"N", "256"}, {"K", 64}, {"dtype", "float32"}}), 3);
  EXPECT_TRUE(
      std::isinf(workload_distance(a, {{"M", 64}, {"N", 64}, {"K", 64}, {"dtype", "float64"}})));
  EXPECT_TRUE(std::isinf(workload_distance(a, {{"M", 64}, {"N", 64}, {"dtype", "float32"}})));
  EXPECT_TRUE(
      std::isinf(workload_distance(a, {{"M", 64}, {"N", 64}, {"L", 64}, {"dtype", "float32"}})));
}

TEST_P(NearestOn, TheNearestTunedShapesBestConfigIsTakenAsAnIndexOfTheNewSpace) {
  Database db = Database::open(fresh("log.db"));
  const auto big = matmul(256, 256, 256), small = matmul(32, 32, 32),
             other_layout = matmul(240, 256, 256, "nt");
  // Configs of big that the new shape takes as they are (power-of-two tiles divide both).
  const auto target = matmul(128, 256, 512);
  std::vector<uint64_t> fitting;
  for (uint64_t i = 0; i < big.space().size() && fitting.size() < 3; i += 97)
    if (big.space().is_valid(i) && fits(big, i, target)) fitting.push_back(i);
  ASSERT_EQ(fitting.size(), 3u);
  db.add({record_of(big, fitting[0], 3e-3), record_of(big, fitting[1], 1e-3),
          record_of(big, fitting[2], 2e-3), record_of(small, small.space().size() / 2, 1e-6),
          record_of(other_layout, 0, 1e-9)});
  const auto nearest = nearest_tuned(db, target, kTarget);
  ASSERT_TRUE(nearest.has_value());
  EXPECT_EQ(nearest->record.workload_key, big.workload_key());
  EXPECT_EQ(nearest->record.config_index, static_cast<int64_t>(fitting[1]));  // the fastest there
  EXPECT_NEAR(nearest->distance, 2.0, 1e-9);                                  // M halved, K doubled
  EXPECT_EQ(nearest->adapted, 0);
  // The same schedule, as the new space numbers it.
  EXPECT_EQ(nearest->config.to_json()["entity"], big.space().get(fitting[1]).to_json()["entity"]);
  EXPECT_EQ(nearest->config.index(), target.space().index_of(big.space().get(fitting[1])));
  // Its own workload is never "nearest"; a log with nothing of the template answers nothing.
  db.add({record_of(target, 0, 1e-3)});
  EXPECT_EQ(nearest_tuned(db, target, kTarget)->record.workload_key, big.workload_key());
  TempDir empty;
  Database none = Database::open(empty.file("log.db"));
  EXPECT_FALSE(nearest_tuned(none, target, kTarget).has_value());
}

TEST_P(NearestOn, FactorsTheNewShapeLacksAreAdaptedAndAConfigWithoutAKnobIsPassedOver) {
  Database db = Database::open(fresh("log.db"));
  const auto target = matmul(3, 64, 64), nearer = matmul(4, 64, 64), near = matmul(64, 64, 64);
  // near's record: a config whose split factors the 3-row shape does not offer as they are.
  std::optional<uint64_t> misfit;
  for (uint64_t i = 0; i < near.space().size() && !misfit; ++i)
    if (near.space().is_valid(i) && !fits(near, i, target)) misfit = i;
  ASSERT_TRUE(misfit.has_value());
  // nearer's record: written by a template that had one knob less, one without a legacy value (it
  // cannot be carried over; a knob with a legacy value, as stream_b, would be).
  Record broken = record_of(nearer, 0, 1e-5);
  auto& entities = broken.config["entity"];
  for (size_t i = 0; i < entities.size(); ++i)
    if (entities[i][0] == "tile_k") entities.erase(i);
  ASSERT_EQ(entities.size(), nearer.space().num_knobs() - 1);
  db.add({broken, record_of(near, *misfit, 1e-4)});

  const auto nearest = nearest_tuned(db, target, kTarget);
  ASSERT_TRUE(nearest.has_value());
  EXPECT_EQ(nearest->record.workload_key, near.workload_key());
  EXPECT_EQ(nearest->record.config_index, static_cast<int64_t>(*misfit));
  EXPECT_GE(nearest->adapted, 1);
  // What it gives is a config of the new space that instantiates, and every knob the new space
  // has the old value of keeps it.
  const schedule_space::Config old = near.space().get(*misfit);
  ASSERT_TRUE(target.space().is_valid(nearest->config.index()));
  EXPECT_NO_THROW(target.instantiate(nearest->config));
  int kept = 0, changed = 0;
  for (size_t k = 0; k < target.space().num_knobs(); ++k) {
    const auto& knob = target.space().knob(k);
    if (!old.find(
            knob.name())) {  // a knob only this shape has (stream_b, M <= 4): its legacy value
      EXPECT_EQ(nearest->config[knob.name()].as_int(), 0) << knob.name();
      continue;
    }
    const schedule_space::Entity& was = old[knob.name()];
    if (knob.find(was) >= 0) {
      EXPECT_EQ(nearest->config[knob.name()], was) << knob.name();
      ++kept;
    } else {
      ++changed;
    }
  }
  EXPECT_EQ(changed, nearest->adapted);
  EXPECT_GT(kept, 0);
}

}  // namespace
}  // namespace ktune::tuning_db

// StepThreadsStore: per-step thread counts of built models (one row per model, target and count).
#include "tuning_db/step_threads_store.h"

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {

using nlohmann::json;

StepThreadsStore::StepThreadsStore(Database& db) : impl_(*db.impl_) {}

void StepThreadsStore::save(const StepThreadsRow& row) {
  if (row.model_key.empty() || row.target.empty() || row.threads < 2)
    throw Error(ErrorKind::kInvalidArgument,
                "a step thread choice needs a model key, a target and a thread count above 1");
  json steps = json::array();
  for (const StepThreadsStep& s : row.steps)
    steps.push_back({{"layer", s.layer},
                     {"max_threads", s.max_threads},
                     {"all_s", s.all_s},
                     {"one_s", s.one_s}});
  auto s = impl_.use(
      "INSERT INTO step_threads(model_key, target, threads, steps, uncapped_s, capped_s, "
      "measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(model_key, target, threads) "
      "DO UPDATE SET steps = excluded.steps, uncapped_s = excluded.uncapped_s, "
      "capped_s = excluded.capped_s, measured_at = excluded.measured_at");
  s->bind(1, row.model_key).bind(2, row.target).bind(3, int64_t{row.threads});
  s->bind(4, steps.dump()).bind(5, row.uncapped_s).bind(6, row.capped_s).bind(7, now_seconds());
  s->run();
}

std::optional<StepThreadsRow> StepThreadsStore::find(const std::string& model_key,
                                                     const std::string& target, int threads) {
  // A log of an older schema opened read-only has no choices.
  if (!impl_.conn.driver().has_object("table", "step_threads")) return std::nullopt;
  auto s = impl_.use(
      "SELECT threads, steps, uncapped_s, capped_s, measured_at FROM step_threads "
      "WHERE model_key = ?1 AND target = ?2 AND (?3 = 0 OR threads = ?3) "
      "ORDER BY threads DESC LIMIT 1");
  s->bind(1, model_key).bind(2, target).bind(3, int64_t{threads});
  if (!s->step()) return std::nullopt;
  StepThreadsRow row;
  row.model_key = model_key;
  row.target = target;
  row.threads = static_cast<int>(s->column_int(0));
  for (const json& j : json::parse(s->column_text(1)))
    row.steps.push_back({j.at("layer").get<std::string>(), j.at("max_threads").get<int>(),
                         j.at("all_s").get<double>(), j.at("one_s").get<double>()});
  row.uncapped_s = s->column_double(2);
  row.capped_s = s->column_double(3);
  row.measured_at = s->column_double(4);
  return row;
}

}  // namespace ktune::tuning_db

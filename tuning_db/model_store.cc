// ModelStore: the cost models saved in the log (one row per name, scope and target).
#include "tuning_db/model_store.h"

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {

using nlohmann::json;

ModelStore::ModelStore(Database& db) : impl_(*db.impl_) {}

void ModelStore::save(const ModelInfo& info, std::span<const uint8_t> blob) {
  if (info.name.empty() || info.scope.empty() || info.target.target.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "a saved model needs a name, a scope and a target");
  }
  sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool) {
    int64_t target = impl_.ensure_target(info.target);
    auto s = impl_.use(
        "INSERT INTO models(name, scope, target_id, blob, metadata, created_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name, scope, target_id) DO UPDATE SET "
        "blob = excluded.blob, metadata = excluded.metadata, created_at = excluded.created_at");
    s->bind(1, info.name).bind(2, info.scope).bind(3, target).bind_blob(4, blob);
    s->bind(5, info.metadata.dump()).bind(6, now_seconds());
    s->run();
  });
}

std::optional<SavedModel> ModelStore::load(std::string_view name, std::string_view scope,
                                           const TargetKey& target) {
  auto s = impl_.use(
      "SELECT m.name, m.scope, t.target, t.llvm_version, m.blob, m.metadata, m.created_at "
      "FROM models m JOIN targets t ON t.id = m.target_id "
      "WHERE m.name = ?1 AND m.scope = ?2 AND t.target = ?3 AND (?4 = '' OR t.llvm_version = ?4) "
      "ORDER BY m.created_at DESC, m.id DESC LIMIT 1");
  s->bind(1, name).bind(2, scope).bind(3, target.target).bind(4, target.llvm_version);
  if (!s->step()) return std::nullopt;
  SavedModel model;
  model.info.name = s->column_text(0);
  model.info.scope = s->column_text(1);
  model.info.target = {s->column_text(2), s->column_text(3)};
  model.blob = s->column_blob(4);
  model.info.metadata = json::parse(s->column_text(5));
  model.info.created_at = s->column_double(6);
  return model;
}

}  // namespace ktune::tuning_db

// choose_config(): best record, else the nearest tuned workload's config, else the fallback.
#include "deploy/config_choice.h"

#include "support/error.h"
#include "tuning_db/database.h"

namespace ktune {

HistorySource HistorySource::log(std::string db_path) {
  if (db_path.empty())
    throw Error(ErrorKind::kInvalidArgument, "HistorySource::log needs a tuning log path");
  HistorySource s;
  s.db_path_ = std::move(db_path);
  return s;
}

HistorySource HistorySource::server(rpc_runner::ServiceClientOptions options,
                                    std::string device_key) {
  if (options.server.empty())
    throw Error(ErrorKind::kInvalidArgument, "HistorySource::server needs HOST:PORT");
  HistorySource s;
  s.server_ = std::move(options);
  s.device_key_ = std::move(device_key);
  return s;
}

HistorySource HistorySource::untuned() { return HistorySource{}; }

std::string HistorySource::describe() const {
  if (is_server()) return "tuning server " + server_.server;
  return is_untuned() ? "no tuning log (--untuned)" : "tuning log " + db_path_;
}

}  // namespace ktune

namespace ktune::deploy {

const tuning_db::Record* ConfigChoice::record() const {
  if (best) return &*best;
  if (nearest) return &nearest->record;
  return nullptr;
}

bool ConfigChoice::on_fallback_config() const {
  return source == Source::kTuned && best && best->tuner == "fallback";
}

namespace {

// The one place that asks "log or server": every look-up of choose_config goes through it.
class Lookup {
 public:
  Lookup(const HistorySource& from, const Workload& w) : from_(from), w_(w) {}

  std::optional<tuning_db::Record> best() const {
    return from_.is_server()
               ? best_record(from_.server_options(), w_, from_.device_key(), from_.include_emulated)
               : best_record(from_.db_path(), w_, from_.include_emulated);
  }

  std::optional<tuning_db::NearestTuned> nearest() const {
    return from_.is_server() ? nearest_record(from_.server_options(), w_, from_.device_key(),
                                              from_.include_emulated)
                             : nearest_record(from_.db_path(), w_, from_.include_emulated);
  }

  // "no successful record of KEY for this target in PATH" (or "on HOST:PORT"), with the note on a
  // log's emulated-only records when `emulated_switch` is set.
  std::string no_record_reason(const std::string& emulated_switch) const {
    const std::string head =
        "no successful record of " + w_.task.workload_key() + " for this target ";
    std::string reason = head + (from_.is_server() ? "on " + from_.server_options().server
                                                   : "in " + from_.db_path());
    if (!emulated_switch.empty() && !from_.include_emulated) {
      const std::string note =
          from_.is_server()
              ? emulated_only_note(from_.server_options(), w_, from_.device_key(), emulated_switch)
              : emulated_only_note(from_.db_path(), w_, emulated_switch);
      if (!note.empty()) reason += "; " + note;
    }
    return reason;
  }

 private:
  const HistorySource& from_;
  const Workload& w_;
};

void add_warning(std::vector<std::string>& warnings, std::string warning) {
  if (!warning.empty()) warnings.push_back(std::move(warning));
}

}  // namespace

void require_tuning_log(const std::string& db_path) {
  if (tuning_db::log_exists(db_path)) return;
  throw Error(ErrorKind::kNotFound,
              "no tuning log at " + db_path +
                  " (`ktune tune` and `ktune tune-model` write one; --untuned builds every kernel "
                  "on its fallback config)");
}

ConfigChoice choose_config(const HistorySource& from, const Workload& workload,
                           const ChoiceOptions& options) {
  const Lookup lookup(from, workload);
  ConfigChoice c;
  if (from.is_untuned()) {
    c.untuned_reason = "built untuned, without a tuning log";
    c.config = workload.task.fallback_config();
    return c;
  }
  if (!from.is_server()) require_tuning_log(from.db_path());
  c.best = lookup.best();
  if (c.best) {
    c.source = ConfigChoice::Source::kTuned;
    c.config = schedule_space::Config::from_json(c.best->config);
    add_warning(c.warnings, emulated_warning(*c.best));
    add_warning(c.warnings, toolchain_warning(*c.best));
    return c;
  }
  c.untuned_reason = lookup.no_record_reason(options.emulated_switch);
  // A shape nobody tuned: the best config of the nearest tuned shape that is valid for this one
  // beats the generic fallback far more often than not (bench/nearest_shape measures it).
  if (options.nearest) c.nearest = lookup.nearest();
  if (c.nearest) {
    c.source = ConfigChoice::Source::kNearest;
    c.config = c.nearest->config;
    add_warning(c.warnings, emulated_warning(c.nearest->record));
    return c;
  }
  c.config = workload.task.fallback_config();
  return c;
}

}  // namespace ktune::deploy

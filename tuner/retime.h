// Defines retime_best(): a workload's best configs timed again, interleaved round-robin, so that
// the figure best() ranks by is the median of several timings taken side by side, not one timing
// that may have been lucky.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule_space/task.h"
#include "tuner/measure.h"
#include "tuning_db/database.h"

namespace ktune::tuner {

struct RetimeOptions {
  int64_t top = 5;         // the best records re-timed (0 = none)
  int rounds = 3;          // each round times every one of them once, in a rotated order
  std::string device_key;  // records of exactly this device key ("" = those logged without one)
};

// One record re-timed.
struct RetimedConfig {
  int64_t record_id = 0;
  int64_t config_index = 0;
  double before_s = 0;  // its figure before (the first timing's mean, or an earlier re-timing)
  double after_s = 0;   // the median of this re-timing's rounds; 0 when every round failed
  int failed_rounds = 0;
  bool noisy = false;  // the rounds spread more than tuning_db::kNoisySpread
  // Another device of the key timed it more than tuning_db::kDisputeFactor away from its own
  // figure: not served (tuning_db::Record::disputed); after_s is its own device's figure.
  bool disputed = false;
};

// The fallback config's record is re-timed beside the best wherever it ranks: a first timing can
// rank it below configs that do not run as fast side by side (a two-thread 14x14 conv's tuned best
// raced at 0.88 of oneDNN, its fallback at 0.98), a build should be served whichever is faster,
// and a run that reports both compares them like with like.

// At most this many passes (see retime_best).
constexpr int kMaxRetimePasses = 3;

struct RetimeReport {
  int rounds = 0;
  int passes = 0;        // passes over the best (more when the first demoted them all)
  int64_t measured = 0;  // configs handed to the measurer, over every pass and round
  // Every record re-timed, once each (the last pass's figure, the figure before the first), in
  // the order they were chosen (by their figures before, best first).
  std::vector<RetimedConfig> configs;
  // The log's best before and after (Record::cost(), seconds) and their configs.
  double best_before_s = 0, best_after_s = 0;
  int64_t best_before_index = -1, best_after_index = -1;
  // The best after is a record this re-timing measured: false when every pass, up to
  // kMaxRetimePasses, demoted all it timed, and the best is then a first timing.
  bool best_after_retimed = true;
  // The fallback's record was re-timed beside the best, not being one of them.
  bool with_fallback = false;
  bool empty() const { return configs.empty(); }
};

// Times the `options.top` best real records of the task's workload on `target` (this toolchain
// when target.llvm_version is set) measured on devices of options.device_key, and the fallback
// config's record wherever it ranks, again with `measurer`: `options.rounds` rounds, each one
// measure() call of all of them in an order rotated by one per round (so that none is always first
// or last), and stores each record's rounds (Database::retime): their median is then the figure
// best/top_k rank by. When the best is then a record not re-timed (every chosen one was demoted),
// another pass re-times the new top options.top, up to kMaxRetimePasses passes, so that the best
// served has been re-timed. On a measurer of several devices (a tuning server's workers) a round
// timed on a device other than the record's own counts only where it agrees with the record's
// figure (tuning_db::disagree); where it does not, the record is disputed and not served until a
// device other than its own agrees (Database::set_disputed), and its figure stays its own
// device's. Disputed records among the best are re-timed too, without counting towards
// options.top. A config whose rounds all fail keeps its figure (with a warning);
// failed rounds are left out of the median. Records whose config this ktune cannot rebuild are
// passed over. Returns what was re-timed (empty when the log holds no such record). Throws what the
// measurer and the log throw.
RetimeReport retime_best(tuning_db::Database& db, const schedule_space::Task& task,
                         Measurer& measurer, const tuning_db::TargetKey& target,
                         const RetimeOptions& options);

// The report as JSON: {rounds, passes, measured, best_before_s, best_after_s, best_before_config,
// best_after_config, best_after_retimed, with_fallback, configs: [{record, config, before_s,
// after_s, failed_rounds, noisy, disputed}]}.
nlohmann::json to_json(const RetimeReport& report);
// The report back from that JSON (a job's summary, as a client receives it); a field missing is
// left at its default.
RetimeReport retime_report_from_json(const nlohmann::json& j);

// One line for a person: "re-timed the N best configs over R interleaved rounds: best X ms ->
// Y ms (config #i)", naming the config that is now the best when it changed and the noisy ones.
std::string describe(const RetimeReport& report);

}  // namespace ktune::tuner

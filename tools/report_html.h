// Declares render_report_html(): a tuning log's Report as one self-contained HTML page (inline CSS
// and SVG, no script).
#pragma once

#include <string>

#include "tuning_db/report.h"

namespace ktune::tools {

// The page: a summary of the log, the errors by kind, per workload its tuning curves (best
// GFLOP/s against trials, one line per tuner), errors and top configs, the cost model's rank
// correlation per plan of each run, and the per-layer table of each model run. `generated_at`
// is printed as given (the caller's clock).
std::string render_report_html(const tuning_db::Report& report, const std::string& generated_at);

}  // namespace ktune::tools

// The progress bar of the tuning loop.
#include "tuner/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

namespace ktune::tuner {
namespace {

std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

struct ProgressState {
  const schedule_space::Task* task;
  size_t n_trial;
  ProgressOptions options;
  bool terminal;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  size_t done = 0;
  size_t errors = 0;
  double best_gflops = 0;

  void report(const std::vector<MeasureInput>& inputs, const std::vector<MeasureResult>& results) {
    (void)inputs;
    for (const auto& r : results) {
      ++done;
      if (!r.ok()) {
        ++errors;
        continue;
      }
      best_gflops = std::max(best_gflops, task->flop() / r.mean_cost() / 1e9);
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = done > 0 && n_trial > done ? elapsed / done * (n_trial - done) : 0;
    size_t total = options.done_before + n_trial;
    size_t shown = options.done_before + done;
    std::string rho;
    if (options.rank_correlation) {
      if (std::optional<double> r = options.rank_correlation()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " rho=%.2f", *r);
        rho = buf;
      }
    }
    if (terminal) {
      constexpr int kWidth = 30;
      int filled = n_trial ? static_cast<int>(kWidth * std::min<double>(1.0, double(done) / n_trial)) : kWidth;
      std::string bar(filled, '#');
      bar.resize(kWidth, '.');
      std::fprintf(options.out, "\r[%s] %zu/%zu trials  best %.2f GFLOP/s  errors %zu %s ETA %s ",
                   bar.c_str(), shown, total, best_gflops, errors, rho.c_str(), format_eta(eta).c_str());
      if (done >= n_trial) std::fputc('\n', options.out);
    } else {
      std::fprintf(options.out, "trials %zu/%zu best_gflops %.2f errors %zu elapsed_s %.1f eta_s %.1f%s\n",
                   shown, total, best_gflops, errors, elapsed, eta, rho.c_str());
    }
    std::fflush(options.out);
  }
};

}  // namespace

Callback progress_callback(const schedule_space::Task& task, size_t n_trial,
                           const ProgressOptions& options) {
  auto state = std::make_shared<ProgressState>();
  state->task = &task;
  state->n_trial = n_trial;
  state->options = options;
  state->terminal = !options.force_plain && isatty(fileno(options.out));
  return [state](const std::vector<MeasureInput>& inputs, const std::vector<MeasureResult>& results) {
    state->report(inputs, results);
  };
}

}  // namespace ktune::tuner

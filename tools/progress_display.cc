// The progress bar and plain progress lines.
#include "tools/progress_display.h"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace ktune::tools {
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

}  // namespace

ProgressDisplay::ProgressDisplay(std::FILE* out, bool force_plain)
    : out_(out), terminal_(!force_plain && isatty(fileno(out))) {}

void ProgressDisplay::show(const tuner::ProgressSnapshot& p) {
  size_t errors = 0;
  for (const auto& [kind, n] : p.errors) errors += n;
  std::string rho;
  if (p.rank_correlation) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " rho=%.2f", *p.rank_correlation);
    rho = buf;
  }
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled =
        p.total ? static_cast<int>(kWidth *
                                   std::min<double>(1.0, static_cast<double>(p.done) / p.total))
                : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r[%s] %zu/%zu trials  best %.2f GFLOP/s  errors %zu %s ETA %s ",
                 bar.c_str(), p.done, p.total, p.best_gflops, errors, rho.c_str(),
                 format_eta(p.eta_s).c_str());
    open_line_ = p.done < p.total;
    if (!open_line_) std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "trials %zu/%zu best_gflops %.2f errors %zu elapsed_s %.1f eta_s %.1f%s\n",
                 p.done, p.total, p.best_gflops, errors, p.elapsed_s, p.eta_s, rho.c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  if (open_line_) std::fputc('\n', out_);
  open_line_ = false;
}

}  // namespace ktune::tools

// Benchmark: do shipped kernels run at the speed their records promise? Tunes four ResNet-18
// conv2d_nchwc layers and two matmuls at 2 threads (xgb, a TuningSession over the local runner,
// as `ktune tune` does) into a temporary log, builds each workload's best record with the ktune
// binary exactly as a user does (`ktune build ... --runtime rt.c --require-tuned`), links every
// object with the standalone runtime into one C program with `cc`, and times each kernel alone
// in its own run of that program at 2 threads. The program times like the runner (one warm-up
// call, then `repeat` timings of `number` back-to-back calls, the cost their mean) for `rounds`
// rounds, and the fastest round counts; the runner re-measures the record's config the same way
// (its fastest round), interleaved with the program, to tell a slow runtime from a lucky record.
// Prints per kernel the recorded, runner-now and shipped GFLOP/s and shipped/recorded; last line
// `shipped_over_recorded <geomean>`.
//
// Usage: shipped_vs_recorded [--trials N] [--rounds R] [--passes P] [--seed S] [--keep DIR |
// --retime DIR]
//   --keep DIR leaves the log, objects and program in DIR; --retime DIR times those of an
//   earlier --keep DIR again, without tuning.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/workloads.h"
#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "support/placed_buffer.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library
namespace fs = std::filesystem;

constexpr int kThreads = 2;
constexpr int kNumber = 4, kRepeat = 3;  // the runner's defaults (MeasureOptions)

struct Options {
  size_t trials = 56;
  int rounds = 5;
  int passes = 3;  // runner and program alternate this many times; the fastest round counts
  uint64_t seed = 1;
  std::string keep;     // "" = a temporary directory, removed at the end
  bool retime = false;  // --keep DIR of an earlier run: its log as it is, no tuning
};

const std::vector<bench::Workload>& kWorkloads = bench::resnet_and_matmul_workloads();

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its stdout. Throws Error(kRun) when it fails.
std::string run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw Error(ErrorKind::kRun, "cannot run " + cmd);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (::pclose(p) != 0) throw Error(ErrorKind::kRun, "failed: " + cmd + "\n" + out);
  return out;
}

// The first line of /proc/loadavg: on a shared 2-CPU machine other processes decide these numbers.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line + "\n";
}

// The fastest round of `costs` (rounds of kRepeat timings): the round's mean cost in seconds.
double fastest_round(const std::vector<double>& costs) {
  double best = INFINITY;
  for (size_t r = 0; r + kRepeat <= costs.size(); r += kRepeat) {
    double sum = 0;
    for (int i = 0; i < kRepeat; ++i) sum += costs[r + i];
    best = std::min(best, sum / kRepeat);
  }
  return best;
}

// C source of the program: `./shipped <kernel> <rounds>` times that kernel (see the top).
std::string program(const std::vector<nlohmann::json>& builds) {
  std::ostringstream c;
  c << "#define _DEFAULT_SOURCE /* clock_gettime, madvise */\n#include <stdint.h>\n#include "
       "<stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/mman.h>\n#include "
       "<time.h>\n";
  for (size_t i = 0; i < builds.size(); ++i) c << "#include \"k" << i << ".h\"\n";
  c << "static double now(void) {\n  struct timespec t;\n  clock_gettime(CLOCK_MONOTONIC, &t);\n"
    << "  return t.tv_sec + t.tv_nsec * 1e-9;\n}\n"
    // Placed as the kernel's header asks and as ktune timed it (support/placed_buffer.h).
    << "static void* buffer(size_t bytes) {\n  const size_t huge = " << kHugePageBytes << ";\n"
    << "  const size_t align = bytes >= huge ? huge : 64;\n"
    << "  const size_t size = (bytes + align - 1) / align * align;\n"
    << "  float* p = aligned_alloc(align, size);\n"
    << "  if (bytes >= huge) madvise(p, size, MADV_HUGEPAGE);\n"
    << "  for (size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = (float)((i * 2654435761u) % "
       "1000) / 500.0f - 1.0f;\n"
    << "  return p;\n}\n"
    << "int main(int argc, char** argv) {\n  if (argc != 3) return 2;\n"
    << "  const int kernel = atoi(argv[1]), rounds = atoi(argv[2]);\n"
    << "  int32_t (*fn)(void* const*) = 0;\n  void* args[8];\n  switch (kernel) {\n";
  for (size_t i = 0; i < builds.size(); ++i) {
    const auto& a = builds[i]["arguments"];
    c << "    case " << i << ":\n      fn = " << builds[i]["symbol"].get<std::string>() << ";\n";
    for (size_t j = 0; j < a.size(); ++j)
      c << "      args[" << j << "] = buffer(" << a[j]["bytes"] << ");\n";
    c << "      break;\n";
  }
  c << "    default: return 2;\n  }\n"
    << "  if (ktune_set_num_threads(" << kThreads
    << ") != 0 || fn(args) != 0) return 3; /* warm-up */\n"
    << "  for (int r = 0; r < rounds * " << kRepeat << "; ++r) {\n"
    << "    const double start = now();\n"
    << "    for (int n = 0; n < " << kNumber << "; ++n) if (fn(args) != 0) return 3;\n"
    << "    printf(\"%.9g\\n\", (now() - start) / " << kNumber << ");\n  }\n  return 0;\n}\n";
  return c.str();
}

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"shipped kernels against the speed their records promise", "shipped_vs_recorded"};
  app.add_option("--trials", o.trials, "Tuning trials per workload")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", o.rounds, "Timing rounds per pass")->check(CLI::PositiveNumber);
  app.add_option("--passes", o.passes, "Runner/program alternations")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "Tuner seed");
  auto* keep = app.add_option("--keep", o.keep, "Leave the log, objects and program in DIR");
  app.add_option_function<std::string>(
         "--retime",
         [&o](const std::string& dir) {
           o.keep = dir;
           o.retime = true;
         },
         "Time the kernels of an earlier --keep DIR again, without tuning")
      ->excludes(keep);
  bench::parse_or_exit(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const fs::path dir =
        o.keep.empty() ? fs::temp_directory_path() / ("ktune-shipped-" + std::to_string(::getpid()))
                       : fs::path(o.keep);
    fs::create_directories(dir);
    const std::string db_path = (dir / "tune.db").string();
    const codegen::Target host = codegen::Target::host();
    const auto traits =
        schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), kThreads);
    rpc_runner::LocalRunnerOptions ro;
    ro.runner_path = KTUNE_RUNNER_PATH;
    ro.measure.run_threads = kThreads;
    ro.measure.data_seed = o.seed;
    std::printf("target %s, %d threads, xgb %zu trials per workload, seed %llu, log %s\n",
                host.str().c_str(), kThreads, o.trials, static_cast<unsigned long long>(o.seed),
                db_path.c_str());
    std::fflush(stdout);

    // 1. Tune every workload into the log, as `ktune tune` does.
    std::vector<schedule_space::Task> tasks;
    for (const auto& w : kWorkloads)
      tasks.push_back(schedule_space::Task::create(
          w.template_name, schedule_space::parse_workload_args(w.template_name, w.args), traits));
    if (!o.retime) {
      auto db = tuning_db::Database::open(db_path);
      rpc_runner::LocalRunner runner(ro);
      for (size_t i = 0; i < tasks.size(); ++i) {
        tuner::SessionOptions so;
        so.trials = o.trials;
        so.seed = o.seed;
        tuner::TuningSession session(tasks[i], db, runner, {host.str(), codegen::llvm_version()},
                                     so);
        const tuner::SessionReport r = session.run();
        std::fprintf(stderr, "tuned %s: %zu trials, best %.1f GFLOP/s, %.0f s\n",
                     kWorkloads[i].name.c_str(), r.result.n_measured, r.result.best_gflops,
                     r.result.wall_s);
      }
    }

    // 2. Build every best record as a user does, and one program with all of them.
    std::vector<nlohmann::json> builds;
    for (size_t i = 0; i < kWorkloads.size(); ++i) {
      std::string cmd = quote(KTUNE_BIN) + " build " + kWorkloads[i].template_name;
      for (const auto& a : kWorkloads[i].args) cmd += " " + a;
      const std::string k = (dir / ("k" + std::to_string(i))).string();
      cmd += " --db " + quote(db_path) + " --require-tuned --json --name kernel" +
             std::to_string(i) + " -o " + quote(k + ".o") + " --header " + quote(k + ".h") +
             " --runtime " + quote((dir / "rt.c").string());
      builds.push_back(nlohmann::json::parse(run(cmd)));
    }
    std::ofstream(dir / "main.c") << program(builds);
    std::string link = "cd " + quote(dir.string()) + " && cc -std=c11 -O2 main.c rt.c";
    for (size_t i = 0; i < builds.size(); ++i) link += " k" + std::to_string(i) + ".o";
    run(link + " -o shipped -lpthread -lm");

    // 3. Time: the runner (the record's config again) and the shipped program, interleaved.
    rpc_runner::LocalRunnerOptions remeasure = ro;
    remeasure.measure.number = kNumber;
    remeasure.measure.repeat = kRepeat * o.rounds;
    rpc_runner::LocalRunner runner(remeasure);
    std::printf("load average before timing: %s", load_average().c_str());
    std::printf("%-22s %12s %12s %12s %9s %9s\n", "kernel", "recorded", "runner_now", "shipped",
                "shipped/", "shipped/");
    std::printf("%-22s %12s %12s %12s %9s %9s\n", "", "GFLOP/s", "GFLOP/s", "GFLOP/s", "recorded",
                "runner");
    double log_sum = 0, log_sum_runner = 0, worst = INFINITY;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const auto config = schedule_space::Config::from_json(builds[i]["config"]);
      double runner_s = INFINITY, shipped_s = INFINITY;
      for (int pass = 0; pass < o.passes; ++pass) {
        const auto m = runner.measure({{&tasks[i], config}});
        if (!m.at(0).ok())
          throw Error(ErrorKind::kRun, kWorkloads[i].name + ": " + m[0].error_message);
        runner_s = std::min(runner_s, fastest_round(m[0].costs));
        std::vector<double> costs;
        std::istringstream out(run("cd " + quote(dir.string()) + " && ./shipped " +
                                   std::to_string(i) + " " + std::to_string(o.rounds)));
        for (double c; out >> c;) costs.push_back(c);
        shipped_s = std::min(shipped_s, fastest_round(costs));
      }
      const double flop = tasks[i].flop();
      const double recorded = builds[i]["record"]["gflops"].get<double>(),
                   now = flop / runner_s * 1e-9, shipped = flop / shipped_s * 1e-9;
      std::printf("%-22s %12.1f %12.1f %12.1f %9.3f %9.3f\n", kWorkloads[i].name.c_str(), recorded,
                  now, shipped, shipped / recorded, shipped / now);
      std::fflush(stdout);
      log_sum += std::log(shipped / recorded);
      log_sum_runner += std::log(shipped / now);
      worst = std::min(worst, shipped / recorded);
    }
    if (o.keep.empty()) fs::remove_all(dir);
    // The runner and the program timed in turn see the same machine; the record saw it earlier.
    std::printf("shipped_over_runner_now %.3f\n",
                std::exp(log_sum_runner / static_cast<double>(tasks.size())));
    std::printf("worst_shipped_over_recorded %.3f\n", worst);
    std::printf("shipped_over_recorded %.3f\n",
                std::exp(log_sum / static_cast<double>(tasks.size())));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shipped_vs_recorded: %s\n", e.what());
    return 1;
  }
}

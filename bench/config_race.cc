// Benchmark: given configs of one workload, built and timed interleaved in this process (one
// thread: rounds of at least 2 ms; --threads N > 1: the task's space for N cores, rounds paced as
// in the library races, baselines::race_pacing; median), each checked against the reference from
// unwritten (0xff, NaN for float32) outputs on the runner's input data: float32 outputs within
// 1e-4, integer outputs (the int8 templates' u8, s8 and s32) bit-exactly. For comparing schedules a
// space offers (is form A faster than form B?) without the tuner's sampling in the way. --fallback
// races the task's fallback config (for the same cores) as config 0. With --library, the library's
// operator for the task (baselines::library_op, at the same threads) runs in the same rounds and
// each config also gets its ratio to it. Prints one row per config and, last, `config_race_best
// <index>`.
//
// Usage: config_race [--rounds R] [--threads N] [--library] [--fallback] TEMPLATE KEY=VALUE...
//                    [--config JSON ...]   (at least one config or --fallback)
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baselines/interleaved.h"
#include "baselines/library_baseline.h"
#include "bench/cli.h"
#include "bench/library_race.h"
#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "rpc_runner/runner/reference.h"
#include "schedule_space/task.h"
#include "support/error.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library

struct Options {
  std::string template_name;
  std::vector<std::string> args;
  std::vector<std::string> configs;
  int rounds = 15;
  int threads = 1;
  bool library = false;
  bool fallback = false;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"Configs of one workload built and timed interleaved"};
  app.add_option("template", o.template_name, "Template name")->required();
  app.add_option("args", o.args, "The workload's KEY=VALUE arguments");
  app.add_option("--config", o.configs, "A config as JSON (repeat for each)");
  app.add_option("--rounds", o.rounds, "Interleaved timing rounds")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "Threads of the kernels and the library")
      ->check(CLI::Range(1, 256));
  app.add_flag("--library", o.library, "Race the library's operator in the same rounds");
  app.add_flag("--fallback", o.fallback, "Race the task's fallback config as config 0");
  bench::parse_or_exit(app, argc, argv);
  if (o.configs.empty() && !o.fallback) {
    std::fprintf(stderr, "config_race: give at least one --config or --fallback\n");
    std::exit(1);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    const codegen::Target host = codegen::Target::host();
    const auto traits = schedule_space::make_target_traits(host.str(), host.triple(),
                                                           host.vector_bits(), o.threads);
    const auto task = schedule_space::Task::create(
        o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
    if (o.fallback) o.configs.insert(o.configs.begin(), task.fallback_config().to_json_string());
    bench::set_all_threads(o.threads);
    std::vector<codegen::Kernel> kernels;
    for (const std::string& c : o.configs)
      kernels.push_back(bench::load_kernel(task, schedule_space::Config::from_json_string(c)));
    const auto& sig = kernels.front().signature();
    const auto ref = bench::make_buffers(sig, 1);
    const codegen::Kernel reference = codegen::Kernel::load(
        codegen::build(rpc_runner::lower_reference(task), codegen::Target::host()));
    if (reference.run(bench::pointers(ref)) != 0)
      throw Error(ErrorKind::kRun, "the reference failed");
    std::vector<std::vector<std::unique_ptr<bench::Bytes>>> bufs;
    std::vector<std::vector<void*>> args;  // built once: the timed calls allocate nothing
    std::vector<std::function<void()>> runs;
    int status = 0;
    for (size_t k = 0; k < kernels.size(); ++k) {
      bufs.push_back(bench::make_buffers(sig, 1));
      if (kernels[k].run(bench::pointers(bufs[k])) != 0)
        throw Error(ErrorKind::kRun, "config " + std::to_string(k) + " failed");
      if (!(bench::relative_error(sig, bufs[k], ref) <= 1e-4))
        throw Error(ErrorKind::kWrongAnswer,
                    "config " + std::to_string(k) + " differs from the reference");
      args.push_back(bench::pointers(bufs[k]));
    }
    for (size_t k = 0; k < kernels.size(); ++k) {
      runs.push_back([&kernels, &args, &status, k] { status |= kernels[k].run(args[k]); });
    }
    std::optional<baselines::LibraryOp> lib;
    if (o.library) {
      lib = baselines::library_op(task, o.threads);
      if (!lib) throw Error(ErrorKind::kUnsupported, "no library operator for " + o.template_name);
      bench::set_all_threads(o.threads);
      runs.push_back(lib->run);
    }
    const baselines::RoundPacing pacing =
        o.threads > 1 ? baselines::race_pacing(o.threads) : baselines::RoundPacing{0, 2e-3};
    const std::vector<double> s =
        bench::time_interleaved(runs, o.rounds, pacing.settle_s, pacing.min_round_s);
    if (status != 0) throw Error(ErrorKind::kRun, "a kernel returned an error");
    std::printf("%s, %d thread%s, %d rounds, load average %s\n", task.workload_key().c_str(),
                o.threads, o.threads > 1 ? "s" : "", o.rounds, bench::load_average().c_str());
    if (lib)
      std::printf("library %9.1f GFLOP/s  %s\n", task.flop() / s.back() * 1e-9,
                  lib->library.c_str());
    size_t best = 0;
    for (size_t k = 0; k < kernels.size(); ++k) {
      std::printf("%2zu %9.1f GFLOP/s", k, task.flop() / s[k] * 1e-9);
      if (lib) std::printf(" %6.3f of the library", s.back() / s[k]);
      std::printf("  %s\n", o.configs[k].c_str());
      if (s[k] < s[best]) best = k;
    }
    std::printf("config_race_best %zu\n", best);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "config_race: %s\n", e.what());
    return 1;
  }
}

// Benchmark: given configs of one workload, built and timed interleaved on ONE thread in this
// process (rounds of at least 2 ms, median), each checked against the reference from NaN-filled
// outputs. For comparing schedules a space offers (is form A faster than form B?) without the
// tuner's sampling in the way. With --library, the library's operator for the task
// (baselines::library_op, one thread) runs in the same rounds and each config also gets its ratio
// to it. Prints one row per config and, last, `config_race_best <index>`.
//
// Usage: config_race [--rounds R] [--library] TEMPLATE KEY=VALUE... --config JSON [--config ...]
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  bool library = false;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"Configs of one workload built and timed interleaved on one thread"};
  app.add_option("template", o.template_name, "Template name")->required();
  app.add_option("args", o.args, "The workload's KEY=VALUE arguments");
  app.add_option("--config", o.configs, "A config as JSON (repeat for each)")->required();
  app.add_option("--rounds", o.rounds, "Interleaved timing rounds")->check(CLI::PositiveNumber);
  app.add_flag("--library", o.library, "Race the library's operator in the same rounds");
  bench::parse_or_exit(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const codegen::Target host = codegen::Target::host();
    const auto traits =
        schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
    const auto task = schedule_space::Task::create(
        o.template_name, schedule_space::parse_workload_args(o.template_name, o.args), traits);
    bench::set_all_threads(1);
    std::vector<codegen::Kernel> kernels;
    for (const std::string& c : o.configs)
      kernels.push_back(bench::load_kernel(task, schedule_space::Config::from_json_string(c)));
    const auto& sig = kernels.front().signature();
    const auto ref = bench::make_buffers(sig, 1);
    const codegen::Kernel reference = codegen::Kernel::load(
        codegen::build(rpc_runner::lower_reference(task), codegen::Target::host()));
    if (reference.run(bench::pointers(ref)) != 0)
      throw Error(ErrorKind::kRun, "the reference failed");
    std::vector<std::vector<std::unique_ptr<bench::AlignedFloats>>> bufs;
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
      lib = baselines::library_op(task, 1);
      if (!lib) throw Error(ErrorKind::kUnsupported, "no library operator for " + o.template_name);
      bench::set_all_threads(1);
      runs.push_back(lib->run);
    }
    const std::vector<double> s = bench::time_interleaved(runs, o.rounds, 0, 2e-3);
    if (status != 0) throw Error(ErrorKind::kRun, "a kernel returned an error");
    std::printf("%s, 1 thread, %d rounds, load average %s\n", task.workload_key().c_str(), o.rounds,
                bench::load_average().c_str());
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

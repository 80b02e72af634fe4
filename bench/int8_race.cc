// An int8 kernel tuned, checked against oneDNN and timed with it; the float32 race beside it.
#include "bench/int8_race.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "support/error.h"

namespace ktune::bench::int8 {

codegen::Kernel tune_int8(const schedule_space::Task& task, const std::vector<void*>& kargs,
                          const Options& o, Row& row) {
  const TuneRun run = tune_finalists(task, o.trials, 1, o.threads, 5);
  row.measured = run.measured;
  std::vector<codegen::Kernel> kernels;
  for (const auto& cfg : run.finalists) kernels.push_back(load_kernel(task, cfg));
  std::vector<std::function<void()>> finalists;
  for (const auto& k : kernels) finalists.push_back([&k, &kargs] { k.run(kargs); });
  const std::vector<double> f = time_interleaved(finalists, o.rounds, 0, 2e-3);
  const size_t pick = static_cast<size_t>(std::min_element(f.begin(), f.end()) - f.begin());
  std::fprintf(stderr, "  %s: %s\n", row.name.c_str(),
               run.finalists[pick].to_json_string().c_str());
  return std::move(kernels[pick]);
}

void check_and_time(const codegen::Kernel& kernel, const std::vector<void*>& kargs, Bytes& out,
                    const std::function<void()>& onednn, const std::function<bool()>& same,
                    double ops, const Options& o, Row& row) {
  std::memset(out.p, 0xff, out.n);
  if (kernel.run(kargs) != 0) throw Error(ErrorKind::kRun, "the int8 kernel failed");
  onednn();
  row.exact = same();
  if (!row.exact)
    throw Error(ErrorKind::kWrongAnswer, row.name + ": ktune's int32 result differs from oneDNN's");
  const std::vector<double> t =
      time_interleaved({[&] { kernel.run(kargs); }, onednn}, o.rounds, o.threads > 1 ? 0.15 : 0.05,
                       o.threads > 1 ? 20e-3 : 2e-3);
  row.int8_gops = ops / t[0] * 1e-9;
  row.onednn_gops = ops / t[1] * 1e-9;
}

schedule_space::Task task_of(const std::string& tmpl, const std::vector<std::string>& args,
                             const schedule_space::TargetTraits& traits) {
  return schedule_space::Task::create(tmpl, schedule_space::parse_workload_args(tmpl, args),
                                      traits);
}

std::vector<std::string> gemm_args(const Shape& s) {
  return {"M=" + std::to_string(s.M), "N=" + std::to_string(s.N), "K=" + std::to_string(s.K)};
}

RaceResult race_fp32(const schedule_space::Task& task, const Options& o) {
  RaceOptions ro;
  ro.trials = o.trials;
  ro.rounds = o.rounds;
  ro.threads = o.threads;
  return race(task, ro);
}

}  // namespace ktune::bench::int8

// Defines what int8_vs_library's row groups share: its options, the GEMM shapes, an int8 row, the
// int8 kernel tuned and raced against oneDNN, ktune's float32 kernel raced against its library;
// and declares report_bf16, the bfloat16 group (bench/int8_bf16.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/library_race.h"
#include "codegen/kernel.h"
#include "schedule_space/task.h"

namespace ktune::bench::int8 {

struct Options {
  size_t trials = 192;
  int rounds = 15;
  int threads = 1;
  std::string only;  // "gemm", "conv", "depthwise" or "bf16": those rows alone
};

struct Shape {
  const char* name;
  int64_t M, N, K;
};

// One int8 row: ktune's int8 kernel, oneDNN's, ktune's float32 kernel and its library.
struct Row {
  std::string name, onednn_impl;
  double int8_gops = 0, onednn_gops = 0, fp32_gops = 0, fp32_library_gops = 0;
  size_t measured = 0;
  bool exact = false;
};

// `task` (int8) tuned, its five best configs re-timed in this process on `kargs`: the fastest.
// Sets row.measured and names the config on stderr.
codegen::Kernel tune_int8(const schedule_space::Task& task, const std::vector<void*>& kargs,
                          const Options& o, Row& row);

// Runs ktune's kernel into `out` (pre-filled with 0xff) and oneDNN once, throws
// Error(kWrongAnswer) unless `same` finds the results equal, then times the two interleaved.
void check_and_time(const codegen::Kernel& kernel, const std::vector<void*>& kargs, Bytes& out,
                    const std::function<void()>& onednn, const std::function<bool()>& same,
                    double ops, const Options& o, Row& row);

// The task of template `tmpl` with the workload arguments `args` (key=value).
schedule_space::Task task_of(const std::string& tmpl, const std::vector<std::string>& args,
                             const schedule_space::TargetTraits& traits);
// The arguments M, N and K of a GEMM shape.
std::vector<std::string> gemm_args(const Shape& s);

// ktune's float32 kernel of `task` raced against its library with the same budget.
RaceResult race_fp32(const schedule_space::Task& task, const Options& o);

// The bf16 rows of `shapes` and the last two lines; fp32_gflops[i] is ktune's float32 figure of
// shapes[i] (raced here when empty).
void report_bf16(const std::vector<Shape>& shapes, std::vector<double> fp32_gflops,
                 const schedule_space::TargetTraits& traits, const Options& o);

}  // namespace ktune::bench::int8

// Benchmark: shapes from real networks, each tuned by ktune (xgb, a fixed trial budget) and raced
// on ONE thread in this process against the library a user would call: OpenBLAS (sgemv for
// M = 1, sgemm otherwise) for matmul and dense, oneDNN's convolution in the layout it picks for
// conv2d (ktune: conv2d_nchwc) and depthwise conv2d (ktune: depthwise_conv2d_nchwc)
// (bench/library_race.h: the best of the tuning's finalists re-timed interleaved with the library,
// median of rounds, output checked against the reference). Each row also gives the shape's bound on
// one core: the smaller of the FMA peak and the time its compulsory traffic (every input read once,
// every output written once) takes as a plain vector stream on this core (bench/fma_peak.h), and
// the tuned kernel's share of it. GEMV rows (M = 1) also give the fastest of several hand-written
// GEMV loops (bench/gemv_hand.h) and the tuned kernel's share of that: what a loop written by hand
// for this core reaches. Each row ends with the useful work: the share of the nominal FLOPs that
// are taps inside the input (a padded conv's border multiplies zeros; bench/useful_work.h) and the
// tuned kernel's useful GFLOP/s as a share of the FMA peak. Prints a row per shape,
// `shape_zoo_worst <ratio> <shape>`, and as its last line `shape_zoo_geomean <ktune / library
// GFLOP/s, geometric mean over the shapes>`.
//
// Usage: shape_zoo [--trials N] [--rounds R] [--seed S] [--only SUBSTRING]
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/cli.h"
#include "bench/fma_peak.h"
#include "bench/gemv_hand.h"
#include "bench/library_race.h"
#include "bench/openblas_best.h"
#include "bench/useful_work.h"
#include "bench/workloads.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/error.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library

// ResNet, VGG, MobileNetV2, BERT/CLIP/ViT layers at batch 1 (or the batches named).
const std::vector<bench::Workload> kShapes = {
    // matmul / dense: classifier heads (GEMV), small batch, transformer projections, tiny.
    {"gemv resnet18 head 1x1000x512", "matmul", {"M=1", "N=1000", "K=512"}},
    {"gemv mobilenetv2 head 1x1000x1280", "matmul", {"M=1", "N=1000", "K=1280"}},
    {"gemv bert pooler 1x768x768", "matmul", {"M=1", "N=768", "K=768"}},
    {"dense batch8 head 8x1000x512 +bias",
     "dense_bias_relu",
     {"M=8", "N=1000", "K=512", "epilogue=bias"}},
    {"matmul batch16 16x768x768", "matmul", {"M=16", "N=768", "K=768"}},
    {"matmul clip qkv 77x768x768", "matmul", {"M=77", "N=768", "K=768"}},
    {"matmul clip mlp 77x3072x768", "matmul", {"M=77", "N=3072", "K=768"}},
    {"matmul vit proj 197x768x768", "matmul", {"M=197", "N=768", "K=768"}},
    {"matmul tiny 50x50x50", "matmul", {"M=50", "N=50", "K=50"}},
    // conv2d: first layers (3 input channels), MobileNetV2 pointwise, a ResNet stride-2 layer.
    {"conv resnet first C3 224 K64 7x7 s2",
     "conv2d_nchwc",
     {"C=3", "H=224", "W=224", "K=64", "R=7", "S=7", "stride=2", "pad=3"}},
    {"conv mobilenet first C3 224 K32 3x3 s2",
     "conv2d_nchwc",
     {"C=3", "H=224", "W=224", "K=32", "R=3", "S=3", "stride=2", "pad=1"}},
    {"conv mbv2 pw C32 112 K16 1x1",
     "conv2d_nchwc",
     {"C=32", "H=112", "W=112", "K=16", "R=1", "S=1"}},
    {"conv mbv2 pw C24 56 K144 1x1",
     "conv2d_nchwc",
     {"C=24", "H=56", "W=56", "K=144", "R=1", "S=1"}},
    {"conv mbv2 pw C144 28 K32 1x1",
     "conv2d_nchwc",
     {"C=144", "H=28", "W=28", "K=32", "R=1", "S=1"}},
    {"conv mbv2 pw C96 14 K576 1x1",
     "conv2d_nchwc",
     {"C=96", "H=14", "W=14", "K=576", "R=1", "S=1"}},
    {"conv resnet C64 56 K128 3x3 s2",
     "conv2d_nchwc",
     {"C=64", "H=56", "W=56", "K=128", "R=3", "S=3", "stride=2", "pad=1"}},
    // depthwise 3x3 (MobileNetV2), stride 1 and 2, channel-blocked like conv2d_nchwc's output
    // (NCHW16c).
    {"dw C32 112 3x3 s1", "depthwise_conv2d_nchwc", {"C=32", "H=112", "W=112", "pad=1"}},
    {"dw C96 112 3x3 s2",
     "depthwise_conv2d_nchwc",
     {"C=96", "H=112", "W=112", "stride=2", "pad=1"}},
    {"dw C144 56 3x3 s2", "depthwise_conv2d_nchwc", {"C=144", "H=56", "W=56", "stride=2", "pad=1"}},
    {"dw C576 14 3x3 s1", "depthwise_conv2d_nchwc", {"C=576", "H=14", "W=14", "pad=1"}},
};

struct Options {
  bench::RaceOptions race;
  std::string only;
};

Options parse(int argc, char** argv) {
  Options o;
  o.race.trials = 150;
  CLI::App app{"layer shapes of real networks against OpenBLAS and oneDNN", "shape_zoo"};
  app.add_option("--trials", o.race.trials, "Tuning trials per shape")->check(CLI::Range(1, 300));
  app.add_option("--rounds", o.race.rounds, "Timed rounds")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.race.seed, "Tuner seed");
  app.add_option("--only", o.only, "Only the shapes whose name contains this");
  bench::parse_or_exit(app, argc, argv);
  return o;
}

// Bytes the task must move: each input read once and each output written once.
struct Traffic {
  double read = 0, write = 0;
};

Traffic compulsory_traffic(const schedule_space::Task& task) {
  Traffic t;
  for (const te::Tensor& a : task.reference().args) {
    const double bytes = static_cast<double>(a.num_elements()) * a.dtype().bits / 8;
    (a.is_placeholder() ? t.read : t.write) += bytes;
  }
  return t;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const codegen::Target host = codegen::Target::host();
    bench::use_openblas_at_its_best(host.vector_bits(), argv);
    // One core in the traits: the parallel knob is off and the tuned kernels run one thread.
    const auto traits =
        schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
    std::printf(
        "shape zoo: target %s, 1 thread, xgb %zu trials per shape, %d rounds, seed %llu, load "
        "average %s\n",
        host.str().c_str(), o.race.trials, o.race.rounds,
        static_cast<unsigned long long>(o.race.seed), bench::load_average().c_str());
    const double peak = bench::fma_peak_gflops(0.5);
    std::printf("one core: FMA peak %.1f GFLOP/s\n", peak);
    std::printf("%-40s %-22s %-56s %6s %9s %9s %-36s %-8s %6s %8s %9s %6s %9s %6s %6s %6s\n",
                "shape", "template", "arguments", "trials", "ktune", "library", "library", "layout",
                "ratio", "rel_err", "bound", "of", "hand", "of", "useful", "useful");
    std::printf("%-40s %-22s %-56s %6s %9s %9s %-36s %-8s %6s %8s %9s %6s %9s %6s %6s %6s\n", "",
                "", "", "", "GFLOP/s", "GFLOP/s", "", "", "", "", "GFLOP/s", "bound", "GFLOP/s",
                "hand", "flop", "ofpeak");
    std::fflush(stdout);
    std::vector<double> ratios;
    std::string worst_name;
    double worst = 1e30;
    for (const bench::Workload& s : kShapes) {
      if (s.name.find(o.only) == std::string::npos) continue;
      const auto task = schedule_space::Task::create(
          s.template_name, schedule_space::parse_workload_args(s.template_name, s.args), traits);
      const bench::RaceResult r = bench::race(task, o.race);
      const Traffic traffic = compulsory_traffic(task);
      const double stream = bench::stream_seconds(static_cast<size_t>(traffic.read),
                                                  static_cast<size_t>(traffic.write), 0.3);
      const double bound = std::min(peak, task.flop() / stream * 1e-9);
      std::string hand = "        -      -";
      if (s.template_name == "matmul" && task.args().get_int("M") == 1 &&
          task.args().get("layout") == "nn") {
        const bench::HandGemv h =
            bench::gemv_hand(task.args().get_int("N"), task.args().get_int("K"), 1.0);
        char cells[32];
        std::snprintf(cells, sizeof cells, "%9.1f %6.2f", h.gflops, r.ktune_gflops / h.gflops);
        hand = cells;
        std::fprintf(stderr, "  hand-written: %s\n", h.variant.c_str());
      }
      const double useful = bench::useful_share(task);
      std::printf(
          "%-40s %-22s %-56s %6zu %9.1f %9.1f %-36s %-8s %6.3f %8.1e %9.1f %6.2f %s %6.3f %6.3f\n",
          s.name.c_str(), s.template_name.c_str(), joined(s.args).c_str(), r.measured,
          r.ktune_gflops, r.library_gflops, r.library.c_str(), r.layout.c_str(), r.ratio(),
          r.max_error, bound, r.ktune_gflops / bound, hand.c_str(), useful,
          r.ktune_gflops * useful / peak);
      std::fprintf(stderr, "  config %s\n", r.config.to_json_string().c_str());
      std::fflush(stdout);
      ratios.push_back(r.ratio());
      if (r.ratio() < worst) worst = r.ratio(), worst_name = s.name;
    }
    if (ratios.empty())
      throw Error(ErrorKind::kInvalidArgument, "--only '" + o.only + "' matches no shape");
    std::printf("load average at the end: %s\n", bench::load_average().c_str());
    std::printf("shape_zoo_worst %.3f %s\n", worst, worst_name.c_str());
    std::printf("shape_zoo_geomean %.3f\n", bench::geomean(ratios));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shape_zoo: %s\n", e.what());
    return 1;
  }
}

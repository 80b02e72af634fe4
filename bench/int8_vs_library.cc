// Benchmark: ktune's int8 GEMM (matmul_u8s8s32, VNNI where the CPU has it) against oneDNN's
// u8 x s8 -> s32 matmul and against ktune's own float32 matmul, on BERT-base's products
// (M = 128 tokens: the QKV/output projections 768x768, the feed-forward 768x3072 and 3072x768)
// at --threads threads. Each int8 kernel is xgb-tuned with --trials trials, its five best configs
// are re-timed in this process and the fastest is checked bit-exactly against oneDNN's result on
// the same A and B (ktune reads B packed in 16 x 4 blocks, oneDNN in the format it picks; both
// reorders happen outside the timing), then the two are timed interleaved (median of --rounds
// rounds). The float32 column is bench::race of `matmul` with the same budget (ktune's kernel
// against OpenBLAS's sgemm). GOP/s count 2*M*N*K on every side.
// The conv rows do the same for conv2d_nchwc_u8s8s32 on ResNet's stride-1 layers (the 3x3 ones of
// ResNet-18 and ResNet-50's 1x1 C256 -> 64 at 56x56), against oneDNN's u8 x s8 -> s32 convolution
// (every format its choice, reorders outside the timing) and ktune's float32 conv2d_nchwc raced
// against oneDNN's float32 convolution; GOP/s count 2*K*OH*OW*C*R*S. The conv ratios join the
// geomeans, and `int8_conv_over_onednn_geomean` / `int8_conv_over_fp32_geomean` give them alone.
// Then `int8_over_fp32_geomean <x>` and `int8_over_onednn_geomean <x>`. Each row also gives
// both int8 sides as a share of the VNNI peak, 4x one core's fp32 FMA rate (bench/fma_peak.h)
// times the threads: vpdpbusd does 64 multiply-adds where an fp32 FMA does 16.
//
// The depthwise rows (their own group, not in those geomeans) do the same for
// depthwise_conv2d_nchwc_u8s8s32 on MobileNetV2's 3x3 depthwise layers (stride 1 and 2, pad 1)
// against oneDNN's u8 x s8 -> s32 grouped convolution and ktune's float32 depthwise_conv2d_nchwc
// raced against oneDNN's float32 one; GOP/s count 2*C*OH*OW*R*S. Last lines
// `int8_dw_over_fp32_geomean <x>` and `int8_dw_over_onednn_geomean <x>`.
//
// bfloat16 rows follow: matmul_bf16 (vdpbf16ps where the CPU has it) tuned the same way, checked
// against oneDNN's bf16 x bf16 -> f32 matmul on the same A and B (within the bound of two float32
// summation orders) and timed interleaved with it, and ktune's float32 matmul raced on the shape.
// Last lines: `bf16_over_fp32 <x>` and `bf16_over_onednn <x>` (geomeans).
//
// Usage: int8_vs_library [--trials N] [--rounds R] [--threads N]
//        [--only gemm|conv|depthwise|bf16]
// (the bf16 rows race the float32 matmul themselves).
//
// The shared pieces are in bench/int8_race.h, oneDNN's operators in bench/int8_onednn.h and the
// bfloat16 rows in bench/int8_bf16.cc.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "bench/cli.h"
#include "bench/fma_peak.h"
#include "bench/int8_onednn.h"
#include "bench/int8_race.h"
#include "bench/library_race.h"
#include "codegen/target.h"
#include "deploy/int8_packing.h"
#include "schedule_space/task.h"
#include "support/error.h"

namespace {

using namespace ktune;  // NOLINT: a benchmark program, not a library
using bench::Bytes;
using bench::int8::check_and_time;
using bench::int8::gemm_args;
using bench::int8::Options;
using bench::int8::race_fp32;
using bench::int8::report_bf16;
using bench::int8::Row;
using bench::int8::Shape;
using bench::int8::task_of;
using bench::int8::tune_int8;

// ktune's float32 kernel of the shape (`name` with `args`) raced against its library with the
// same budget, into row.
void race_fp32_into(const std::string& name, const std::vector<std::string>& args,
                    const schedule_space::TargetTraits& traits, const Options& o, Row& row) {
  const bench::RaceResult fp32 = race_fp32(task_of(name, args, traits), o);
  row.fp32_gops = fp32.ktune_gflops;
  row.fp32_library_gops = fp32.library_gflops;
}

Row bench_shape(const Shape& s, const schedule_space::TargetTraits& traits, const Options& o) {
  Row row;
  row.name = s.name;
  const double ops =
      2.0 * static_cast<double>(s.M) * static_cast<double>(s.N) * static_cast<double>(s.K);
  const std::vector<std::string> args = gemm_args(s);
  const auto int8_task = task_of("matmul_u8s8s32", args, traits);

  // The same A and B for both sides: A over the whole u8 range, B over the whole s8 range.
  std::mt19937_64 rng(7);
  Bytes a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.K * s.N));
  for (size_t i = 0; i < a.n; ++i) a.p[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < b.n; ++i) b.p[i] = static_cast<uint8_t>(rng());
  // B in the layout a model build hands the template (deploy's packing, one definition).
  std::vector<int64_t> b_values(b.n);
  for (size_t i = 0; i < b.n; ++i) b_values[i] = static_cast<int8_t>(b.p[i]);
  const std::vector<int8_t> b_packed = deploy::pack_gemm_b_u8s8(b_values, s.K, s.N, false);
  Bytes packed(b_packed.size());
  std::memcpy(packed.p, b_packed.data(), b_packed.size());
  Bytes c_ktune(static_cast<size_t>(s.M * s.N * 4)), c_dnnl(static_cast<size_t>(s.M * s.N * 4));

  const std::vector<void*> kargs = {a.p, packed.p, c_ktune.p};
  const codegen::Kernel kernel = tune_int8(int8_task, kargs, o, row);

  // oneDNN: u8 x s8 -> s32 matmul, weights reordered to the format it asks for.
  using dt = dnnl::memory::data_type;
  bench::OnednnMatmul onednn(s.M, s.N, s.K, dt::u8, dt::s8, dt::s32, a.p, b.p, c_dnnl.p);
  row.onednn_impl = onednn.impl();
  check_and_time(
      kernel, kargs, c_ktune, [&] { onednn.run(); },
      [&] { return std::memcmp(c_ktune.p, c_dnnl.p, c_ktune.n) == 0; }, ops, o, row);
  race_fp32_into("matmul", args, traits, o, row);
  return row;
}

// Whether ktune's [K/16][P][16] int32 output equals oneDNN's [K][P] (P pixels).
bool same_blocked(const uint8_t* ktune, const uint8_t* onednn, int64_t K, int64_t P) {
  const auto* got = reinterpret_cast<const int32_t*>(ktune);
  const auto* want = reinterpret_cast<const int32_t*>(onednn);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t p = 0; p < P; ++p)
      if (got[((k / 16) * P + p) * 16 + k % 16] != want[k * P + p]) return false;
  return true;
}

// A convolution's data, weights and output buffers.
struct ConvBuffers {
  Bytes &x, &w, &out;
};

// The int8 conv `task` tuned on ktune's blocked buffers, then checked against and timed with
// oneDNN's convolution of the NCHW ones (`dims`: data, weights, output) into row.
void race_conv(const schedule_space::Task& task, const ConvBuffers& ktune, const ConvBuffers& nchw,
               const std::vector<dnnl::memory::dims>& dims, int64_t stride, int64_t pad, double ops,
               const Options& o, Row& row) {
  const std::vector<void*> kargs = {ktune.x.p, ktune.w.p, ktune.out.p};
  const codegen::Kernel kernel = tune_int8(task, kargs, o, row);
  bench::OnednnConv onednn(dims[0], dims[1], dims[2], stride, pad, nchw.x.p, nchw.w.p, nchw.out.p);
  row.onednn_impl = onednn.impl();
  auto same = [&] {
    onednn.output_to_user();
    return same_blocked(ktune.out.p, nchw.out.p, dims[2][1], dims[2][2] * dims[2][3]);
  };
  check_and_time(
      kernel, kargs, ktune.out, [&] { onednn.run(); }, same, ops, o, row);
}

// The arguments C, H, W, K (when k > 0), R, S, stride and pad of a square layer.
std::vector<std::string> conv_args(int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride,
                                   int64_t pad) {
  std::vector<std::string> a = {"C=" + std::to_string(C), "H=" + std::to_string(H),
                                "W=" + std::to_string(H)};
  if (K > 0) a.push_back("K=" + std::to_string(K));
  for (const std::string& kv : {"R=" + std::to_string(R), "S=" + std::to_string(R),
                                "stride=" + std::to_string(stride), "pad=" + std::to_string(pad)})
    a.push_back(kv);
  return a;
}

// A ResNet conv layer, batch 1, stride 1, square, padded to keep its size (pad R/2).
struct ConvShape {
  const char* name;
  int64_t C, H, K, R;
};

Row bench_conv(const ConvShape& s, const schedule_space::TargetTraits& traits, const Options& o) {
  Row row;
  row.name = s.name;
  const int64_t H = s.H, C = s.C, K = s.K, R = s.R, pad = s.R / 2;
  const double ops = 2.0 * static_cast<double>(K * H * H) * static_cast<double>(C * R * R);
  const std::vector<std::string> args = conv_args(C, H, K, R, 1, pad);
  const auto int8_task = task_of("conv2d_nchwc_u8s8s32", args, traits);
  const int64_t icb = int8_task.args().get_int("ic_block"), cb = C / icb, kb = (K + 15) / 16;

  // The same data (u8, NCHW) and weights (s8, OIHW) for both sides, and ktune's blocked copies:
  // I[C/icb][H][W][icb], W[K/16][C/icb][R][S][icb/4][16][4].
  std::mt19937_64 rng(7);
  Bytes x(static_cast<size_t>(C * H * H)), w(static_cast<size_t>(K * C * R * R));
  for (size_t i = 0; i < x.n; ++i) x.p[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < w.n; ++i) w.p[i] = static_cast<uint8_t>(rng());
  Bytes xb(x.n), wb(static_cast<size_t>(kb * 16 * C * R * R));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < H * H; ++p)
      xb.p[((c / icb) * H * H + p) * icb + c % icb] = x.p[c * H * H + p];
  std::memset(wb.p, 0, wb.n);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < R * R; ++t)
        wb.p[((((k / 16) * cb + c / icb) * R * R + t) * (icb / 4) + c % icb / 4) * 64 +
             (k % 16) * 4 + c % 4] = w.p[(k * C + c) * R * R + t];
  Bytes o_ktune(static_cast<size_t>(kb * 16 * H * H * 4)),
      o_dnnl(static_cast<size_t>(K * H * H * 4));

  race_conv(int8_task, {xb, wb, o_ktune}, {x, w, o_dnnl},
            {{1, C, H, H}, {K, C, R, R}, {1, K, H, H}}, 1, pad, ops, o, row);
  race_fp32_into("conv2d_nchwc", args, traits, o, row);
  return row;
}

// A MobileNetV2 depthwise layer: C channels, H x H input, 3 x 3 window, pad 1, stride 1 or 2.
struct DepthwiseShape {
  const char* name;
  int64_t C, H, stride;
};

Row bench_depthwise(const DepthwiseShape& s, const schedule_space::TargetTraits& traits,
                    const Options& o) {
  Row row;
  row.name = s.name;
  const int64_t C = s.C, H = s.H, R = 3, pad = 1, OH = (H + 2 * pad - R) / s.stride + 1;
  const int64_t cb = (C + 15) / 16;
  const double ops = 2.0 * static_cast<double>(C * OH * OH) * static_cast<double>(R * R);
  const std::vector<std::string> args = conv_args(C, H, 0, R, s.stride, pad);
  const auto int8_task = task_of("depthwise_conv2d_nchwc_u8s8s32", args, traits);

  // The same data (u8, NCHW) and weights (s8, C x R x S) for both sides, and ktune's blocked
  // copies I[C/16][H][W][16], W[C/16][R][S][16] (channels past C zero).
  std::mt19937_64 rng(7);
  Bytes x(static_cast<size_t>(C * H * H)), w(static_cast<size_t>(C * R * R));
  for (size_t i = 0; i < x.n; ++i) x.p[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < w.n; ++i) w.p[i] = static_cast<uint8_t>(rng());
  Bytes xb(static_cast<size_t>(cb * 16 * H * H)), wb(static_cast<size_t>(cb * 16 * R * R));
  std::memset(xb.p, 0, xb.n);
  std::memset(wb.p, 0, wb.n);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t p = 0; p < H * H; ++p)
      xb.p[((c / 16) * H * H + p) * 16 + c % 16] = x.p[c * H * H + p];
    for (int64_t t = 0; t < R * R; ++t)
      wb.p[((c / 16) * R * R + t) * 16 + c % 16] = w.p[c * R * R + t];
  }
  Bytes o_ktune(static_cast<size_t>(cb * 16 * OH * OH * 4)),
      o_dnnl(static_cast<size_t>(C * OH * OH * 4));

  race_conv(int8_task, {xb, wb, o_ktune}, {x, w, o_dnnl},
            {{1, C, H, H}, {C, 1, 1, R, R}, {1, C, OH, OH}}, s.stride, pad, ops, o, row);
  race_fp32_into("depthwise_conv2d_nchwc", args, traits, o, row);
  return row;
}

// Prints a table of rows (`fp32_library` heads the float32 library's column; `peak` is the VNNI
// peak in GOP/s) and appends each row's int8 / oneDNN and int8 / fp32 ratios to `vs_dnnl` and
// `vs_fp32`.
void print_rows(const char* fp32_library, const std::vector<Row>& rows, double peak,
                std::vector<double>& vs_dnnl, std::vector<double>& vs_fp32) {
  if (rows.empty()) return;
  std::printf("%-24s %7s %9s %10s %9s %10s %8s %8s %6s %6s  %s\n", "shape", "trials", "int8_GOP/s",
              "oneDNN_s8", "fp32_GF/s", fp32_library, "vs_dnnl", "vs_fp32", "%peak", "dnnl%",
              "oneDNN impl");
  for (const Row& r : rows) {
    vs_dnnl.push_back(r.int8_gops / r.onednn_gops);
    vs_fp32.push_back(r.int8_gops / r.fp32_gops);
    std::printf("%-24s %7zu %9.1f %10.1f %9.1f %10.1f %8.3f %8.3f %6.1f %6.1f  %s\n",
                r.name.c_str(), r.measured, r.int8_gops, r.onednn_gops, r.fp32_gops,
                r.fp32_library_gops, vs_dnnl.back(), vs_fp32.back(), 100 * r.int8_gops / peak,
                100 * r.onednn_gops / peak, r.onednn_impl.c_str());
  }
}

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"int8 and bf16 kernels against oneDNN and ktune's float32", "int8_vs_library"};
  app.add_option("--trials", o.trials, "Tuning trials per kernel")->check(CLI::Range(1, 1000));
  app.add_option("--rounds", o.rounds, "Interleaved timing rounds")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "Threads")->check(CLI::Range(1, 256));
  app.add_option("--only", o.only, "Those rows alone")
      ->check(CLI::IsMember({"gemm", "conv", "depthwise", "bf16"}));
  bench::parse_or_exit(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const codegen::Target host = codegen::Target::host();
    const auto traits = schedule_space::make_target_traits(host.str(), host.triple(),
                                                           host.vector_bits(), o.threads);
    bench::set_all_threads(o.threads);
    std::printf(
        "target %s, oneDNN %d.%d, xgb tuner, %d threads, %zu trials, VNNI %s, BF16 %s, load %s\n",
        host.str().c_str(), dnnl::version()->major, dnnl::version()->minor, o.threads, o.trials,
        traits.int8_dot ? "yes" : "no", traits.bf16_dot ? "yes" : "no",
        bench::load_average().c_str());
    std::fflush(stdout);
    const std::vector<Shape> shapes = {{"bert qkv 128x768x768", 128, 768, 768},
                                       {"bert ffn1 128x3072x768", 128, 3072, 768},
                                       {"bert ffn2 128x768x3072", 128, 768, 3072}};
    std::vector<Row> gemm_rows, conv_rows;
    if (o.only.empty() || o.only == "gemm")
      for (const Shape& s : shapes) gemm_rows.push_back(bench_shape(s, traits, o));
    const std::vector<ConvShape> convs = {{"resnet18 3x3 C64 56x56", 64, 56, 64, 3},
                                          {"resnet18 3x3 C128 28x28", 128, 28, 128, 3},
                                          {"resnet18 3x3 C256 14x14", 256, 14, 256, 3},
                                          {"resnet18 3x3 C512 7x7", 512, 7, 512, 3},
                                          {"resnet50 1x1 C256 56x56", 256, 56, 64, 1}};
    if (o.only.empty() || o.only == "conv")
      for (const ConvShape& s : convs) conv_rows.push_back(bench_conv(s, traits, o));
    const std::vector<DepthwiseShape> depthwise = {{"mbv2 dw C32 112x112 s1", 32, 112, 1},
                                                   {"mbv2 dw C96 112x112 s2", 96, 112, 2},
                                                   {"mbv2 dw C144 56x56 s1", 144, 56, 1},
                                                   {"mbv2 dw C384 14x14 s1", 384, 14, 1},
                                                   {"mbv2 dw C960 7x7 s1", 960, 7, 1}};
    std::vector<Row> dw_rows;
    if (o.only.empty() || o.only == "depthwise")
      for (const DepthwiseShape& s : depthwise) dw_rows.push_back(bench_depthwise(s, traits, o));
    // vpdpbusd: 64 multiply-adds where an fp32 FMA does 16, at the same rate.
    const bool int8_rows = !gemm_rows.empty() || !conv_rows.empty() || !dw_rows.empty();
    const double peak = int8_rows ? 4 * bench::fma_peak_gflops(0.5) * o.threads : 0;
    if (int8_rows)
      std::printf("VNNI peak %.1f GOP/s (4x the fp32 FMA rate x %d threads)\n", peak, o.threads);
    std::vector<double> vs_dnnl, vs_fp32, conv_dnnl, conv_fp32, dw_dnnl, dw_fp32;
    print_rows("OpenBLAS", gemm_rows, peak, vs_dnnl, vs_fp32);
    print_rows("oneDNN_f32", conv_rows, peak, conv_dnnl, conv_fp32);
    if (!conv_rows.empty()) {
      std::printf("int8_conv_over_fp32_geomean %.3f\n", bench::geomean(conv_fp32));
      std::printf("int8_conv_over_onednn_geomean %.3f\n", bench::geomean(conv_dnnl));
    }
    vs_dnnl.insert(vs_dnnl.end(), conv_dnnl.begin(), conv_dnnl.end());
    vs_fp32.insert(vs_fp32.end(), conv_fp32.begin(), conv_fp32.end());
    if (!gemm_rows.empty() || !conv_rows.empty()) {
      std::printf("int8_over_fp32_geomean %.3f\n", bench::geomean(vs_fp32));
      std::printf("int8_over_onednn_geomean %.3f\n", bench::geomean(vs_dnnl));
    }
    print_rows("oneDNN_f32", dw_rows, peak, dw_dnnl, dw_fp32);
    if (!dw_rows.empty()) {
      std::printf("int8_dw_over_fp32_geomean %.3f\n", bench::geomean(dw_fp32));
      std::printf("int8_dw_over_onednn_geomean %.3f\n", bench::geomean(dw_dnnl));
    }
    std::fflush(stdout);
    if (o.only.empty() || o.only == "bf16") report_bf16(shapes, {}, traits, o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "int8_vs_library: %s\n", e.what());
    return 1;
  }
}

// Tests the input sums of int8 weights shifted into int8 (deploy/input_sums.h): the window and row
// sum kernels against plain loops from garbage-filled outputs, and the whole correction of uint8
// weights whose zero point does not fit int8 — weights less 128 packed, the data's zero point in
// the bias, conv2d_nchwc_u8s8s32 / matmul_u8s8s32 with input_sums=1 fed by the sum kernels — whose
// int32 accumulators equal sum (x - z_x)(w - z_w) bit-exactly, for the fallback and sampled
// configs on the host and on x86-64-v3 (widening code), and te's interpreter of the task's
// reference likewise.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "deploy/input_sums.h"
#include "deploy/int8_packing.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "support/error.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"

namespace ktune::deploy {
namespace {

constexpr unsigned char kGarbage = 0xA5;

schedule_space::TargetTraits traits_of(const codegen::Target& t) {
  return schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores());
}

// Runs `f` built for `target` on `in` and an output of `shape` int32 filled with garbage first.
std::vector<int32_t> run(const te::LoweredFunc& f, const codegen::Target& target,
                         std::vector<te::HostBuffer*> in, const std::vector<int64_t>& shape) {
  codegen::Kernel k = codegen::Kernel::load(codegen::build(f, target));
  te::HostBuffer out(shape, te::Int(32));
  std::memset(out.data(), kGarbage, static_cast<size_t>(out.bytes()));
  std::vector<void*> ptrs;
  for (te::HostBuffer* b : in) ptrs.push_back(b->data());
  ptrs.push_back(out.data());
  EXPECT_EQ(k.run(ptrs), 0);
  const auto* p = static_cast<const int32_t*>(out.data());
  return {p, p + out.num_elements()};
}

// uint8 NCHWc data [n][ceil(c/b)][h][w][b] of random values, the lanes past c zero (as the model
// build's layout conversions write them).
te::HostBuffer blocked_data(const std::vector<int64_t>& nchw, int64_t b, uint64_t seed) {
  const int64_t blocks = (nchw[1] + b - 1) / b;
  te::HostBuffer x({nchw[0], blocks, nchw[2], nchw[3], b}, te::UInt(8));
  x.fill_random(seed, 0, 255);
  for (int64_t i = 0; i < x.num_elements(); ++i)
    if ((i / (nchw[3] * nchw[2] * b) % blocks) * b + i % b >= nchw[1]) x.set(i, 0);
  return x;
}

// Element (n, c, y, x) of blocked data.
int64_t at(const te::HostBuffer& d, const std::vector<int64_t>& nchw, int64_t b, int64_t n,
           int64_t c, int64_t y, int64_t x) {
  const int64_t blocks = (nchw[1] + b - 1) / b;
  return static_cast<int64_t>(
      d.get((((n * blocks + c / b) * nchw[2] + y) * nchw[3] + x) * b + c % b));
}

struct ConvCase {
  int64_t n, c, h, w, k, r, stride, pad, zx, block;
};

const ConvCase kConvCases[] = {
    {1, 6, 8, 8, 16, 3, 1, 1, 77, 8},     // channels padded to 8 (lanes 6, 7 not summed)
    {2, 16, 7, 9, 20, 3, 2, 1, 128, 16},  // K past a block multiple, stride 2
    {1, 8, 9, 7, 16, 3, 1, 2, 0, 8},      // zero data zero point, wide padding
    {1, 12, 5, 5, 32, 1, 1, 0, 250, 4},   // 1x1, 3 blocks of 4
    {1, 4, 7, 6, 16, 5, 2, 2, 9, 4},
};

// sum over the c channels and the taps inside the input of (x - zx) at output (n, y, x).
int64_t window_sum(const ConvCase& c, const te::HostBuffer& d, int64_t n, int64_t y, int64_t x) {
  const std::vector<int64_t> nchw = {c.n, c.c, c.h, c.w};
  int64_t s = 0;
  for (int64_t ch = 0; ch < c.c; ++ch)
    for (int64_t r = 0; r < c.r; ++r)
      for (int64_t q = 0; q < c.r; ++q) {
        const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + q - c.pad;
        if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w)
          s += at(d, nchw, c.block, n, ch, iy, ix) - c.zx;
      }
  return s;
}

InputWindowSums window_of(const ConvCase& c) {
  return {{c.n, c.c, c.h, c.w}, c.block, c.r, c.r, c.stride, c.pad, static_cast<int32_t>(c.zx)};
}

TEST(InputSums, WindowSumsMatchPlainLoops) {
  const codegen::Target host = codegen::Target::host();
  uint64_t seed = 1;
  for (const ConvCase& c : kConvCases) {
    te::HostBuffer d = blocked_data({c.n, c.c, c.h, c.w}, c.block, ++seed);
    const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1,
                  ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
    const te::LoweredFunc f = input_window_sums("window_sums", window_of(c));
    const std::vector<int32_t> got = run(f, host, {&d}, {c.n, oh, ow});
    // te's interpreter of the same function, from a garbage-filled output too.
    te::HostBuffer interp({c.n, oh, ow}, te::Int(32));
    std::memset(interp.data(), kGarbage, static_cast<size_t>(interp.bytes()));
    std::vector<te::HostBuffer*> args = {&d, &interp};
    te::interpret(f, args);
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t i = (n * oh + y) * ow + x;
          ASSERT_EQ(got[static_cast<size_t>(i)], window_sum(c, d, n, y, x))
              << "case C=" << c.c << " pad=" << c.pad << " at " << n << "," << y << "," << x;
          ASSERT_EQ(static_cast<int64_t>(interp.get(i)), got[static_cast<size_t>(i)]);
        }
  }
}

TEST(InputSums, RowSumsMatchPlainLoops) {
  const int64_t m = 5, k = 37;
  const int32_t zx = 131;
  te::HostBuffer a({m, k}, te::UInt(8));
  a.fill_random(7, 0, 255);
  const std::vector<int32_t> got =
      run(input_row_sums("row_sums", m, k, zx), codegen::Target::host(), {&a}, {m});
  for (int64_t i = 0; i < m; ++i) {
    int64_t s = 0;
    for (int64_t j = 0; j < k; ++j) s += static_cast<int64_t>(a.get(i * k + j)) - zx;
    ASSERT_EQ(got[static_cast<size_t>(i)], s) << i;
  }
}

TEST(InputSums, WindowThatDoesNotFitIsAnError) {
  InputWindowSums p{{1, 4, 2, 2}, 4, 5, 5, 1, 0, 0};
  EXPECT_THROW(input_window_sums("bad", p), Error);
}

// uint8 weights over [0, 255] with zero points 122 + k % 5 (per output channel): every w - z_w
// past int8 for some weight.
std::vector<int64_t> wide_weights(int64_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> u(0, 255);
  std::vector<int64_t> w(static_cast<size_t>(count));
  for (int64_t& v : w) v = u(rng);
  w[0] = 0;
  w[1] = 255;
  return w;
}

// The configs a task is checked with: its fallback and three sampled ones.
std::vector<schedule_space::Config> configs_of(const schedule_space::Task& task) {
  std::mt19937_64 rng(5);
  std::vector<schedule_space::Config> configs = {task.fallback_config()};
  for (uint64_t i : task.space().sample(3, rng)) configs.push_back(task.space().get(i));
  return configs;
}

// The corrected conv for `target`: sum_coef * input_sum + the kernel's accumulator + the folded
// bias against sum (x - zx)(w - zw) over the taps inside the input.
void check_corrected_conv(const ConvCase& c, const codegen::Target& target) {
  std::mt19937_64 rng(static_cast<uint64_t>(c.c * 131 + c.k));
  const int64_t cp = (c.c + 3) / 4 * 4;  // the template's channels: groups of 4
  const std::map<std::string, std::string> args = {{"N", std::to_string(c.n)},
                                                   {"C", std::to_string(cp)},
                                                   {"H", std::to_string(c.h)},
                                                   {"W", std::to_string(c.w)},
                                                   {"K", std::to_string(c.k)},
                                                   {"R", std::to_string(c.r)},
                                                   {"S", std::to_string(c.r)},
                                                   {"stride", std::to_string(c.stride)},
                                                   {"pad", std::to_string(c.pad)},
                                                   {"ic_block", std::to_string(c.block)},
                                                   {"data_zero_point", std::to_string(c.zx)},
                                                   {"input_sums", "1"}};
  const schedule_space::Task task =
      schedule_space::Task::create("conv2d_nchwc_u8s8s32", args, traits_of(target));
  ASSERT_NE(task.workload_key().find("input_sums=1"), std::string::npos);
  const std::vector<int64_t> w = wide_weights(c.k * c.c * c.r * c.r, rng);
  std::vector<int64_t> zw;
  for (int64_t k = 0; k < c.k; ++k) zw.push_back(122 + k % 5);
  const int64_t shift = 128;
  const auto folded = fold_zero_points(w, c.k, true, {shift}, c.zx, {});
  ASSERT_TRUE(folded.has_value());
  const int64_t kb = (c.k + 15) / 16;
  te::HostBuffer data = blocked_data({c.n, c.c, c.h, c.w}, c.block, 11);
  const std::vector<int8_t> packed = pack_conv_u8s8(folded->w, c.k, c.c, c.r, c.r, c.block, cp);
  te::HostBuffer weights({kb, cp / c.block, c.r, c.r, c.block / 4, 16, 4}, te::Int(8));
  std::memcpy(weights.data(), packed.data(), packed.size());
  const int64_t oh = (c.h + 2 * c.pad - c.r) / c.stride + 1,
                ow = (c.w + 2 * c.pad - c.r) / c.stride + 1;
  const std::vector<int32_t> window =
      run(input_window_sums("window_sums", window_of(c)), target, {&data}, {c.n, oh, ow});
  te::HostBuffer sums({c.n, oh, ow}, te::Int(32));
  std::memcpy(sums.data(), window.data(), window.size() * sizeof(int32_t));
  te::HostBuffer coef({kb, 16}, te::Int(32));
  for (int64_t k = 0; k < kb * 16; ++k)
    coef.set(k, k < c.k ? shift - zw[static_cast<size_t>(k)] : 0);

  // The integer reference of the quantized conv.
  const std::vector<int64_t> nchw = {c.n, c.c, c.h, c.w};
  std::vector<int64_t> want;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t b = 0; b < kb; ++b)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t l = 0; l < 16; ++l) {
            const int64_t k = b * 16 + l;
            int64_t acc = 0;
            for (int64_t ch = 0; k < c.k && ch < c.c; ++ch)
              for (int64_t r = 0; r < c.r; ++r)
                for (int64_t q = 0; q < c.r; ++q) {
                  const int64_t iy = y * c.stride + r - c.pad, ix = x * c.stride + q - c.pad;
                  if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                  acc += (at(data, nchw, c.block, n, ch, iy, ix) - c.zx) *
                         (w[static_cast<size_t>(((k * c.c + ch) * c.r + r) * c.r + q)] -
                          zw[static_cast<size_t>(k)]);
                }
            want.push_back(acc);
          }
  const auto check = [&](const std::vector<int32_t>& got, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const int64_t k =
          static_cast<int64_t>(i) / 16 / ow / oh % kb * 16 + static_cast<int64_t>(i) % 16;
      const int64_t bias = k < c.k ? folded->bias[static_cast<size_t>(k)] : 0;
      ASSERT_EQ(got[i] + bias, want[i]) << what << " element " << i;
    }
  };
  const std::vector<int64_t> out_shape = {c.n, kb, oh, ow, 16};
  // te's interpreter of the task's reference.
  {
    const schedule_space::Instantiated ref = task.reference();
    const te::LoweredFunc f = te::lower(ref.schedule, ref.args, "reference");
    te::HostBuffer out(out_shape, te::Int(32));
    std::memset(out.data(), kGarbage, static_cast<size_t>(out.bytes()));
    std::vector<te::HostBuffer*> a = {&data, &weights, &sums, &coef, &out};
    te::interpret(f, a);
    const auto* p = static_cast<const int32_t*>(out.data());
    check({p, p + out.num_elements()}, "interpreter " + task.workload_key());
  }
  for (const schedule_space::Config& cfg : configs_of(task)) {
    const schedule_space::Instantiated inst = task.instantiate(cfg);
    check(run(te::lower(inst.schedule, inst.args, "k"), target, {&data, &weights, &sums, &coef},
              out_shape),
          target.str() + " " + task.workload_key() + " " + cfg.to_json_string());
  }
}

TEST(InputSums, CorrectedConvAccumulatorsAreExact) {
  codegen::set_num_threads(2);
  for (const char* t : {"host", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"}) {
    const codegen::Target target = codegen::Target::parse(t);
    if (!target.is_host_compatible()) continue;
    for (const ConvCase& c : kConvCases) check_corrected_conv(c, target);
  }
}

// matmul_u8s8s32 with input_sums=1: A [M][K] uint8 of zero point 60, B [K][N] uint8 over [0, 255]
// with a zero point per column.
TEST(InputSums, CorrectedMatmulAccumulatorsAreExact) {
  const int64_t M = 7, K = 37, N = 20, zx = 60, shift = 128;
  std::mt19937_64 rng(3);
  const std::vector<int64_t> w = wide_weights(K * N, rng);
  std::vector<int64_t> zw;
  for (int64_t j = 0; j < N; ++j) zw.push_back(120 + j % 9);
  const auto folded = fold_zero_points(w, N, false, {shift}, zx, {});
  ASSERT_TRUE(folded.has_value());
  te::HostBuffer a({M, K}, te::UInt(8));
  a.fill_random(4, 0, 255);
  const std::vector<int8_t> packed = pack_gemm_b_u8s8(folded->w, K, N, false);
  te::HostBuffer b({(N + 15) / 16, (K + 3) / 4, 16, 4}, te::Int(8));
  std::memcpy(b.data(), packed.data(), packed.size());
  te::HostBuffer coef({N}, te::Int(32));
  for (int64_t j = 0; j < N; ++j) coef.set(j, shift - zw[static_cast<size_t>(j)]);
  for (const char* t : {"host", "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3"}) {
    const codegen::Target target = codegen::Target::parse(t);
    if (!target.is_host_compatible()) continue;
    const std::vector<int32_t> rows =
        run(input_row_sums("row_sums", M, K, static_cast<int32_t>(zx)), target, {&a}, {M});
    te::HostBuffer sums({M}, te::Int(32));
    std::memcpy(sums.data(), rows.data(), rows.size() * sizeof(int32_t));
    const schedule_space::Task task = schedule_space::Task::create("matmul_u8s8s32",
                                                                   {{"M", std::to_string(M)},
                                                                    {"N", std::to_string(N)},
                                                                    {"K", std::to_string(K)},
                                                                    {"input_sums", "1"}},
                                                                   traits_of(target));
    for (const schedule_space::Config& cfg : configs_of(task)) {
      const schedule_space::Instantiated inst = task.instantiate(cfg);
      const std::vector<int32_t> got =
          run(te::lower(inst.schedule, inst.args, "k"), target, {&a, &b, &sums, &coef}, {M, N});
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t want = 0;
          for (int64_t k = 0; k < K; ++k)
            want += (static_cast<int64_t>(a.get(i * K + k)) - zx) *
                    (w[static_cast<size_t>(k * N + j)] - zw[static_cast<size_t>(j)]);
          ASSERT_EQ(got[static_cast<size_t>(i * N + j)] + folded->bias[static_cast<size_t>(j)],
                    want)
              << t << " " << cfg.to_json_string() << " " << i << "," << j;
        }
    }
  }
}

}  // namespace
}  // namespace ktune::deploy

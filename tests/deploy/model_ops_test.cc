// Tests of the generated kernels of model builds (LayerNorm, Softmax, Transpose, broadcasting and
// scalar elementwise operators, erf and GELU, quantize, dequantize, the uint8 add and max pool):
// compiled for the host and compared with plain C++ loops, outputs NaN-filled (float) or
// 0xA5-filled (uint8) before each run.
#include "deploy/model_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "deploy/model_pool.h"
#include "support/error.h"
#include "tests/deploy/model_ops_util.h"

namespace ktune::deploy {
namespace {

TEST(ModelOps, LayerNormMatchesLoops) {
  for (const auto& shape :
       std::vector<std::vector<int64_t>>{{3, 5, 40}, {1, 7}, {4, 768}, {197, 192}, {64, 33}}) {
    const int64_t n = shape.back(), rows = count_of(shape) / n;
    // A mean far from zero against the spread: the two-pass variance must not cancel.
    std::vector<float> x = random(count_of(shape), 1, 2.0f, 4.0f);
    const std::vector<float> gamma = random(n, 2), beta = random(n, 3);
    const float eps = 1e-5f;
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
      mean /= n;
      for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
      var /= n;
      for (int64_t j = 0; j < n; ++j)
        want[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
    }
    const auto got = run(layer_norm("ln", shape, eps), {x, gamma, beta});
    EXPECT_LE(worst(got, want), 1e-5) << "rows " << rows << " n " << n;
  }
}

TEST(ModelOps, SoftmaxMatchesLoopsWithoutOverflow) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 3, 37}, {12, 128}, {5}}) {
    const int64_t n = shape.back(), rows = count_of(shape) / n;
    // Up to +-200: exp overflows float32 without the max subtracted.
    const std::vector<float> x = random(count_of(shape), 4, -200.0f, 200.0f);
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double top = *std::max_element(x.begin() + r * n, x.begin() + (r + 1) * n);
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += std::exp(x[r * n + j] - top);
      for (int64_t j = 0; j < n; ++j) want[r * n + j] = std::exp(x[r * n + j] - top) / total;
    }
    const auto got = run(softmax("sm", shape), {x});
    EXPECT_LE(worst(got, want), 1e-6) << "n " << n;
  }
}

TEST(ModelOps, TransposeMovesEveryElement) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const std::vector<Case> cases = {{{2, 3, 4, 5}, {0, 2, 3, 1}},
                                   {{1, 8, 2, 16}, {0, 2, 1, 3}},
                                   {{3, 4, 5, 2}, {3, 1, 0, 2}},
                                   {{2, 1, 3, 2, 2, 3}, {5, 4, 3, 2, 1, 0}},
                                   {{7, 20}, {1, 0}},
                                   {{9}, {0}},
                                   // Tiled (the input's last axis and the output's both 16 or
                                   // more): YOLO's head, a matrix, an axis between the two.
                                   {{1, 3, 85, 20, 18}, {0, 1, 3, 4, 2}},
                                   {{40, 33}, {1, 0}},
                                   {{2, 17, 5, 16}, {0, 3, 2, 1}}};
  for (const Case& c : cases) {
    const size_t rank = c.shape.size();
    const std::vector<float> x = random(count_of(c.shape), 5);
    std::vector<int64_t> in_strides(rank, 1), out_shape(rank);
    for (size_t d = rank - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * c.shape[d];
    for (size_t k = 0; k < rank; ++k) out_shape[k] = c.shape[static_cast<size_t>(c.perm[k])];
    std::vector<double> want(x.size());
    std::vector<int64_t> i(rank, 0);  // the output index, odometer order
    for (size_t flat = 0; flat < want.size(); ++flat) {
      int64_t src = 0;
      for (size_t k = 0; k < rank; ++k) src += i[k] * in_strides[static_cast<size_t>(c.perm[k])];
      want[flat] = x[static_cast<size_t>(src)];
      for (size_t k = rank; k-- > 0;) {
        if (++i[k] < out_shape[k]) break;
        i[k] = 0;
      }
    }
    const auto got = run(transpose("tr", c.shape, c.perm), {x});
    EXPECT_EQ(worst(got, want), 0.0) << "rank " << rank << " perm[0] " << c.perm[0];
  }
  EXPECT_THROW(transpose("tr", {2, 3}, {0, 0}), Error);
  EXPECT_THROW(transpose("tr", {2, 3}, {0, 1, 2}), Error);
}

TEST(ModelOps, BroadcastBinaryMatchesNumpyRules) {
  struct Case {
    std::string op;
    std::vector<int64_t> a, b;
  };
  const std::vector<Case> cases = {{"add", {1, 2, 8, 8}, {1, 1, 1, 8}},  // an attention mask
                                   {"sub", {2, 3, 20}, {20}},
                                   {"mul", {3, 1}, {1, 5}},
                                   {"div", {2, 3, 17}, {}},
                                   {"sub", {4}, {3, 1}},
                                   {"add", {2, 3}, {2, 3}}};
  for (const Case& c : cases) {
    const std::vector<int64_t> out = *broadcast_shape(c.a, c.b);
    const std::vector<float> a = random(std::max<int64_t>(count_of(c.a), 1), 6);
    std::vector<float> b = random(std::max<int64_t>(count_of(c.b), 1), 7);
    for (float& v : b) v += v < 0 ? -0.5f : 0.5f;  // a divisor away from 0
    // The element of an operand at output index i (aligned at the trailing axes).
    const auto at = [&](const std::vector<float>& v, const std::vector<int64_t>& s,
                        const std::vector<int64_t>& i) {
      int64_t flat = 0;
      for (size_t d = 0; d < s.size(); ++d)
        flat = flat * s[d] + (s[d] == 1 ? 0 : i[i.size() - s.size() + d]);
      return v[static_cast<size_t>(flat)];
    };
    std::vector<double> want;
    std::vector<int64_t> i(out.size(), 0);
    for (int64_t flat = 0; flat < count_of(out); ++flat) {
      const float x = at(a, c.a, i), y = at(b, c.b, i);
      want.push_back(c.op == "add" ? x + y : c.op == "sub" ? x - y : c.op == "mul" ? x * y : x / y);
      for (size_t k = out.size(); k-- > 0;) {
        if (++i[k] < out[k]) break;
        i[k] = 0;
      }
    }
    const auto got = run(broadcast_binary("bc", c.op, c.a, c.b, out), {a, b});
    EXPECT_EQ(worst(got, want), 0.0) << c.op << " rank " << out.size();
  }
  EXPECT_FALSE(broadcast_shape({2, 3}, {4, 3}));
  EXPECT_THROW(broadcast_binary("bc", "add", {2, 3}, {4, 3}, {4, 3}), Error);
}

TEST(ModelOps, ScalarAndUnaryElementwise) {
  const int64_t n = 1000;  // not a multiple of the vector width
  const std::vector<float> x = random(n, 8, -4.0f, 4.0f);
  struct Case {
    ElementwiseOp op;
    double (*ref)(double, double);
    double tolerance;
  };
  // The scalar operations in float, as the kernel computes them: the results must be identical.
  const std::vector<Case> cases = {
      {{"add_scalar", 0, 0, 1.0f},
       [](double v, double c) { return double{static_cast<float>(v) + static_cast<float>(c)}; },
       0},
      {{"sub_scalar", 0, 0, 0.25f},
       [](double v, double c) { return double{static_cast<float>(v) - static_cast<float>(c)}; },
       0},
      {{"mul_scalar", 0, 0, 0.5f},
       [](double v, double c) { return double{static_cast<float>(v) * static_cast<float>(c)}; },
       0},
      {{"div_scalar", 0, 0, 1.4142135f},
       [](double v, double c) { return double{static_cast<float>(v) / static_cast<float>(c)}; },
       0},
      {{"pow_scalar", 0, 0, 2.0f}, [](double v, double) { return v * v; }, 1e-7},
      {{"erf"}, [](double v, double) { return std::erf(v); }, 5e-7},
      {{"gelu_erf"},
       [](double v, double) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); },
       1e-6},
  };
  for (const Case& c : cases) {
    std::vector<double> want;
    for (float v : x) want.push_back(c.ref(v, c.op.value));
    EXPECT_LE(worst(run(elementwise("ew", c.op, n), {x}), want), c.tolerance) << c.op.op;
  }
  std::vector<float> positive = random(n, 9, 0.0f, 100.0f);
  std::vector<double> roots;
  for (float v : positive) roots.push_back(std::sqrt(static_cast<double>(v)));
  EXPECT_LE(worst(run(elementwise("ew", ElementwiseOp{"sqrt"}, n), {positive}), roots), 1e-7);
}

// Compiles `f` for the host and runs it on byte buffers (uint8 inputs, in order); returns the
// uint8 output (the last argument), which starts as 0xA5 (an element never written shows unless
// its value is that byte).
std::vector<uint8_t> run_bytes(const te::LoweredFunc& f,
                               const std::vector<std::vector<uint8_t>>& inputs) {
  const codegen::Kernel k = codegen::Kernel::load(codegen::build(f, codegen::Target::host()));
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const size_t n = static_cast<size_t>(f.args[i].num_elements());
    bufs.emplace_back(n + 64, 0xA5);
    if (i < inputs.size()) {
      EXPECT_EQ(inputs[i].size(), n) << "argument " << i;
    }
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    uint8_t* p = bufs[i].data() + (64 - reinterpret_cast<uintptr_t>(bufs[i].data()) % 64) % 64;
    if (i < inputs.size()) std::copy(inputs[i].begin(), inputs[i].end(), p);
    ptrs.push_back(p);
  }
  EXPECT_EQ(k.run(ptrs), 0);
  const uint8_t* out = static_cast<uint8_t*>(ptrs.back());
  return {out, out + f.args.back().num_elements()};
}

std::vector<uint8_t> random_bytes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& x : v) x = static_cast<uint8_t>(u(rng));
  return v;
}

// The uint8 add: ((a - za) * sa + (b - zb) * sb) / sc rounded half to even, plus zc, saturated,
// clamped at zc with relu; every element within one step, at most 1% one step apart, both ends
// of the range reached.
TEST(ModelOps, QuantizedAddAsDequantizeAddQuantize) {
  const int64_t n = 1000;  // past one parallel chunk's lanes, not a multiple of 16
  const std::vector<uint8_t> a = random_bytes(n, 1), b = random_bytes(n, 2);
  for (const bool relu : {false, true}) {
    QuantizedAddOp op;
    op.a_scale = 0.031f;
    op.a_zero = 3;
    op.b_scale = 0.017f;
    op.b_zero = 140;
    op.out_scale = 0.02f;
    op.out_zero = 90;
    op.relu = relu;
    const std::vector<uint8_t> got = run_bytes(quantized_add("qadd", n, op), {a, b});
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    int saturated = 0, off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float va = static_cast<float>(a[i] - op.a_zero) * op.a_scale;
      const float vb = static_cast<float>(b[i] - op.b_zero) * op.b_scale;
      float y = std::nearbyint((va + vb) / op.out_scale) + static_cast<float>(op.out_zero);
      y = std::clamp(y, relu ? static_cast<float>(op.out_zero) : 0.0f, 255.0f);
      saturated += y == 255.0f || y == 0.0f;
      const int apart = std::abs(static_cast<int>(got[i]) - static_cast<int>(y));
      EXPECT_LE(apart, 1) << "element " << i << " relu " << relu;
      off += apart != 0;
    }
    // The kernel may fuse the multiply and the add (one rounding less): a sum within an ulp of a
    // half rounds to the other neighbour, one step apart.
    EXPECT_LE(off, n / 100) << "relu " << relu;
    if (!relu) {
      EXPECT_GT(saturated, 0);
    }
  }
}

// A uint8 max pool on NCHWc data against loops: padding (never a maximum), stride 2, a padded
// last block.
TEST(ModelPool, BlockedUint8MaxPoolMatchesLoops) {
  const int64_t n = 1, c = 19, h = 9, w = 11, block = 16, r = 3, stride = 2, pad = 1;
  const int64_t blocks = (c + block - 1) / block;
  const int64_t oh = (h + 2 * pad - r) / stride + 1, ow = (w + 2 * pad - r) / stride + 1;
  const std::vector<uint8_t> in = random_bytes(n * blocks * h * w * block, 3);
  BlockedPool pool{true, {n, c, h, w}, block, r, r, stride, pad};
  pool.dtype = te::UInt(8);
  const std::vector<uint8_t> got = run_bytes(pool_blocked("pool", pool), {in});
  ASSERT_EQ(got.size(), static_cast<size_t>(n * blocks * oh * ow * block));
  for (int64_t cb = 0; cb < blocks; ++cb)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t l = 0; l < block; ++l) {
          int want = -1;
          for (int64_t i = 0; i < r; ++i)
            for (int64_t j = 0; j < r; ++j) {
              const int64_t iy = y * stride + i - pad, ix = x * stride + j - pad;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                want = std::max<int>(want,
                                     in[static_cast<size_t>(((cb * h + iy) * w + ix) * block + l)]);
            }
          EXPECT_EQ(got[static_cast<size_t>(((cb * oh + y) * ow + x) * block + l)], want)
              << "block " << cb << " (" << y << ", " << x << ") lane " << l;
        }
  BlockedPool average = pool;
  average.max = false;
  try {
    pool_blocked("avg", average);
    FAIL() << "built an average pool of uint8";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
}

}  // namespace
}  // namespace ktune::deploy

namespace ktune::deploy {
namespace {

// Pools on NCHWc data against loops over NCHW: odd channel counts (a padded last block, its lanes
// zero in and out), padding, stride 2, and a global average.
// QuantizeLinear: ONNX's x / scale rounded half to even, plus the zero point, saturated (ties
// and out-of-range values included); DequantizeLinear: (q - zero point) * scale. The uint8 and
// int8 buffers are the byte-wise ones of a compiled kernel: the quantized output is filled with
// 0xA5 first (an element never written shows unless its value is that byte).
TEST(ModelOps, QuantizeAndDequantizeLinearAsOnnx) {
  const float scale = 0.5f;
  // Ties at x / scale = k + 0.5 (round to even), and values past either end of the range.
  std::vector<float> x = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 100.0f, -100.0f, 0.0f, 3.0f, -3.3f};
  x.resize(37, 0.3f);  // past one vector of lanes
  for (const auto& [type, zp, lo, hi] : {std::tuple{te::UInt(8), int64_t{128}, 0.0, 255.0},
                                         std::tuple{te::Int(8), int64_t{-3}, -128.0, 127.0}}) {
    const int64_t n = static_cast<int64_t>(x.size());
    const codegen::Kernel q = codegen::Kernel::load(
        codegen::build(quantize_linear("q", n, {{scale}, {zp}}, type), codegen::Target::host()));
    const codegen::Kernel dq = codegen::Kernel::load(
        codegen::build(dequantize_linear("dq", n, {{scale}, {zp}}, type), codegen::Target::host()));
    Buffer in(n), out(n);
    std::copy(x.begin(), x.end(), in.data());
    std::vector<unsigned char> bytes(static_cast<size_t>(n) + 64, 0xA5);
    void* qp = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
    ASSERT_EQ(q.run({in.data(), qp}), 0);
    std::fill(out.data(), out.data() + n, NAN);
    ASSERT_EQ(dq.run({qp, out.data()}), 0);
    for (int64_t i = 0; i < n; ++i) {
      const double want =
          std::clamp(std::nearbyint(static_cast<double>(x[static_cast<size_t>(i)]) / scale) +
                         static_cast<double>(zp),
                     lo, hi);
      const double got = type == te::UInt(8) ? static_cast<unsigned char*>(qp)[i]
                                             : static_cast<signed char*>(qp)[i];
      EXPECT_EQ(got, want) << type.str() << " element " << i << " x=" << x[static_cast<size_t>(i)];
      EXPECT_EQ(out.data()[i], static_cast<float>(want - static_cast<double>(zp)) * scale)
          << type.str() << " element " << i;
    }
  }
}

// QuantizeLinear straight into NCHWc: 3 channels in one block of 4 (the stem of a quantized CNN)
// and 19 in blocks of 16 (a padded last block), uint8 and int8, ties and both ends of the range;
// every element of the blocked output (written over 0xA5) equals the quantized input element of
// its channel, every padding lane zero.
TEST(ModelOps, QuantizeLinearBlockedAsQuantizeThenBlock) {
  const float scale = 0.5f;
  for (const auto& [c, block] : {std::pair<int64_t, int64_t>{3, 4}, {19, 16}}) {
    for (const auto& [type, zp, lo, hi] : {std::tuple{te::UInt(8), int64_t{128}, 0.0, 255.0},
                                           std::tuple{te::Int(8), int64_t{-3}, -128.0, 127.0}}) {
      const int64_t n = 1, h = 5, w = 7, blocks = (c + block - 1) / block;
      std::vector<float> x = random(n * c * h * w, 11, -80.0f, 80.0f);
      for (size_t i = 0; i < 6; ++i) x[i * 7] = 0.25f + 0.5f * static_cast<float>(i);  // ties
      const codegen::Kernel k = codegen::Kernel::load(
          codegen::build(quantize_linear_blocked("qb", {n, c, h, w}, block, scale, zp, type),
                         codegen::Target::host()));
      Buffer in(n * c * h * w);
      std::copy(x.begin(), x.end(), in.data());
      std::vector<unsigned char> bytes(static_cast<size_t>(n * blocks * h * w * block) + 64, 0xA5);
      void* qp = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
      ASSERT_EQ(k.run({in.data(), qp}), 0);
      for (int64_t cb = 0; cb < blocks; ++cb)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t q = 0; q < w; ++q)
            for (int64_t l = 0; l < block; ++l) {
              const int64_t ch = cb * block + l, at = ((cb * h + y) * w + q) * block + l;
              const double v = ch < c ? x[static_cast<size_t>((ch * h + y) * w + q)] : 0.0;
              const double want =
                  ch < c ? std::clamp(std::nearbyint(v / scale) + static_cast<double>(zp), lo, hi)
                         : 0.0;
              const double got = type == te::UInt(8) ? static_cast<unsigned char*>(qp)[at]
                                                     : static_cast<signed char*>(qp)[at];
              EXPECT_EQ(got, want)
                  << type.str() << " C=" << c << " channel " << ch << " at " << y << "," << q;
            }
    }
  }
}

// Per axis: element i of a [2, 3, 5] tensor quantized along axis 1 takes channel i / 5 % 3's scale
// and zero point, read from the kernel's scale and zero_point arguments.
TEST(ModelOps, QuantizeAndDequantizeLinearPerAxisAsOnnx) {
  const QuantParams p{{0.5f, 0.25f, 2.0f}, {128, 0, 255}, 5};
  const int64_t n = 2 * 3 * 5;
  const codegen::Kernel q = codegen::Kernel::load(
      codegen::build(quantize_linear("q", n, p, te::UInt(8)), codegen::Target::host()));
  const codegen::Kernel dq = codegen::Kernel::load(
      codegen::build(dequantize_linear("dq", n, p, te::UInt(8)), codegen::Target::host()));
  Buffer in(n), scale(3), zero(3), out(n);
  for (int64_t i = 0; i < n; ++i) in.data()[i] = 0.3f * static_cast<float>(i - 12);
  for (int64_t c = 0; c < 3; ++c) {
    scale.data()[c] = p.scale[static_cast<size_t>(c)];
    zero.data()[c] = static_cast<float>(p.zero_point[static_cast<size_t>(c)]);
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(n) + 64, 0xA5);
  void* qp = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
  ASSERT_EQ(q.run({in.data(), scale.data(), zero.data(), qp}), 0);
  std::fill(out.data(), out.data() + n, NAN);
  ASSERT_EQ(dq.run({qp, scale.data(), zero.data(), out.data()}), 0);
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = static_cast<size_t>(i / 5 % 3);
    const double zp = static_cast<double>(p.zero_point[c]);
    const double want =
        std::clamp(std::nearbyint(static_cast<double>(in.data()[i]) / p.scale[c]) + zp, 0.0, 255.0);
    EXPECT_EQ(static_cast<unsigned char*>(qp)[i], want) << "element " << i;
    EXPECT_EQ(out.data()[i], static_cast<float>(want - zp) * p.scale[c]) << "element " << i;
  }
}

TEST(ModelPool, BlockedMaxAndAveragePoolsMatchLoops) {
  struct Case {
    bool max;
    int64_t n, c, h, w, block, r, s, stride, pad;
  };
  for (const Case& k :
       {Case{true, 1, 19, 9, 11, 16, 3, 3, 2, 1}, Case{false, 2, 8, 7, 7, 8, 3, 3, 1, 1},
        Case{false, 1, 35, 7, 7, 16, 7, 7, 1, 0}, Case{true, 1, 16, 6, 5, 16, 2, 2, 2, 0}}) {
    const int64_t blocks = (k.c + k.block - 1) / k.block;
    const int64_t oh = (k.h + 2 * k.pad - k.r) / k.stride + 1,
                  ow = (k.w + 2 * k.pad - k.s) / k.stride + 1;
    const std::vector<float> nchw = random(k.n * k.c * k.h * k.w, 5);
    std::vector<float> blocked(static_cast<size_t>(k.n * blocks * k.h * k.w * k.block), 0.0f);
    for (int64_t i = 0; i < k.n; ++i)
      for (int64_t c = 0; c < k.c; ++c)
        for (int64_t y = 0; y < k.h; ++y)
          for (int64_t x = 0; x < k.w; ++x)
            blocked[static_cast<size_t>(
                (((i * blocks + c / k.block) * k.h + y) * k.w + x) * k.block + c % k.block)] =
                nchw[static_cast<size_t>(((i * k.c + c) * k.h + y) * k.w + x)];
    const BlockedPool pool{k.max, {k.n, k.c, k.h, k.w}, k.block, k.r, k.s, k.stride, k.pad};
    const std::vector<float> got = run(pool_blocked("pool", pool), {blocked});
    std::vector<double> want(got.size(), 0.0);
    for (int64_t i = 0; i < k.n; ++i)
      for (int64_t c = 0; c < blocks * k.block; ++c)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            double acc = k.max ? -INFINITY : 0.0;
            for (int64_t a = 0; a < k.r; ++a)
              for (int64_t b = 0; b < k.s; ++b) {
                const int64_t iy = y * k.stride + a - k.pad, ix = x * k.stride + b - k.pad;
                const bool inside = iy >= 0 && iy < k.h && ix >= 0 && ix < k.w;
                const double v =
                    !inside   ? (k.max ? -INFINITY : 0.0)
                    : c < k.c ? nchw[static_cast<size_t>(((i * k.c + c) * k.h + iy) * k.w + ix)]
                              : 0.0;
                acc = k.max ? std::max(acc, v) : acc + v;
              }
            if (!k.max) acc /= static_cast<double>(k.r * k.s);
            want[static_cast<size_t>((((i * blocks + c / k.block) * oh + y) * ow + x) * k.block +
                                     c % k.block)] = acc;
          }
    EXPECT_LE(worst(got, want), 1e-6)
        << (k.max ? "max" : "avg") << " c=" << k.c << " pad=" << k.pad;
  }
}

}  // namespace
}  // namespace ktune::deploy

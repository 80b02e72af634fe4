// Tests of the skip_padding_taps lowering pass: the IR it makes, results equal to the reference
// with and without it, and the multiplications executed equal to the taps inside the input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/poison.h"
#include "tests/te/te_ops.h"
#include "tests/te/unrolled_guards.h"

namespace ktune::te {
namespace {

constexpr double kTolerance = 1e-5;

struct Conv {
  int64_t n, c, h, w, k, r, s, stride, pad;
  int64_t oh() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - s) / stride + 1; }
  // Multiply-adds of the taps that fall inside the input (the padding's are not work).
  int64_t valid_macs() const {
    int64_t taps = 0;
    for (int64_t y = 0; y < oh(); ++y)
      for (int64_t x = 0; x < ow(); ++x)
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < s; ++j) {
            const int64_t iy = y * stride + i - pad, ix = x * stride + j - pad;
            taps += iy >= 0 && iy < h && ix >= 0 && ix < w;
          }
    return n * k * c * taps;
  }
  int64_t nominal_macs() const { return n * k * c * oh() * ow() * r * s; }
  std::string str() const {
    return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
           std::to_string(w) + " k" + std::to_string(k) + " " + std::to_string(r) + "x" +
           std::to_string(s) + " stride " + std::to_string(stride) + " pad " + std::to_string(pad);
  }
};

// NCHW conv with the padding inlined (te_ops' conv2d has square-free R x S).
testing::OpDef conv_op(const Conv& cv) {
  return testing::conv2d(cv.n, cv.c, cv.h, cv.w, cv.k, cv.r, cv.s, cv.stride, cv.pad);
}

void inline_pad(Schedule& s) {
  for (const StageNode& st : s.node().stages)
    if (st.name == "pad") s[st.tensor].compute_inline();
}

// A schedule like the conv templates': output tiles (rows x columns), the accumulator computed
// at the column tile with the reduction outside an unrolled register tile, `vector_cols`
// vectorizing the tile's columns (NCHW) or not.
Schedule tiled(const testing::OpDef& op, int64_t tile_h, int64_t tile_w, bool vector_cols) {
  Schedule s = create_schedule(op.outputs);
  s.skip_padding_taps(true);
  const Tensor out = op.outputs[0];
  const Tensor acc = s.cache_write(out, "local");
  Stage o = s[out];
  auto [yo, xo, yi, xi] = o.tile(o.axis(2), o.axis(3), tile_h, tile_w);
  Stage a = s[acc];
  a.compute_at(o, xo);
  a.reorder({a.axis(0), a.axis(1), a.reduce_axis(0), a.reduce_axis(1), a.reduce_axis(2), a.axis(2),
             a.axis(3)});
  a.unroll(a.axis(2));
  if (vector_cols) {
    a.vectorize(a.axis(3));
  } else {
    a.unroll(a.axis(3));
  }
  inline_pad(s);
  return s;
}

struct Outcome {
  HostBuffer out;
  int64_t muls = 0;
  std::string pass_ir, ir;  // after cut_border_tiles (when run) and lowered
  int guards_in_tiles = 0;  // after cut_border_tiles: Ifs inside unrolled loops
};

Outcome run(const testing::OpDef& op, const Schedule& s, const std::vector<HostBuffer>& inputs,
            bool skip) {
  LowerOptions o;
  o.skip_padding_taps = skip;
  std::string after_pass;
  int guards_in_tiles = 0;
  o.on_pass = [&](const std::string& pass, const Stmt& st) {
    if (pass != "cut_border_tiles") return;
    after_pass = to_string(st);
    guards_in_tiles = testing::ifs_in_unrolled_loops(st);
  };
  const LoweredFunc f = lower(s, op.args(), "f", o);
  Outcome r{HostBuffer(op.outputs[0].shape(), op.outputs[0].dtype()), 0, after_pass, to_string(f),
            guards_in_tiles};
  testing::poison(r.out);
  std::vector<HostBuffer*> args;
  for (const HostBuffer& b : inputs) args.push_back(const_cast<HostBuffer*>(&b));
  args.push_back(&r.out);
  InterpretCounts counts;
  interpret(f, args, &counts);
  r.muls = counts.float_muls;
  return r;
}

std::vector<HostBuffer> random_inputs(const testing::OpDef& op) {
  std::vector<HostBuffer> in;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    in.emplace_back(op.inputs[i].shape(), op.inputs[i].dtype());
    in.back().fill_random(7 + i);
  }
  return in;
}

HostBuffer reference(const testing::OpDef& op, const std::vector<HostBuffer>& in) {
  std::vector<std::pair<Tensor, const HostBuffer*>> pairs;
  for (size_t i = 0; i < in.size(); ++i) pairs.emplace_back(op.inputs[i], &in[i]);
  return std::move(evaluate(op.outputs, pairs)[0]);
}

TEST(SkipPaddingTapsTest, GuardsTheTapsAndUnswitchesEachPixel) {
  const testing::OpDef op = conv_op({1, 1, 4, 4, 1, 3, 3, 1, 1});
  Schedule s = create_schedule(op.outputs);
  s.skip_padding_taps(true);
  inline_pad(s);
  std::string after;
  LowerOptions o;
  o.on_pass = [&](const std::string& pass, const Stmt& st) {
    if (pass == "cut_border_tiles") after = to_string(st);
  };
  lower(s, op.args(), "conv", o);
  EXPECT_EQ(after, R"(for (conv.k, 0, 4) {
  for (conv.l, 0, 4) {
    conv[((conv.k*4) + conv.l)] = 0.0f;
    if ((((((conv.k - 1) >= 0) && (((conv.k*-1) + 2) >= 0)) && ((conv.l - 1) >= 0)) && (((conv.l*-1) + 2) >= 0))) {
      for (ry, 0, 3) {
        for (rx, 0, 3) {
          conv[((conv.k*4) + conv.l)] = (conv[((conv.k*4) + conv.l)] + (X[(((((conv.k*4) + (ry*4)) + conv.l) + rx) - 5)]*W[((ry*3) + rx)]));
        }
      }
    } else {
      for (ry, 0, 3) {
        for (rx, 0, 3) {
          if ((((((conv.k + ry) >= 1) && ((conv.k + ry) < 5)) && ((conv.l + rx) >= 1)) && ((conv.l + rx) < 5))) {
            conv[((conv.k*4) + conv.l)] = (conv[((conv.k*4) + conv.l)] + (X[(((((conv.k*4) + (ry*4)) + conv.l) + rx) - 5)]*W[((ry*3) + rx)]));
          }
        }
      }
    }
  }
}
)");
}

// Odd shapes, pads 0-3, strides 1-2; the default schedule, a register tile over pixels and one
// over vectorized columns. Results match the reference with and without the pass; with it, the
// multiplications are the valid taps' (columns in vectors: between valid and nominal).
TEST(SkipPaddingTapsTest, ComputesOnlyTheValidTaps) {
  int cases = 0;
  for (int64_t pad = 0; pad <= 3; ++pad) {
    for (int64_t stride = 1; stride <= 2; ++stride) {
      const Conv cv{1, 3, 7, 5, 2, 3, pad == 3 ? 5 : 3, stride, pad};
      const testing::OpDef op = conv_op(cv);
      const std::vector<HostBuffer> in = random_inputs(op);
      const HostBuffer ref = reference(op, in);
      Schedule root = create_schedule(op.outputs);
      root.skip_padding_taps(true);
      inline_pad(root);
      const Schedule schedules[] = {root, tiled(op, 2, 3, false), tiled(op, 3, 2, true)};
      for (int i = 0; i < 3; ++i) {
        SCOPED_TRACE(cv.str() + " schedule " + std::to_string(i));
        const Outcome with = run(op, schedules[i], in, true);
        const Outcome without = run(op, schedules[i], in, false);
        EXPECT_LE(max_relative_error(with.out, ref), kTolerance) << with.ir;
        EXPECT_LE(max_relative_error(without.out, ref), kTolerance);
        // Without the pass every tap is multiplied, but for rows the simplifier finds all padding.
        EXPECT_LE(without.muls, cv.nominal_macs());
        EXPECT_GE(without.muls, with.muls);
        if (pad < 3) {
          EXPECT_EQ(without.muls, cv.nominal_macs());
        }
        if (i < 2) {
          EXPECT_EQ(with.muls, cv.valid_macs()) << with.ir;
        } else {
          EXPECT_GE(with.muls, cv.valid_macs());
          EXPECT_LE(with.muls, cv.nominal_macs());
          if (pad > 0) {
            EXPECT_LT(with.muls, cv.nominal_macs()) << with.ir;  // rows still skip
          }
        }
        if (pad > 0 && i == 1) {
          EXPECT_NE(with.pass_ir.find("} else {"), std::string::npos) << with.pass_ir;
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 24);
}

// Max pooling: the padding is lowest, never the maximum; skipped taps leave the same result,
// including where every valid tap is below the padding value (only the skip is exact there).
TEST(SkipPaddingTapsTest, MaxPoolSkipsLowestPadding) {
  const int64_t h = 5, w = 6, k = 3, pad = 1, stride = 2;
  const Tensor X = placeholder({1, 2, h, w}, Float(32), "X");
  const Tensor P = compute(
      {1, 2, h + 2 * pad, w + 2 * pad},
      [&](Var b, Var c, Var y, Var x) {
        const Expr in = y >= pad && y < h + pad && x >= pad && x < w + pad;
        return select(in, X(b, c, y - pad, x - pad), -std::numeric_limits<float>::infinity());
      },
      "pad");
  const IterVar ry = reduce_axis({0, k}, "ry"), rx = reduce_axis({0, k}, "rx");
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  const Tensor O = compute(
      {1, 2, oh, ow},
      [&](Var b, Var c, Var y, Var x) {
        return max(P(b, c, y * stride + ry, x * stride + rx), {ry, rx});
      },
      "pool");
  const testing::OpDef op{"max_pool_pad", {X}, {O}};
  std::vector<HostBuffer> in = random_inputs(op);
  const HostBuffer ref = reference(op, in);
  Schedule s = create_schedule(op.outputs);
  s.skip_padding_taps(true);
  inline_pad(s);
  const Outcome with = run(op, s, in, true);
  EXPECT_LE(max_relative_error(with.out, ref), kTolerance) << with.ir;
  EXPECT_EQ(with.ir.find("select("), std::string::npos) << with.ir;
  EXPECT_NE(with.pass_ir.find("} else {"), std::string::npos) << with.pass_ir;
}

// A Select that is not the update's identity (a clamp to 1, not 0) is left alone.
TEST(SkipPaddingTapsTest, LeavesOtherSelects) {
  const Tensor X = placeholder({6}, Float(32), "X");
  const IterVar r = reduce_axis({0, 3}, "r");
  const Tensor O = compute(
      {4}, [&](Var i) { return sum(select(i + r < 5, X(i + r), 1.0f), {r}); }, "O");
  Schedule s = create_schedule({O});
  s.skip_padding_taps(true);
  const std::string ir = to_string(lower(s, {X, O}, "f"));
  EXPECT_NE(ir.find("select("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
}

// Border tiles of an unrolled register tile of vectors are cut by tap: the rows of a 2 x 4 tile
// whose columns are lanes become versions without a branch, so where the tiles divide the output
// (no split tail guards) and a 3 x 3 window's versions fit the budget, no guard is left inside an
// unrolled loop, and the rows multiply only their valid taps. A tile of scalars is not cut (LLVM
// 19's SLP vectorizer miscompiled its unrolled versions): its guards stay in the unrolled loops.
// A 5 x 5 window with padding 2 needs more versions than the budget: some conjuncts stay guards.
TEST(SkipPaddingTapsTest, CutsBorderTilesByTap) {
  const std::vector<Conv> whole = {
      {1, 2, 8, 8, 1, 3, 3, 1, 1}, {1, 2, 6, 12, 2, 3, 3, 1, 1}, {1, 2, 7, 15, 1, 3, 3, 2, 1}};
  const std::vector<Conv> partly = {
      {1, 2, 7, 9, 2, 3, 3, 1, 1}, {1, 2, 9, 9, 1, 3, 3, 2, 1}, {1, 1, 6, 8, 1, 5, 5, 1, 2}};
  int cases = 0;
  for (const bool divides : {true, false}) {
    for (const Conv& cv : divides ? whole : partly) {
      SCOPED_TRACE(cv.str());
      const testing::OpDef op = conv_op(cv);
      const std::vector<HostBuffer> in = random_inputs(op);
      const HostBuffer ref = reference(op, in);
      const Outcome vectors = run(op, tiled(op, 2, 4, true), in, true);
      const Outcome scalars = run(op, tiled(op, 2, 4, false), in, true);
      EXPECT_LE(max_relative_error(vectors.out, ref), kTolerance) << vectors.ir;
      EXPECT_LE(max_relative_error(scalars.out, ref), kTolerance) << scalars.ir;
      EXPECT_EQ(scalars.muls, cv.valid_macs()) << scalars.pass_ir;
      EXPECT_GE(vectors.muls, cv.valid_macs());
      EXPECT_LT(vectors.muls, cv.nominal_macs()) << vectors.pass_ir;
      EXPECT_GT(scalars.guards_in_tiles, 0) << scalars.pass_ir;
      if (divides) {
        EXPECT_EQ(vectors.guards_in_tiles, 0) << vectors.pass_ir;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 6);
}

}  // namespace
}  // namespace ktune::te

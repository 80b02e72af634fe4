// NCHW conv2d, max_pool2d and avg_pool2d with their padding inlined: with skip_taps the lowering
// skips the padding taps (skip_padding_taps), runs interior tiles unguarded and cuts border tiles
// of vectors by tap (cut_border_tiles). Checked with te's interpreter on odd shapes, pads 0-3 and
// strides 1-2: the taps each config executes, counted against the taps inside the input, and the
// outputs (NaN-filled) against the reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"
#include "tests/te/unrolled_guards.h"

namespace ktune::schedule_space {
namespace {

struct Window {
  int64_t h, w, r, s, stride, pad;
  int64_t oh() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - s) / stride + 1; }
  // Taps summed over the output pixels: those inside the input, those whose row is inside (a
  // vector of columns cannot skip some lanes, so columns in vectors skip only rows), all.
  struct Taps {
    int64_t valid = 0, rows = 0, nominal = 0;
  };
  Taps taps() const {
    Taps t;
    for (int64_t y = 0; y < oh(); ++y)
      for (int64_t x = 0; x < ow(); ++x)
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < s; ++j) {
            const int64_t iy = y * stride + i - pad, ix = x * stride + j - pad;
            const bool row = iy >= 0 && iy < h;
            t.valid += row && ix >= 0 && ix < w;
            t.rows += row;
            ++t.nominal;
          }
    return t;
  }
};

// Which count is a tap: conv2d's multiplications, avg_pool2d's additions, max_pool2d's maxima.
enum class Op { kConv, kMaxPool, kAvgPool };

struct Case {
  Op op;
  std::string tmpl;
  std::map<std::string, std::string> args;
  Window window;
  int64_t per_tap;  // output channels x input channels (a pool: channels)
};

int64_t taps_of(Op op, const te::InterpretCounts& c) {
  switch (op) {
    case Op::kConv:
      return c.float_muls;
    case Op::kMaxPool:
      return c.float_min_max;
    case Op::kAvgPool:
      return c.float_adds;
  }
  return -1;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t pad = 0; pad <= 3; ++pad) {
    for (int64_t stride = 1; stride <= 2; ++stride) {
      const std::string p = std::to_string(pad), st = std::to_string(stride);
      const int64_t r = pad == 3 ? 5 : 3;
      out.push_back({Op::kConv,
                     "conv2d",
                     {{"C", "3"},
                      {"H", "7"},
                      {"W", "9"},
                      {"K", "2"},
                      {"R", std::to_string(r)},
                      {"S", "3"},
                      {"stride", st},
                      {"pad", p}},
                     {7, 9, r, 3, stride, pad},
                     2 * 3});
      const int64_t pw = pad + 2;  // a pool's padding is smaller than its window
      for (const Op op : {Op::kMaxPool, Op::kAvgPool})
        out.push_back({op,
                       op == Op::kMaxPool ? "max_pool2d" : "avg_pool2d",
                       {{"C", "2"},
                        {"H", "9"},
                        {"W", "7"},
                        {"R", std::to_string(pw)},
                        {"S", std::to_string(pw)},
                        {"stride", st},
                        {"pad", p}},
                       {9, 7, pw, pw, stride, pad},
                       2});
    }
  }
  return out;
}

// Every case's fallback and sampled configs with the padding inlined, with skip_taps 1 and 0.
// With it, the taps executed are the valid taps, or with columns in vectors the taps whose row is
// inside; without it, every tap the simplifier did not find in the padding. Outputs match the
// reference. The IR shows the interior/border unswitch in some configs of each padded case, and
// the cut: only tiles of vectors lose guards in their unrolled loops to it.
TEST(NchwPaddingTaps, InlinedPaddingRunsOnlyTheTapsInside) {
  const TargetTraits traits = testing::small_target();
  int checked = 0, unswitched = 0, cut = 0, scalar_tiles = 0;
  for (const Case& c : cases()) {
    const Task task = Task::create(c.tmpl, c.args, traits);
    const testing::Oracle oracle(task, 3);
    const Window::Taps taps = c.window.taps();
    std::vector<Config> configs = {task.fallback_config()};
    std::mt19937_64 rng(17);
    for (uint64_t i : task.space().sample(6, rng)) configs.push_back(task.space().get(i));
    int case_unswitched = 0;
    for (const Config& sampled : configs) {
      const Config inlined =
          c.window.pad > 0 ? testing::with_knobs(task, sampled, {{"pad_inline", 1}}) : sampled;
      const bool vector_cols = inlined["tile_ow"].values.back() > 1;
      int64_t skipped = -1;
      for (const int64_t skip : {1, 0}) {
        if (skip && c.window.pad == 0) continue;  // no skip_taps without padding
        const Config cfg =
            testing::with_knobs(task, inlined, {{"skip_taps", static_cast<uint64_t>(skip)}});
        SCOPED_TRACE(task.workload_key() + " " + cfg.to_json_string());
        const Instantiated inst = task.instantiate(cfg);
        std::string unswitch_ir;
        int guards_before_cut = 0, guards_after_cut = 0;
        te::LowerOptions o;
        o.on_pass = [&](const std::string& pass, const te::Stmt& s) {
          if (pass == "skip_padding_taps") {
            unswitch_ir = te::to_string(s);
            guards_before_cut = te::testing::ifs_in_unrolled_loops(s);
          } else if (pass == "cut_border_tiles") {
            guards_after_cut = te::testing::ifs_in_unrolled_loops(s);
          }
        };
        const te::LoweredFunc f = te::lower(inst.schedule, inst.args, "f", o);
        te::InterpretCounts counts;
        const double err =
            oracle.check([&](const std::vector<void*>& args) { te::interpret(f, args, &counts); });
        EXPECT_LT(err, 1e-4);
        const int64_t executed = taps_of(c.op, counts);
        if (skip) {
          EXPECT_EQ(executed, c.per_tap * (vector_cols ? taps.rows : taps.valid))
              << te::to_string(f);
          skipped = executed;
          case_unswitched += unswitch_ir.find("} else {") != std::string::npos;
          if (vector_cols) {
            cut += guards_after_cut < guards_before_cut;
          } else {
            EXPECT_EQ(guards_after_cut, guards_before_cut);  // scalar tiles are not cut
            ++scalar_tiles;
          }
        } else {
          EXPECT_LE(executed, c.per_tap * taps.nominal);
          if (c.window.pad == 0) {
            EXPECT_EQ(executed, c.per_tap * taps.nominal);
          }
          EXPECT_GE(executed, skipped);
          EXPECT_TRUE(unswitch_ir.empty());  // the pass runs only where the schedule asks
        }
        ++checked;
      }
    }
    if (c.window.pad > 0) {
      EXPECT_GT(case_unswitched, 0) << task.workload_key();
      EXPECT_LT(taps.valid, taps.nominal);
    }
    unswitched += case_unswitched;
  }
  // 3 templates x 7 configs: 2 unpadded cases (skip_taps 0) and 6 padded ones (1 and 0).
  EXPECT_EQ(checked, 3 * 7 * (2 + 6 * 2));
  EXPECT_GT(unswitched, 0);
  EXPECT_GT(cut, 0);
  EXPECT_GT(scalar_tiles, 0);
}

}  // namespace
}  // namespace ktune::schedule_space

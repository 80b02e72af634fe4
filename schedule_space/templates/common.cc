// Helpers shared by the built-in templates.
#include "schedule_space/templates/common.h"

#include <cmath>
#include <limits>
#include <random>

#include "support/error.h"

namespace ktune::schedule_space::templates {

ArgSpec dtype_arg() {
  return {.name = "dtype",
          .type = ArgSpec::Type::kString,
          .default_value = "float32",
          .doc = "element type",
          .choices = {"float32", "float64"}};
}

te::DataType dtype_of(const std::string& name) {
  if (name == "float32") return te::Float(32);
  if (name == "float64") return te::Float(64);
  throw Error(ErrorKind::kInvalidArgument, "unsupported dtype '" + name + "'");
}

std::vector<te::IterVar> apply_split(te::Stage stage, const te::IterVar& axis, const Entity& split,
                                     int64_t extent) {
  const std::vector<int64_t> f = split.split_factors(extent);
  std::vector<te::IterVar> loops;
  te::IterVar rest = axis;
  for (size_t i = 1; i < f.size(); ++i) {
    int64_t inner = 1;
    for (size_t j = i; j < f.size(); ++j) inner *= f[j];
    auto [outer, in] = stage.split(rest, inner);
    loops.push_back(outer);
    rest = in;
  }
  loops.push_back(rest);
  return loops;
}

void unroll_if(te::Stage stage, const te::IterVar& loop, bool on) {
  if (on) stage.unroll(loop);
}

uint64_t closest_split(const Knob& knob, const std::vector<int64_t>& inner) {
  uint64_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (uint64_t i = 0; i < knob.size(); ++i) {
    const auto& v = knob.entity(i).values;
    double d = 0;
    for (size_t j = 0; j < inner.size() && j + 1 < v.size(); ++j)
      d += std::abs(std::log2(static_cast<double>(v[j + 1])) -
                    std::log2(static_cast<double>(inner[j])));
    if (d < best_d) {
      best_d = d;
      best = i;
    }
  }
  return best;
}

uint64_t widest_split_at_most(const Knob& knob, int64_t cap) {
  uint64_t best = 0;
  int64_t best_f = 0;
  for (uint64_t i = 0; i < knob.size(); ++i) {
    const int64_t f = knob.entity(i).values.back();
    if (f <= cap && f > best_f) {
      best_f = f;
      best = i;
    }
  }
  return best;
}

uint64_t closest_int(const Knob& knob, int64_t v) {
  uint64_t best = 0;
  int64_t best_d = std::numeric_limits<int64_t>::max();
  for (uint64_t i = 0; i < knob.size(); ++i) {
    const Entity& e = knob.entity(i);
    if (e.is_string) continue;
    const int64_t d = std::abs(e.values[0] - v);
    if (d < best_d) {
      best_d = d;
      best = i;
    }
  }
  return best;
}

Config pick_fallback(const ConfigSpace& space, const std::vector<uint64_t>& digits) {
  const uint64_t index = space.index_of(digits);
  if (space.is_valid(index)) return space.get(index);
  std::mt19937_64 rng(0);
  const auto pick = space.sample(1, rng);
  if (pick.empty()) throw Error(ErrorKind::kInvalidArgument, "config space has no valid config");
  return space.get(pick[0]);
}

ArgSpec int_arg(const char* name, const char* def, const char* doc, int64_t min_value) {
  return {.name = name, .default_value = def, .doc = doc, .min_value = min_value};
}

ArgSpec stride_w_arg() {
  ArgSpec a = int_arg("stride_w", "0", "column stride when it differs from stride (0: stride)", 0);
  a.key_omits_default = true;
  return a;
}

std::vector<ArgSpec> side_pad_args() {
  std::vector<ArgSpec> v;
  for (const char* name : {"pad_left", "pad_bottom", "pad_right"}) {
    ArgSpec a = int_arg(name, "-1", "padding of this side when it differs from pad (-1: pad)", -1);
    a.key_omits_default = true;
    v.push_back(a);
  }
  return v;
}

namespace {

// `padded`: the input's extent with the padding of both ends.
int64_t window_out_extent(const std::string& tmpl, int64_t padded, int64_t window, int64_t stride,
                          int64_t dilation) {
  const int64_t span = dilation * (window - 1) + 1;
  if (padded < span)
    throw Error(ErrorKind::kInvalidArgument, tmpl + ": window of " + std::to_string(span) +
                                                 " does not fit the padded input of " +
                                                 std::to_string(padded));
  return (padded - span) / stride + 1;
}

}  // namespace

Window window_of(const std::string& tmpl, const WorkloadArgs& a, bool has_dilation) {
  Window win{};
  win.n = a.get_int("N");
  win.c = a.get_int("C");
  win.h = a.get_int("H");
  win.w = a.get_int("W");
  win.r = a.get_int("R");
  win.s = a.get_int("S");
  win.stride = a.get_int("stride");
  win.pad = a.get_int("pad");
  win.dilation = has_dilation ? a.get_int("dilation") : 1;
  win.stride_w = win.stride;
  win.pad_left = win.pad_bottom = win.pad_right = win.pad;
  for (const auto& [name, value] : a.values()) {
    if (name == "stride_w" && a.get_int(name) > 0) win.stride_w = a.get_int(name);
    for (auto [side, field] : {std::pair{"pad_left", &win.pad_left},
                               {"pad_bottom", &win.pad_bottom},
                               {"pad_right", &win.pad_right}})
      if (name == side && a.get_int(name) >= 0) *field = a.get_int(name);
  }
  win.oh =
      window_out_extent(tmpl, win.h + win.pad + win.pad_bottom, win.r, win.stride, win.dilation);
  win.ow = window_out_extent(tmpl, win.w + win.pad_left + win.pad_right, win.s, win.stride_w,
                             win.dilation);
  return win;
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t auto_channel_block(int64_t channels) {
  if (channels <= 16) return channels;
  return ceil_div(channels, 8) * 8 < ceil_div(channels, 16) * 16 ? 8 : 16;
}

void resolve_channel_blocks(WorkloadArgs& a) {
  if (a.get_int("ic_block") == 0) a.set_int("ic_block", auto_channel_block(a.get_int("C")));
  if (a.get_int("oc_block") == 0) a.set_int("oc_block", auto_channel_block(a.get_int("K")));
}

double direct_conv_flop(int64_t n, int64_t k, int64_t oh, int64_t ow, int64_t c, int64_t window,
                        double epilogue_flop) {
  const double outputs = static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(oh) *
                         static_cast<double>(ow);
  return outputs * (2.0 * static_cast<double>(c) * static_cast<double>(window) + epilogue_flop);
}

namespace {

// I padded by `top` rows above, `left` columns before, `bottom` rows below and `right` columns
// after, `fill` (or zero) outside.
te::Tensor padded_copy(const te::Tensor& in, int64_t n, int64_t cblocks, int64_t h, int64_t w,
                       int64_t block, int64_t top, int64_t left, int64_t bottom, int64_t right,
                       te::DataType dt, const te::Expr& fill) {
  const te::Expr t(top), l(left);
  const te::Expr outside = fill.defined() ? fill : te::cast(dt, te::Expr(0.0));
  return te::compute(
      {n, cblocks, h + top + bottom, w + left + right, block},
      [&](te::Var b, te::Var c, te::Var y, te::Var x, te::Var lane) {
        te::Expr inside = y >= t && y < te::Expr(h + top) && x >= l && x < te::Expr(w + left);
        return te::select(inside, in(b, c, y - t, x - l, lane), outside);
      },
      "pad");
}

}  // namespace

te::Tensor pad_blocked_input(const te::Tensor& in, int64_t n, int64_t cblocks, int64_t h, int64_t w,
                             int64_t block, int64_t pad, te::DataType dt, int64_t extra_h,
                             int64_t extra_w, const te::Expr& fill) {
  return padded_copy(in, n, cblocks, h, w, block, pad, pad, pad + extra_h, pad + extra_w, dt, fill);
}

te::Tensor pad_blocked_window(const te::Tensor& in, const Window& win, int64_t cblocks,
                              int64_t block, te::DataType dt) {
  return padded_copy(in, win.n, cblocks, win.h, win.w, block, win.pad, win.pad_left, win.pad_bottom,
                     win.pad_right, dt, te::Expr());
}

void schedule_blocked_pad(te::Stage pad, bool inline_it, bool parallel) {
  if (inline_it) {
    pad.compute_inline();
    return;
  }
  pad.vectorize(pad.axis(4));
  const te::IterVar nc = pad.fuse(pad.axis(0), pad.axis(1));
  if (parallel) pad.parallel(nc);
}

void define_parallel(ConfigSpace& space) { space.define_knob("parallel", {0, 1}); }

void define_pad_inline_and_parallel(ConfigSpace& space, bool pad_inline_knob, bool padded) {
  if (pad_inline_knob)
    space.define_knob("pad_inline", padded ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  define_parallel(space);
}

void define_skip_taps(ConfigSpace& space, bool padded) {
  space.define_knob("skip_taps", padded ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
  space.set_legacy_value("skip_taps", 0);
  if (padded)
    space.add_constraint("skip_taps needs the padding inlined", [](const EntityView& v) {
      return v["skip_taps"].as_int() == 0 || v["pad_inline"].as_int() != 0;
    });
}

void apply_skip_taps(te::Schedule& s, const Config& cfg) {
  const Entity* e = cfg.find("skip_taps");
  s.skip_padding_taps(e && e->as_int() != 0);
}

}  // namespace ktune::schedule_space::templates

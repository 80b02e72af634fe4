// Built-in channel-blocked depthwise conv2d (NCHWc, the layout of conv2d_nchwc's input and output,
// and of oneDNN's blocked depthwise): the channel block is the vector lane dimension, so every
// load is a whole vector of channels at one pixel, whatever the stride. The micro-kernel keeps
// (rows) x (columns) accumulator vectors in registers; per window tap it loads one weight vector
// and one input vector per output pixel.
#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/depthwise_space.h"
#include "schedule_space/templates/epilogue.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "depthwise_conv2d_nchwc";

struct Shape : Window {
  int64_t block;
  Epilogue epilogue;  // what follows the convolution in the same tile loop
  int64_t blocks() const { return ceil_div(c, block); }
};

Shape shape_of(const WorkloadArgs& a) {
  Shape s{};
  static_cast<Window&>(s) = window_of(kName, a);
  s.block = a.get_int("block");
  if (s.block == 0) s.block = auto_channel_block(s.c);  // as conv2d_nchwc's output block
  s.epilogue = epilogue_of(a);
  return s;
}

struct Tensors {
  te::Tensor in, weight, padded, conv, out;  // padded: undefined without padding
  EpilogueInputs epilogue;
  // conv: the reduction when an epilogue stage follows it; undefined when the output is the
  // reduction itself.
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {in, weight};
    epilogue.append_to(v);
    v.push_back(out);
    return v;
  }
};

// I[N][ceil(C/b)][H][W][b], W[ceil(C/b)][R][S][b], O[N][ceil(C/b)][OH][OW][b], bias[ceil(C/b)][b],
// residual like O. Channel c sits in block c / b, lane c % b. Without an epilogue, lanes past C
// (the last block's padding) are computed like the others from the padding lanes of I and W:
// zero when either is zero (conv2d_nchwc's output is). With one, they are written as zeros, as
// conv2d_nchwc writes them: a bias or a clip would make them non-zero, and a next depthwise layer
// reads them.
Tensors make_tensors(const WorkloadArgs& a) {
  const Shape sh = shape_of(a);
  const te::DataType dt = dtype_of(a.get("dtype"));
  Tensors t;
  t.in = te::placeholder({sh.n, sh.blocks(), sh.h, sh.w, sh.block}, dt, "I");
  t.weight = te::placeholder({sh.blocks(), sh.r, sh.s, sh.block}, dt, "W");
  const std::vector<int64_t> out_shape = {sh.n, sh.blocks(), sh.oh, sh.ow, sh.block};
  t.epilogue = epilogue_inputs(sh.epilogue, {sh.blocks(), sh.block}, out_shape, dt);
  te::Tensor padded = t.in;
  if (sh.padded()) {
    padded = pad_blocked_window(t.in, sh, sh.blocks(), sh.block, dt);
    t.padded = padded;
  }
  const te::IterVar r = te::reduce_axis({0, sh.r}, "r"), s = te::reduce_axis({0, sh.s}, "s");
  const te::Expr st(sh.stride), stw(sh.stride_w), d(sh.dilation);
  const te::Tensor w = t.weight;
  const te::Tensor conv = te::compute(
      out_shape,
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        return te::sum(
            padded(n, c, y * st + r.var * d, x * stw + s.var * d, l) * w(c, r.var, s.var, l),
            {r, s});
      },
      sh.epilogue.empty() ? "dwconv" : "dwconv_acc");
  if (sh.epilogue.empty()) {
    t.out = conv;
    return t;
  }
  t.conv = conv;
  const te::Tensor bias = t.epilogue.bias, res = t.epilogue.residual;
  const bool masked = sh.c % sh.block != 0;
  t.out = te::compute(
      out_shape,
      [&](te::Var n, te::Var c, te::Var y, te::Var x, te::Var l) {
        te::Expr v =
            sh.epilogue.apply(conv(n, c, y, x, l), bias.defined() ? bias(c, l) : te::Expr(),
                              res.defined() ? res(n, c, y, x, l) : te::Expr(), dt);
        if (masked)
          v = te::select(c * te::Expr(sh.block) + l < te::Expr(sh.c), v,
                         te::cast(dt, te::Expr(0.0)));
        return v;
      },
      "dwconv");
  return t;
}

// The shared depthwise space (depthwise_space.h) with pad_inline, then:
//   skip_taps 0/1 (with pad_inline 1): te skips the padding taps and runs interior tiles
//            unguarded (skip_padding_taps)
void define_space(const Shape& sh, int dtype_bits, const TargetTraits& target, ConfigSpace& space) {
  define_depthwise_space(sh.oh, sh.ow, ceil_div(sh.block, target.vector_lanes(dtype_bits)),
                         {.pad_inline_knob = true, .padded = sh.padded()}, target, space);
  define_skip_taps(space, sh.padded());
}

Instantiated apply(const WorkloadArgs& a, const Config& cfg) {
  const Shape sh = shape_of(a);
  Tensors t = make_tensors(a);
  te::Schedule s = te::create_schedule({t.out});
  const te::Tensor acc_t = t.conv.defined() ? t.conv : s.cache_write(t.out, "local");
  schedule_depthwise(s, t.out, acc_t, sh.oh, sh.ow, cfg, kName);
  if (t.padded.defined())
    schedule_blocked_pad(s[t.padded], cfg["pad_inline"].as_int() != 0,
                         cfg["parallel"].as_int() != 0);
  apply_skip_taps(s, cfg);
  return Instantiated{s, t.args()};
}

}  // namespace

void register_depthwise_nchwc_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  d.doc =
      "channel-blocked depthwise conv2d: O[N,C/b,OH,OW,b] = sum_{r,s} I[N,C/b,H,W,b] * "
      "W[C/b,R,S,b] (stride, pad, "
      "dilation; blocks rounded up, padding lanes computed from the padding lanes of I and W, or "
      "zero with an "
      "epilogue: bias[C/b,b], residual like O, an activation)";
  d.args = {
      int_arg("N", "1", "batch"),
      int_arg("C", "", "channels"),
      int_arg("H", "", "input height"),
      int_arg("W", "", "input width"),
      int_arg("R", "3", "kernel height"),
      int_arg("S", "3", "kernel width"),
      int_arg("stride", "1", "stride (both axes, or the rows' with stride_w)"),
      int_arg("pad", "0", "zero padding (every side, or the rows above with pad_left, ...)", 0),
      int_arg("dilation", "1", "dilation (both axes)"),
      int_arg(
          "block", "0",
          "channels per block (innermost of I, W, O); 0: C up to 16, else 16 or 8 (less padding)",
          0)};
  for (ArgSpec& e : epilogue_args({.bias_doc = "bias[C/b,b]", .residual_doc = "residual like O"}))
    d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.args.push_back(stride_w_arg());
  for (ArgSpec& p : side_pad_args()) d.args.push_back(std::move(p));
  d.resolve = [](WorkloadArgs& a) {
    if (a.get_int("block") == 0) a.set_int("block", auto_channel_block(a.get_int("C")));
    resolve_epilogue(a);
  };
  d.check = [](const WorkloadArgs& a) {
    check_epilogue(kName, a);
    shape_of(a);
  };
  d.compute = [](const WorkloadArgs& a) {
    Tensors t = make_tensors(a);
    return ComputeDef{t.args(), {t.out}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return static_cast<double>(sh.n) * static_cast<double>(sh.c) * static_cast<double>(sh.oh) *
           static_cast<double>(sh.ow) *
           (2.0 * static_cast<double>(sh.r * sh.s) + sh.epilogue.flop());
  };
  d.define = [](const WorkloadArgs& a, const TargetTraits& target, ConfigSpace& space) {
    define_space(shape_of(a), dtype_of(a.get("dtype")).bits, target, space);
  };
  d.fallback = [](const WorkloadArgs& a, const TargetTraits& target, const ConfigSpace& space) {
    return depthwise_fallback(shape_of(a).ow, target, space);
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config& cfg) {
    return apply(a, cfg);
  };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
